"""The service files in deploy/ parse, and the command they name runs the supervisor in
the foreground and stops cleanly on the signal the service manager sends."""

from __future__ import annotations

import configparser
import plistlib
import signal
import subprocess
from pathlib import Path

from conftest import KINT, pid_alive, write_store

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


def _systemd_command() -> list[str]:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read(DEPLOY / "kint-supervisor.service")
    assert unit["Install"]["WantedBy"] == "default.target"
    assert unit["Service"]["KillSignal"] == "SIGTERM"
    return unit["Service"]["ExecStart"].split()


def _launchd_command() -> list[str]:
    """The kint command the plist runs: it is `exec`ed by a /bin/sh that first reads the
    optional environment file (tests/test_settings_deploy.py runs the wrapper itself)."""
    import shlex

    with open(DEPLOY / "com.kint.supervisor.plist", "rb") as fh:
        plist = plistlib.load(fh)
    assert plist["Label"] == "com.kint.supervisor"
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    args = plist["ProgramArguments"]
    if args[:2] == ["/bin/sh", "-c"]:
        args = shlex.split(args[2].rsplit("exec ", 1)[1])
    return args


def _runs_in_foreground_and_stops_on_sigterm(sandbox, args: list[str]) -> None:
    assert Path(args[0]).name == "kint"
    assert args[1:] == ["supervisor", "start", "--foreground"]
    write_store(sandbox.sibyl_db)
    proc = subprocess.Popen([KINT, *args[1:]], env=sandbox.env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        sandbox.wait_for(lambda: sandbox.client().ping(0.5), what="the foreground supervisor")
        # The fresh supervisor's forkserver imports, which the first worker's start waits
        # for, are not what is bounded here: a loaded box took test_upgrade's past 10 s.
        sandbox.warm_up()
        worker = sandbox.call("status", sandbox.sibyl_db)["worker"]["pid"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    sandbox.wait_for(lambda: not pid_alive(worker), timeout=5, what="the worker exiting")


def test_systemd_unit_runs_the_supervisor(sandbox):
    _runs_in_foreground_and_stops_on_sigterm(sandbox, _systemd_command())


def test_launchd_plist_runs_the_supervisor(sandbox):
    _runs_in_foreground_and_stops_on_sigterm(sandbox, _launchd_command())



def _hermes_config() -> dict:
    import json

    # Hermes reads YAML; this file is written in YAML's JSON-compatible flow style (plus
    # comments), so the standard library can parse it here.
    text = (DEPLOY / "mcp" / "hermes.yaml").read_text()
    return json.loads("\n".join(line for line in text.splitlines()
                                if not line.lstrip().startswith("#")))


def _mcp_servers() -> dict[str, dict]:
    import json
    import tomllib

    claude = json.loads((DEPLOY / "mcp" / "claude-code.json").read_text())["mcpServers"]["kint"]
    codex = tomllib.loads((DEPLOY / "mcp" / "codex.toml").read_text())["mcp_servers"]["kint"]
    hermes = _hermes_config()["mcp_servers"]["kint"]
    return {"claude-code": claude, "codex": codex, "hermes": hermes}


def test_mcp_configs_name_kint_server_and_it_serves_fourteen_tools(sandbox):
    from mcp_session import AgentProcess

    servers = _mcp_servers()
    for name, server in servers.items():
        assert server["command"] == "kint-server", name
        assert server.get("args", []) == [], name
        assert server["env"]["SIBYL_MEMORY_TELEMETRY"] == "0", name
    server = servers["claude-code"]
    command = str(Path(KINT).parent / server["command"])
    agent = AgentProcess({**sandbox.env, **server["env"]}, command=[command]).start(timeout=90)
    try:
        assert len(set(agent.tools)) == 14
        assert {"memory_verify", "memory_remember"} <= set(agent.tools)
        status = agent.call("memory_status")
        assert status["ok"] is True and status["connected"] is False
    finally:
        agent.close()
