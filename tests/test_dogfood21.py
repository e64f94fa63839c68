"""What a day of using kint as an agent found (session 21's dogfood lane): `kint setup` for
Claude Code and Codex (the real CLIs), then kint-server started exactly as each saved
configuration says (its command, arguments and environment, the client's own environment
as each client passes it) and driven by the MCP SDK's stdio client, as the agent would.
The cases share one machine on the session's devchain, connected with `--dev` and one
row anchored, and the two registrations made once.

- Sibyl's own tool errors (a NOT_FOUND recall, a bad argument) came as the SDK's
  `Error executing tool NAME: {...}` text, which does not parse; v0.3.0's 08-tools.md says
  the text is JSON. The agent now gets that JSON object alone, Sibyl's keys as Sibyl
  wrote them, plus `ok: false` and a `hint`, as every kint error has them.
- memory_pull with discard_local, refused BUSY while another agent's kint-server holds the
  store, told the agent to call memory_pull with discard_local: the human's step now.
- A supervisor killed mid-session: the next one's worker knew none of the agents'
  sessions until their keepalive (a minute), while memory_status said `attached: true`;
  kint-server now attaches again at its next tool call.
- A kint tool refused by Sibyl in the worker (SIBYL_ERROR: the account, the store's
  permissions) passed Sibyl's terminal hint to the agent; it is the human's step now.
- kint-server stats Sibyl's credential files (Sibyl's own rebuild check) only before
  Sibyl's tools, which make the same check at that call; kint's tools do not reach
  Sibyl's client cache.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from chain_machines import anchored, new_machine
from conftest import KINT
from mcp_session import SUPPORT

ROOT = Path(__file__).resolve().parent.parent
SERVER = str(Path(KINT).parent / "kint-server")
RULE = "never ship on a Friday; every release needs a green deadlift test"
QUIET = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
         "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1"}
# What Codex passes a stdio server of its own environment besides the entry's `env` and
# `env_vars` (its default whitelist; kint.harnesses.codex).
CODEX_KEPT = ("HOME", "LOGNAME", "PATH", "SHELL", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR",
              "TZ")


def _claude() -> Path | None:
    found = sorted((ROOT / "node_modules" / "@anthropic-ai").glob("claude-code-*/claude"))
    return found[0] if found else None


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home):
    with anchored(new_machine(tmp_path_factory.mktemp("dogfood21"), chain_home),
                  **{"release-gate": RULE}) as sb:
        yield sb


@pytest.fixture(scope="module")
def launches(machine, tmp_path_factory) -> dict[str, tuple[list[str], dict[str, str]]]:
    """`kint setup claude` and `kint setup codex` run once, with the real CLIs on PATH and
    without KINT_HOME in their environment; for each, the server's launch as the saved
    entry gives it: (command and arguments, the environment the client passes)."""
    claude = _claude()
    codex = ROOT / "node_modules" / ".bin" / "codex"
    if claude is None or not codex.exists() or shutil.which("node") is None:
        missing = "Claude Code and Codex (and node) are installed by `make node`"
        if os.environ.get("CI"):  # where `make test` installed them: a failure, not a skip
            pytest.fail(missing)
        pytest.skip(missing)
    bin_dir = tmp_path_factory.mktemp("harness-bin")
    (bin_dir / "claude").symlink_to(claude)
    (bin_dir / "codex").symlink_to(codex)
    path = f"{bin_dir}:{Path(shutil.which('node') or '/usr/bin/node').parent}:/usr/bin:/bin"
    client_env = {**{k: v for k, v in machine.env.items() if k != "KINT_HOME"}, **QUIET,
                  "PATH": path}
    for target in ("claude", "codex"):
        out = machine.kint("setup", target, "--env", f"KINT_TENANT={machine.tenant}",
                           env={"PATH": path}, timeout=600)
        assert out.returncode == 0, out.stdout + out.stderr
    entry = json.loads((machine.home / ".claude.json").read_text())["mcpServers"]["kint"]
    # Claude Code passes its whole environment, the entry's on top.
    claude_launch = ([entry["command"], *entry["args"]], {**client_env, **entry["env"]})
    table = tomllib.loads((machine.home / ".codex" / "config.toml").read_text())
    table = table["mcp_servers"]["kint"]
    kept = {k: client_env[k] for k in (*CODEX_KEPT, *table.get("env_vars", []))
            if k in client_env}
    codex_launch = ([table["command"], *table.get("args", [])], {**kept, **table["env"]})
    return {"claude": claude_launch, "codex": codex_launch}


@contextmanager
def agent(launch: tuple[list[str], dict[str, str]] | None, env: dict[str, str] | None = None,
          errlog: Any = None) -> Iterator[Any]:
    """A kint-server started as `launch` says (None: the test launcher on `env`), driven
    by the MCP SDK's stdio client; closed on the way out."""
    from mcp_session import AgentProcess

    if launch is None:
        process = AgentProcess(env or {}, errlog=errlog)
    else:
        command, launch_env = launch
        process = AgentProcess(launch_env, command=command, errlog=errlog)
    process.start()
    try:
        yield process
    finally:
        process.close()


def _text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


@pytest.mark.parametrize("client", ["claude", "codex"])
def test_each_clients_saved_launch_serves_the_agent(machine, launches, client):
    """kint-server as Claude Code's and Codex's saved entries start it (the real binary,
    whose Sibyl account gate does not trust the test's key: Sibyl's tools say so as
    JSON), on the machine's supervisor: each kint tool with good and bad arguments."""
    with agent(launches[client]) as a:
        assert a.initialized.serverInfo.name == "kint" and len(a.tools) == 14, a.tools
        status = a.call("memory_status")
        assert status["connected"] and status["in_step"] and status["attached"], status
        assert status["db_path"] == str(machine.sibyl_db), status
        verified = a.call("memory_verify", query="release rule")
        assert verified["decision"] == "proceed", verified
        history = a.call("memory_history", tier="entity", key="release-gate", category="rules")
        assert history["count"] >= 1 and history["versions"][0]["checked"] is True, history
        for tool, args, words in (
                ("memory_verify", {"query": ""}, "argument 'query' must have at least 1"),
                ("memory_verify", {"query": "x", "limit": 101}, "argument 'limit' must be"),
                ("memory_push", {"compact": True}, "unknown argument 'compact'"),
                ("memory_pull", {"discard_local": "yes"}, "argument 'discard_local'"),
                ("memory_history", {"tier": "journal", "key": "k"}, "argument 'tier'")):
            refused = a.failed(tool, **args)
            assert refused["code"] == "VALIDATION_ERROR" and words in refused["message"], \
                (tool, refused)
        gated = a.result("memory_get_state", key="focus")  # Sibyl's, refused by its gate
        payload = json.loads(_text(gated))
        assert gated.isError and payload["ok"] is False, payload
        assert payload["code"] == "ACCOUNT_REQUIRED" and payload["hint"] == (
            "stop and tell the human: Run sibyl init in a terminal, then retry."), payload


def test_sibyls_own_errors_reach_the_agent_as_json(machine):
    """08-tools.md: Sibyl's tools fail with isError and a JSON text. The SDK wrapped it as
    `Error executing tool NAME: {...}`, which an agent's JSON parse refused; now the text
    is the object alone, Sibyl's keys kept, with `ok: false` and a `hint`."""
    with agent(None, machine.env) as a:
        for tool, args, code, hint in (
                ("memory_recall", {"category": "rules", "name": "nope"}, "NOT_FOUND",
                 "nothing was changed; memory_list or memory_search shows what the store "
                 "holds"),
                ("memory_forget", {"category": "rules", "name": "nope"}, "NOT_FOUND",
                 "nothing was changed; memory_list or memory_search shows what the store "
                 "holds"),
                ("memory_search", {"query": "release", "limit": "many"}, "VALIDATION_ERROR",
                 "nothing was done; call memory_search again with the arguments its input "
                 "schema lists")):
            result = a.result(tool, **args)
            text = _text(result)
            assert result.isError and not text.startswith("Error executing tool"), text
            payload = json.loads(text)
            assert payload["ok"] is False and payload["code"] == code, payload
            assert payload["hint"] == hint, payload
        missing = json.loads(_text(a.result("memory_recall", category="rules", name="nope")))
        assert missing["error"] == "NotFoundError", missing  # Sibyl's own keys, as written
        assert missing["message"].startswith("entity rules/nope not found"), missing


def test_two_agents_on_one_space_and_the_ways_out_of_the_hold(machine, launches):
    """Two agents at once on one store (the test launcher, whose Sibyl tools write, and
    kint-server as Codex's entry starts it): a write through one is anchored by it and
    verified by the other; an edit behind Sibyl's tools is refused by verify and holds
    both servers' pushes. The agent's way out, memory_pull with discard_local, is refused
    while the other server holds the store; its hint told the agent to call memory_pull
    with discard_local, the call just refused, where the next step is the human's."""
    import sqlite3

    with agent(None, machine.env) as a, agent(launches["codex"]) as b:
        assert a.call("memory_remember", category="rules", name="deploy",
                      body={"rule": "deploy on tuesdays"})["ok"] is True
        assert b.call("memory_verify", query="deploy tuesdays")["decision"] == "refuse"
        assert a.call("memory_push")["pushed"] == 1
        assert b.call("memory_verify", query="deploy tuesdays")["decision"] == "proceed"

        conn = sqlite3.connect(machine.sibyl_db)
        conn.execute("update entities set body = replace(body, 'never', 'always') "
                     "where name = 'release-gate'")
        conn.commit()
        conn.close()
        refused = a.call("memory_verify", query="release rule")
        assert refused["decision"] == "refuse" and refused["refusal_written"], refused
        again = b.call("memory_verify", query="release rule")  # the retry, from the other
        assert again["refusal_entity"] == refused["refusal_entity"], again
        assert again["refusal_written"] is False, again
        held = b.failed("memory_push")
        assert held["error"] == "HELD", held
        assert a.call("memory_status")["held"]["message"] == held["message"]

        busy = a.failed("memory_pull", discard_local=True)
        assert busy["error"] == "BUSY" and "(kint-server)" in busy["message"], busy
        assert busy["hint"] == (
            "stop and ask the human: stop what holds it (an agent's MCP server, Hermes, a "
            "script), then call memory_pull with discard_local again"), busy
        b.close()
        restored = machine.wait_for(
            lambda: (r := a.call("memory_pull", discard_local=True))["ok"] and r,
            timeout=30, interval=0.5, what="the discard once the other server is gone")
        assert restored["backups"], restored
        assert a.call("memory_verify", query="release rule")["decision"] == "proceed"
        assert a.call("memory_status")["held"] is None


def _start_test_supervisor(sb) -> None:
    """The machine's test supervisor started again (as Sandbox.start_entitled starts it,
    its entitled HOME and trusted key kept)."""
    with open(sb.root / "test-supervisor.err", "ab") as log:
        subprocess.Popen([sys.executable, str(SUPPORT / "run_supervisor.py"), "--home",
                          str(sb.kint_home)], env=sb.env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    sb.wait_for(lambda: sb.client().ping(0.5), interval=0.05, what="the test supervisor")


def _sessions(sb) -> int:
    """How many sessions the space's worker counts (a detach of an id never attached
    changes nothing and answers the count)."""
    return sb.call("detach", sb.sibyl_db, timeout_s=30, args={"session": "probe"})["sessions"]


def test_a_killed_supervisors_successor_counts_the_session_at_the_next_call(machine,
                                                                           tmp_path):
    """The supervisor killed mid-session takes the space's worker with it; the next one's
    worker knew no session until kint-server's keepalive, up to a minute later: no
    watcher for it, its watcher settings unused (each answer said so in `notices`), while
    memory_status said `attached: true`. The next tool call attaches again."""
    from conftest import pid_alive
    from kint.supervisor.pidlock import running_pid

    log = tmp_path / "kint-server.err"
    with open(log, "w") as errlog, \
            agent(None, {**machine.env, "KINT_QUIET_SECONDS": "3600"}, errlog=errlog) as a:
        assert a.call("memory_status")["attached"] is True
        assert _sessions(machine) == 1
        killed = running_pid(machine.kint_home)
        os.kill(killed, signal.SIGKILL)
        machine.wait_for(lambda: not pid_alive(killed), what="the supervisor gone")
        _start_test_supervisor(machine)
        status = a.call("memory_status")
        assert status["attached"] is True and not status.get("notices"), status
        assert _sessions(machine) == 1
        assert a.call("memory_verify", query="release rule")["decision"] == "proceed"
    successor = running_pid(machine.kint_home)
    assert (f"the supervisor changed (pid {successor}, was {killed}): attached this session "
            f"to the space's worker again") in log.read_text()


def test_sibyls_refusal_of_the_account_or_store_is_the_humans_step():
    """A kint tool that Sibyl refused in the worker (SIBYL_ERROR) passed Sibyl's hint to
    the agent as it is, `Run sibyl init in a terminal, then retry.`, met after a
    supervisor restart under Sibyl's real account gate: a step only the human can take,
    said as one, as the account gate's refusal of Sibyl's own tools says it."""
    from kint.agent_server.results import agent_error
    from kint.client import KintError

    sibyl = agent_error("memory_verify", KintError(
        "SIBYL_ERROR", "Sibyl refused verify: Sibyl Memory's sign-in file ...",
        "Run sibyl init in a terminal, then retry."))
    assert sibyl.hint == "stop and tell the human: Run sibyl init in a terminal, then retry."
    said = agent_error("memory_push", KintError("SIBYL_ERROR", "x", "stop and tell the human: y"))
    assert said.hint == "stop and tell the human: y"


def test_sibyls_files_are_looked_at_only_before_sibyls_tools(tmp_path, monkeypatch):
    """kint-server's check that Sibyl's server will use kint's client (credentials.json and
    entitlement.json unchanged, ~0.1 ms of stats) ran before every tool call; it matters
    only before Sibyl's tools, which make the same check at that call themselves."""
    from sibyl_memory_client import testing

    from kint import sibyl_client
    from kint.agent_server import wrapped_client

    monkeypatch.setattr(sibyl_client, "GATE_FACTORY",
                        lambda _path: testing.NullEntitlementGate())
    looks: list[int] = []
    real = wrapped_client._sibyl_files
    monkeypatch.setattr(wrapped_client, "_sibyl_files", lambda: looks.append(1) or real())
    db = tmp_path / "store" / "memory.db"
    shared = wrapped_client.SharedClient(str(db), "t", tmp_path / "kint", session=None)
    shared.refresh()
    try:
        assert shared.client is not None
        looks.clear()
        for tool in ("memory_status", "memory_verify", "memory_push", "memory_history"):
            assert shared.before_call(tool, False) is None
        assert looks == [], "kint's tools looked at Sibyl's files"
        assert shared.before_call("memory_recall", True) is None
        assert looks == [1]
    finally:
        shared.close()
