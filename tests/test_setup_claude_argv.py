"""`kint setup claude` with the real Claude Code (as test_setup_clients.py runs it) gives
`claude mcp add-json` the entry on stdin, never on its command line: a process's argv is
readable by every user of the machine (/proc/<pid>/cmdline), and the entry carries the
user's values (their keys in kint's entry, their `--env`).

The argv is recorded by a PATH shim named `claude` (harness_stand_ins.recording_shim) that
writes its arguments to a file and execs the real binary (so what ran, and what it saved,
is Claude Code's own). A Claude Code older than add-json's `-` is a stand-in
(harness_stand_ins.py): no such release is pinned here.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness_stand_ins import calls, recorded, recording_shim, stand_in
from real_clients import QUIET, claude_binary, client_or_skip

from kint.harnesses.claude import ARGV_ONLY, SIBYL_REMINDER

THEIRS = "/srv/of-the-user-7f3a"


def test_the_entry_goes_to_claude_code_on_stdin_and_is_saved_whole(sandbox, tmp_path):
    real = client_or_skip(claude_binary(), "Claude Code (npm @anthropic-ai/claude-code)")
    log = tmp_path / "claude-argv.log"
    bin_dir = recording_shim(tmp_path / "shim", "claude", real, log).parent
    token = "tok-of-the-user-5d1e"
    config = sandbox.home / ".claude.json"
    config.write_text(json.dumps({"mcpServers": {"kint": {
        "type": "stdio", "command": "/old/venv/bin/kint-server", "args": [],
        "env": {"MY_TOOL_HOME": THEIRS, "KINT_HOME": "/old/kint-home"},
        "timeout": 271828, "alwaysAllow": ["a-tool-of-the-user-7f3a"]}}}))
    out = sandbox.kint("setup", "claude", "--env", f"MY_TOOL_TOKEN={token}",
                       env={**QUIET, "PATH": f"{bin_dir}:/usr/bin:/bin"}, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr

    runs = recorded(log)
    assert ["mcp", "add-json", "--scope", "user", "kint", "-"] in runs, runs
    for argv in runs:
        for word in argv:
            assert not word.lstrip().startswith("{"), f"JSON on the command line: {argv}"
            for value in (token, THEIRS, "271828", "a-tool-of-the-user-7f3a",
                          str(sandbox.kint_home)):
                assert value not in word, f"{value} on the command line: {argv}"

    entry = json.loads(config.read_text())["mcpServers"]["kint"]
    server = Path(entry["args"][-1])
    assert entry["type"] == "stdio" and entry["args"][:2] == ["-u", "PYTHONPATH"]
    assert server.name == "kint-server" and server.is_absolute()
    assert entry["env"]["MY_TOOL_TOKEN"] == token
    assert entry["env"]["MY_TOOL_HOME"] == THEIRS  # the user's own variable, kept
    assert entry["env"]["KINT_HOME"] == str(sandbox.kint_home)
    assert entry["timeout"] == 271828 and "alwaysAllow" not in entry  # as Claude Code keeps
    [copy] = sandbox.home.glob(".claude.json.bak-*")
    assert out.stdout.splitlines() == [
        "claude: registered kint (user scope)", SIBYL_REMINDER, f"  claude: backup {copy}",
        "  claude: kint's entry lost keys of yours (alwaysAllow): Claude Code does not keep "
        "keys it does not know; the backup above holds them",
        "  claude: replaced your KINT_HOME=... in kint's entry with kint's (give yours with "
        "--env KINT_HOME=... to keep it)"]  # the older kint's pin: named, never its value


# A stand-in for a Claude Code whose `mcp add-json` takes the JSON only as its argument: its
# help says nothing of stdin, and `-` is not JSON to it. `mcp remove` and `add-json` edit
# mcpServers in ~/.claude.json.
OLD_CLAUDE = """
path = Path(os.environ["HOME"]) / ".claude.json"
args = sys.argv[1:]
if args[-1] == "--help":
    sys.exit(print("Usage: claude mcp add-json [options] <name> <json>\\n\\n"
                   "Add an MCP server (stdio or SSE) with a JSON string"))
data = json.loads(path.read_text()) if path.exists() else {}
servers = data.setdefault("mcpServers", {})
if args[:2] == ["mcp", "add-json"]:
    try:
        servers[args[4]] = json.loads(args[5])
    except ValueError:
        sys.exit(print("Error: Invalid JSON") or 1)
elif args[:2] == ["mcp", "remove"]:
    servers.pop(args[-1], None)
path.write_text(json.dumps(data))
"""


def test_an_older_claude_code_gets_kints_own_entry_and_the_users_keys_stay_in_the_backup(
        sandbox, tmp_path):
    """A Claude Code that takes an entry only on its command line: kint's own entry (kint's
    settings alone) goes there, the user's keys and variables do not, and setup names
    them, why, and the backup that holds them."""
    stand_in(tmp_path / "bin", "claude", OLD_CLAUDE)
    config = sandbox.home / ".claude.json"
    config.write_text(json.dumps({"mcpServers": {"kint": {
        "type": "stdio", "command": "/old/venv/bin/kint-server", "args": [],
        "env": {"MY_TOOL_HOME": THEIRS},
        "timeout": 271828, "headers": {"Authorization": "Bearer tok-of-the-user-5d1e"}}}}))
    out = sandbox.kint("setup", "claude", env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    assert out.returncode == 0, out.stdout + out.stderr
    runs = calls(sandbox.home, "claude")
    assert runs[-2] == ["mcp", "add-json", "--help"], runs
    assert "271828" not in json.dumps(runs) and "tok-of-the-user" not in json.dumps(runs)
    assert THEIRS not in json.dumps(runs)
    entry = json.loads(config.read_text())["mcpServers"]["kint"]
    assert json.loads(runs[-1][-1]) == entry and entry["args"][-1].endswith("kint-server")
    [copy] = sandbox.home.glob(".claude.json.bak-*")
    assert out.stdout.splitlines()[-2:] == [
        f"  claude: backup {copy}",
        f"  claude: kint's entry lost keys of yours (timeout, headers, env.MY_TOOL_HOME): "
        f"{ARGV_ONLY}; the "
        "backup above holds them"]


def test_an_older_claude_code_is_not_given_an_env_value_of_the_users(sandbox, tmp_path):
    """An `--env` of the user's that is not a kint setting (kint has not checked its value)
    is not put on an older Claude Code's command line: setup fails, naming it (never its
    value), and says to update Claude Code."""
    stand_in(tmp_path / "bin", "claude", OLD_CLAUDE)
    out = sandbox.kint("setup", "claude", "--env", "MY_TOOL_TOKEN=tok-of-the-user-5d1e",
                       env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    assert out.returncode == 1, out.stdout + out.stderr
    assert "tok-of-the-user" not in json.dumps(calls(sandbox.home, "claude"))
    assert "tok-of-the-user" not in out.stdout + out.stderr
    assert out.stdout.splitlines()[:2] == [
        "claude: failed: this Claude Code takes an entry only on its command line, where "
        "every user of this machine can read it, and kint's holds values of yours "
        "(MY_TOOL_TOKEN) [HARNESS_ERROR]",
        "  claude: hint: update Claude Code to one whose `claude mcp add-json` reads `-` from "
        "stdin, then run `kint setup claude` again"]

