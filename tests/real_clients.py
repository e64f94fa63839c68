"""The real harness clients (Claude Code, Codex, Hermes, OpenClaw), found and run as the tests
of `kint setup` run them: where each is installed (a missing one is a skip, a failure under
CI), a sandbox's environment with the clients on PATH and without KINT_HOME (so only what
setup wrote leads kint-server to the machine's supervisor), `kint setup` and a client's own
command run in it, and the check that the server a client started served from the
machine's KINT_HOME, not a second supervisor under `$HOME/.kint`. The tests are
test_setup_clients*.py, test_setup_*_argv.py, test_hermes_agent.py and their neighbours.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import KINT

from kint.spaces import space_id
from kint.supervisor.pidlock import running_pid

ROOT = Path(__file__).resolve().parent.parent
SERVER = str(Path(KINT).parent / "kint-server")
QUIET = {  # the clients' own telemetry and update checks stay off (no network here anyway)
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
}


def client_or_skip(path: Path | None, what: str) -> Path:
    """The client, else a skip naming what is missing; under CI (where `make test`
    installed it) a missing client is a failure, never a quiet skip."""
    if path is not None and path.exists():
        return path
    reason = (f"{what} is not installed ({path or 'not found'}): run `make test` "
              "(or `make node hermes`)")
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def claude_binary() -> Path | None:
    # The package's own bin is a placeholder its install script replaces; the install runs
    # with --ignore-scripts here, so run the platform package's native binary directly.
    found = sorted((ROOT / "node_modules" / "@anthropic-ai").glob("claude-code-*/claude"))
    return found[0] if found else None


def harness_env(sandbox, tmp_path: Path, **clis: Path) -> dict[str, str]:
    """The sandbox's environment with the given CLIs on PATH (and node, for Codex's
    launcher), without KINT_HOME."""
    bin_dir = tmp_path / "harness-bin"
    bin_dir.mkdir(exist_ok=True)
    for name, target in clis.items():
        link = bin_dir / name
        if not link.exists():
            link.symlink_to(target)
    node = shutil.which("node")
    extra = f":{Path(node).parent}" if node else ""
    env = {k: v for k, v in sandbox.env.items() if k != "KINT_HOME"}
    return {**env, **QUIET, "PATH": f"{bin_dir}{extra}:/usr/bin:/bin"}


def kint_setup(sandbox, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`kint setup` with the clients' PATH, and their TMPDIR when the test gave them one
    (the clients setup runs keep their temporary files where the test's own runs do)."""
    given = {k: env[k] for k in ("PATH", "TMPDIR") if k in env}
    out = sandbox.kint("setup", *args, env=given, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 180,
        stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, input=stdin, text=True, capture_output=True,
                          timeout=timeout)


def no_second_supervisor(sandbox) -> None:
    stray = sandbox.home / ".kint"
    assert not stray.exists(), f"a server fell back to {stray}"


def served_from_this_machine(sandbox) -> None:
    """The client's kint-server ran under the machine's KINT_HOME (its log line is there,
    naming the machine's tenant, store and space) and started the machine's supervisor,
    not one under the real home's ~/.kint."""
    label = sandbox.label(sandbox.sibyl_db)
    assert (f"kint-server: serving Sibyl's tools plus kint's on stdio (tenant "
            f"{sandbox.tenant}, db {sandbox.sibyl_db}); space {space_id(label)[:16]} ({label})"
            in (sandbox.kint_home / "kint.log").read_text())
    sandbox.wait_for(lambda: running_pid(sandbox.kint_home), what="the machine's supervisor")
    no_second_supervisor(sandbox)
