"""The service files in deploy/ carry the settings (issue 12, item 6): the systemd unit
passes `systemd-analyze verify`, both it and the launchd plist read the optional
environment file `~/.kint/supervisor.env`, and the supervisor they start reads the same
config.toml as every command. Install paths (pipx, uv, a virtualenv) are documented."""

from __future__ import annotations

import configparser
import json
import os
import plistlib
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import KINT

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


def _unit() -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment]
    unit.read(DEPLOY / "kint-supervisor.service")
    return unit


def _home_with_kint(root: Path) -> Path:
    """A HOME whose ~/.local/bin/kint is this checkout's (where pipx and uv put it)."""
    home = root / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "kint").symlink_to(KINT)
    return home


def test_the_systemd_unit_reads_the_environment_file_and_passes_systemd_analyze(tmp_path):
    service = _unit()["Service"]
    assert service["EnvironmentFile"] == "-%h/.kint/supervisor.env"  # optional
    assert service["ExecStart"] == "%h/.local/bin/kint supervisor start --foreground"
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed on this machine")
    home = _home_with_kint(tmp_path)
    unit = tmp_path / "kint-supervisor.service"
    shutil.copy(DEPLOY / "kint-supervisor.service", unit)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "SYSTEMD_LOG_LEVEL": "info"}
    out = subprocess.run([analyze, "verify", str(unit)], env=env, text=True,
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    # With the environment file present too (secrets live there, 0600).
    (home / ".kint").mkdir(mode=0o700)
    envfile = home / ".kint" / "supervisor.env"
    envfile.write_text("KINT_SESSION_PASSPHRASE=not-a-real-one\nKINT_QUIET_SECONDS=60\n")
    envfile.chmod(0o600)
    out = subprocess.run([analyze, "verify", str(unit)], env=env, text=True,
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_launchd_agent_reads_the_environment_file_and_the_config(sandbox, tmp_path):
    """The plist's own command, run as launchd runs it (its HOME, its arguments): the
    supervisor takes the environment file's values and the config file's."""
    with open(DEPLOY / "com.kint.supervisor.plist", "rb") as fh:
        plist = plistlib.load(fh)
    args = plist["ProgramArguments"]
    assert args[:2] == ["/bin/sh", "-c"]
    home = _home_with_kint(tmp_path)
    (home / ".kint").mkdir(mode=0o700)
    envfile = home / ".kint" / "supervisor.env"
    envfile.write_text(f"KINT_HOME={sandbox.kint_home}\nKINT_WORKER_IDLE_SECONDS=321\n")
    envfile.chmod(0o600)
    sandbox.kint_home.mkdir(mode=0o700, exist_ok=True)
    (sandbox.kint_home / "config.toml").write_text("quiet_seconds = 44\n")
    env = {**sandbox.env, "HOME": str(home), **plist["EnvironmentVariables"]}
    env.pop("KINT_HOME")
    proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        sandbox.wait_for(lambda: sandbox.client().ping(0.5), what="the launchd supervisor")
        out = sandbox.kint("config", "show", "--json")
        assert out.returncode == 0, out.stderr
        found = {e["name"]: (e["value"], e["source"]) for e in json.loads(out.stdout)["settings"]}
        assert found["KINT_WORKER_IDLE_SECONDS"] == (321, "daemon environment")
        assert found["KINT_QUIET_SECONDS"] == (44, "file")
        proc.send_signal(signal.SIGTERM)  # what launchd sends on unload
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_install_paths_are_documented():
    text = (ROOT / "docs" / "settings.md").read_text()
    for words in ("pipx install CHECKOUT", "uv tool install CHECKOUT", "python3 -m venv",
                  "~/.local/bin/kint", "supervisor.env", "config.toml"):
        assert words in text, words
    for name in ("kint-supervisor.service", "com.kint.supervisor.plist"):
        deploy = (DEPLOY / name).read_text()
        assert "pipx" in deploy and "uv tool install" in deploy and "venv" in deploy, name
