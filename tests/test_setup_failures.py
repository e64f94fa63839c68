"""`kint setup` where a user's machine breaks it: a harness's config file that is a folder,
unreadable or in a folder that cannot be written, or not JSON; a harness CLI that hangs,
cannot start, fails or fails half way; a kint entry of an older kint, turned off, with keys
of the user's own; two setups at once. Each harness that fails ends with `<target>: failed:
MESSAGE [CODE]` and a `hint:` line (and `code` and `hint` in `--json`), and the user's file
is left as it was, with no backup left unless the file changed. These use stand-in CLIs
(the real clients cost seconds a call; what they do with broken files and older entries is
in test_setup_clients_broken.py)."""

from __future__ import annotations

import errno
import json
import os
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import KINT
from harness_stand_ins import calls, hermes_script, stand_in, stand_in_openclaw

from kint.harnesses import claude as claude_mod
from kint.harnesses.failures import file_failure
from kint.harnesses.run import run_setup

def bin_path(tmp_path: Path) -> str:
    return f"{tmp_path / 'bin'}:/usr/bin:/bin"


def test_a_config_file_that_is_a_folder_fails_its_harness_with_a_code_and_a_hint(
        sandbox, tmp_path):
    """Claude Code's, Codex's, Hermes' and OpenClaw's config file each a folder: each fails
    on a line naming the folder, with CONFIG_INVALID and a hint, no harness CLI is asked to
    write, and nothing is created beside them; `--json` carries the code and the hint."""
    home = sandbox.home
    stand_in(tmp_path / "bin", "claude")
    stand_in_openclaw(tmp_path / "bin", mcp_set="")
    stand_in(tmp_path / "bin", "hermes", HERMES_SCRIPT)
    folders = [home / ".claude.json", home / ".codex" / "config.toml",
               home / ".hermes" / "config.yaml", home / ".openclaw" / "openclaw.json"]
    for folder in folders:
        folder.mkdir(parents=True)
    out = sandbox.kint("setup", "all", env={"PATH": bin_path(tmp_path)})
    assert out.returncode == 1, out.stdout + out.stderr
    hint = "  {}: hint: move that folder aside, then run `kint setup` again; nothing was changed"
    assert out.stdout.splitlines() == [
        f"claude: failed: {folders[0]} is a folder, where a config file should be "
        "[CONFIG_INVALID]", hint.format("claude"),
        f"codex: failed: {folders[1]} is a folder, where a config file should be "
        "[CONFIG_INVALID]", hint.format("codex"),
        f"hermes[default]: failed: {folders[2]} is a folder, where a config file should be "
        "[CONFIG_INVALID]", hint.format("hermes[default]"),
        f"openclaw: failed: {folders[3]} is a folder, where a config file should be "
        "[CONFIG_INVALID]", hint.format("openclaw")]
    assert calls(home, "claude") == [] and calls(home, "hermes") == []
    assert calls(home, "openclaw") == [["config", "file"]]
    for folder in folders:
        assert list(folder.parent.glob(f"{folder.name}*")) == [folder]

    as_json = sandbox.kint("setup", "claude", "--json", env={"PATH": bin_path(tmp_path)})
    assert as_json.returncode == 1
    [report] = json.loads(as_json.stdout)["reports"]
    assert (report["status"], report["code"]) == ("failed", "CONFIG_INVALID")
    assert report["hint"] == ("move that folder aside, then run `kint setup` again; nothing "
                              "was changed")


def test_a_file_this_user_may_not_touch_is_said_as_such():
    """A permission, a read-only file system and a full disk met on a config file or its
    backup: what failed and what to do, never `[Errno 13] ...`. (The suite runs as root,
    whom mode 000 does not stop: the OS's errors are made here.)"""
    denied = file_failure(PermissionError(errno.EACCES, "Permission denied", "/h/.claude.json"),
                          "read")
    assert (denied.message, denied.code) == ("cannot read /h/.claude.json: Permission denied",
                                             "CONFIG_INVALID")
    assert denied.hint == (f"this user (uid {os.geteuid()}) needs to read and write that file "
                           "and create files in its folder; give it that, then run `kint "
                           "setup` again")
    read_only = file_failure(OSError(errno.EROFS, "Read-only file system",
                                     "/h/.claude.json.bak-1"), "back up")
    assert read_only.message == "cannot back up /h/.claude.json.bak-1: Read-only file system"
    full = file_failure(OSError(errno.ENOSPC, "No space left on device", "/h/x"), "write")
    assert (full.message, full.code) == ("cannot write /h/x: the disk is full", "DISK_FULL")


def test_a_harness_cli_that_hangs_or_cannot_start_fails_on_a_line_of_its_own(
        sandbox, tmp_path, monkeypatch):
    """A `claude` that never answers is given up after its time (TIMEOUT, the command named
    without the JSON it was given); an `openclaw` whose interpreter is gone cannot start
    (HARNESS_ERROR). The other harnesses still run."""
    stand_in(tmp_path / "bin", "claude", "time.sleep(30)")
    stand_in(tmp_path / "bin", "openclaw", python="/nonexistent/python3")
    monkeypatch.setenv("HOME", str(sandbox.home))
    monkeypatch.setenv("KINT_HOME", str(sandbox.kint_home))
    monkeypatch.setenv("PATH", bin_path(tmp_path))
    monkeypatch.setattr(sys, "argv", [KINT, "setup"])
    monkeypatch.setattr(claude_mod, "TIMEOUT", 1)
    reports = run_setup(["all"], {})
    assert [(r.target, r.status, r.code) for r in reports] == [
        ("claude", "failed", "TIMEOUT"), ("codex", "skipped", None),
        ("hermes", "skipped", None), ("openclaw", "failed", "HARNESS_ERROR")]
    assert reports[0].lines == [
        "claude: failed: `claude mcp add-json --scope user kint` did not finish within 1 s "
        "[TIMEOUT]",
        "  claude: hint: run `claude mcp add-json --scope user kint` yourself to see what it "
        "waits for, then run `kint setup` again"]
    openclaw = str(tmp_path / "bin" / "openclaw")
    assert reports[3].lines == [
        f"openclaw: failed: cannot run {openclaw}: No such file or directory [HARNESS_ERROR]",
        "  openclaw: hint: check that `openclaw --version` runs, then run `kint setup` again"]


@pytest.mark.parametrize("target", ["claude", "openclaw"])
def test_a_failed_harness_report_has_its_code_and_hint_in_json(sandbox, tmp_path, target):
    stand_in(tmp_path / "bin", target, "sys.exit(print('no, I refuse') or 3)")
    out = sandbox.kint("setup", target, "--json", env={"PATH": bin_path(tmp_path)})
    assert out.returncode == 1, out.stdout + out.stderr
    [report] = json.loads(out.stdout)["reports"]
    assert (report["status"], report["code"]) == ("failed", "HARNESS_ERROR")
    assert report["lines"][0].endswith("no, I refuse [HARNESS_ERROR]"), report
    assert report["lines"][1] == f"  {target}: hint: {report['hint']}"


def test_a_harness_that_fails_leaves_no_backup_unless_its_file_changed(sandbox, tmp_path):
    """Setup copies a config file before the harness's CLI writes it. When the CLI then
    fails and the file is as it was, the copy is removed (nothing to restore); when the
    CLI changed the file before failing, the copy is kept and named on the failure's
    lines."""
    home = sandbox.home
    stand_in(tmp_path / "bin", "claude", "sys.exit(print('cannot save') or 1)")
    config = home / ".openclaw" / "openclaw.json"
    stand_in_openclaw(tmp_path / "bin", "path.write_text('{\"half\": \"written\"}')\n"
                      "sys.exit(print('crashed half way') or 1)")
    claude_config = home / ".claude.json"
    claude_config.write_text('{"numStartups": 3}')
    config.parent.mkdir()
    config.write_text('{"mine": 1}')
    out = sandbox.kint("setup", "all", env={"PATH": bin_path(tmp_path)})
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert claude_config.read_text() == '{"numStartups": 3}'
    assert list(home.glob(".claude.json.bak-*")) == []
    assert lines[0].startswith("claude: failed: `claude mcp add-json` did not register kint"
                               ": cannot save [HARNESS_ERROR]"), lines
    [copy] = list(config.parent.glob("openclaw.json.bak-*"))
    assert copy.read_text() == '{"mine": 1}'
    assert lines[-3:] == [
        "openclaw: failed: `openclaw config patch` exited 1: crashed half way [HARNESS_ERROR]",
        "  openclaw: hint: run `openclaw config validate` to see what OpenClaw refuses, then "
        "run `kint setup openclaw` again",
        f"  openclaw: backup {copy}"]


def test_a_claude_config_that_is_not_json_fails_before_claude_runs(sandbox, tmp_path):
    """Claude Code refuses a `~/.claude.json` that does not parse (and files a copy of it
    among its own backups): setup says so itself, runs no `claude` command and copies
    nothing."""
    stand_in(tmp_path / "bin", "claude")
    config = sandbox.home / ".claude.json"
    config.write_text('{"numStartups": 3,,}')
    out = sandbox.kint("setup", "claude", env={"PATH": bin_path(tmp_path)})
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.splitlines() == [
        f"claude: failed: {config} does not parse as JSON (Expecting property name enclosed in "
        "double quotes: line 1 column 19 (char 18)) [CONFIG_INVALID]",
        "  claude: hint: fix it or move it aside (Claude Code does not start on it either), "
        "then run `kint setup claude` again; nothing was changed"]
    assert calls(sandbox.home, "claude") == []
    assert config.read_text() == '{"numStartups": 3,,}'
    assert list(sandbox.home.glob(".claude.json.bak-*")) == []


def test_a_kint_entry_turned_off_or_of_an_older_kint_is_rewritten_and_keeps_the_users_keys(
        sandbox, tmp_path):
    """A kint entry saved by an older kint (another kint-server path), turned off by the user
    (`enabled` false) and given a key of the user's own: setup rewrites the launch line,
    turns it on again saying so (and how to turn it off), and keeps the user's key, in
    OpenClaw (whose write replaces the whole entry) and in Codex. A second run changes
    nothing."""
    stand_in_openclaw(tmp_path / "bin")
    home = sandbox.home
    openclaw = home / ".openclaw" / "openclaw.json"
    openclaw.parent.mkdir()
    openclaw.write_text(json.dumps({"mcp": {"servers": {"kint": {
        "command": "/usr/bin/env", "args": ["-u", "PYTHONPATH", "/old/venv/bin/kint-server"],
        "enabled": False, "requestTimeoutMs": 300000}}}}))
    codex = home / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text('[mcp_servers.kint]\ncommand = "/old/venv/bin/kint-server"\n'
                     "enabled = false\nenabled_tools = [\"memory_verify\"]\n")
    env = {"PATH": bin_path(tmp_path)}
    out = sandbox.kint("setup", "all", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    turned_on = ("  {}: kint was turned off ({} = false); setup turned it on again, as it "
                 "registers kint to be used: set {} = false to keep it off")
    key = "mcp_servers.kint.enabled"
    assert lines[lines.index(f"codex: wrote [mcp_servers.kint] to {codex}") + 1] == \
        turned_on.format("codex", key, key)
    key = "mcp.servers.kint.enabled"
    assert lines[lines.index("openclaw: saved MCP server kint (openclaw mcp set)") + 1] == \
        turned_on.format("openclaw", key, key)
    entry = json.loads(openclaw.read_text())["mcp"]["servers"]["kint"]
    assert "enabled" not in entry and entry["requestTimeoutMs"] == 300000
    assert entry["args"][-1] == str(Path(KINT).parent / "kint-server")
    table = tomllib.loads(codex.read_text())["mcp_servers"]["kint"]
    assert "enabled" not in table and table["enabled_tools"] == ["memory_verify"]
    assert table["command"] == str(Path(KINT).parent / "kint-server")

    again = sandbox.kint("setup", "all", env=env)
    assert again.returncode == 0 and "turned off" not in again.stdout, again.stdout
    assert "openclaw: kint already saved, nothing changed" in again.stdout.splitlines()
    assert "codex: already configured" in again.stdout.splitlines()


def test_a_second_setup_while_one_runs_is_refused_busy_having_changed_nothing(sandbox):
    """Two setups at once race on each harness's file (each reports its own write as done
    while the other's replaces it): the second is refused at once, BUSY, exit 2, naming
    the pid of the one running, and writes nothing; once the first is done it runs."""
    import fcntl

    from kint.harnesses.setup_lock import LOCK_NAME

    config = sandbox.home / ".codex" / "config.toml"
    lock = sandbox.kint_home / LOCK_NAME
    sandbox.kint_home.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.pwrite(fd, b"4242", 0)
        out = sandbox.kint("setup", "codex", env={"PATH": "/usr/bin:/bin"})
        assert out.returncode == 2, out.stdout + out.stderr
        assert out.stderr.splitlines() == [
            f"kint: error: another kint setup is running for {sandbox.kint_home} (pid 4242) "
            "[BUSY]", "hint: wait for it to finish, then run this one again: nothing was "
            "changed"]
        assert not config.exists()
    finally:
        os.close(fd)
    out = sandbox.kint("setup", "codex", env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and config.exists(), out.stdout + out.stderr
    assert oct(lock.stat().st_mode & 0o777) == "0o600"


# A stand-in for Hermes' CLI (harness_stand_ins.hermes_script) over one config,
# $HOME/hermes-config.json, which it also writes where Hermes keeps its config.
HERMES_SCRIPT = hermes_script(
    'Path(os.environ["HOME"]) / "hermes-config.json"',
    after_save=('(Path(os.environ["HOME"]) / ".hermes" / "config.yaml")'
                '.write_text(json.dumps(config))'))


def test_keys_of_the_users_own_that_hermes_mcp_add_drops_are_named(sandbox, tmp_path):
    """Hermes' `mcp add` writes kint's entry anew: a `timeout` or a `tools` filter the user
    gave an older kint entry is gone after it. Setup says which keys and that its backup
    holds them, rather than report the registration alone."""
    stand_in(tmp_path / "bin", "hermes", HERMES_SCRIPT)
    old = {"command": "/old/venv/bin/kint-server", "env": {}, "enabled": True,
           "timeout": 300, "tools": {"include": ["memory_verify"]}}
    (sandbox.home / "hermes-config.json").write_text(json.dumps({"mcp_servers": {"kint": old}}))
    config = sandbox.home / ".hermes" / "config.yaml"
    config.parent.mkdir()
    config.write_text("mcp_servers: {kint: {timeout: 300}}\n")
    out = sandbox.kint("setup", "hermes", env={"PATH": bin_path(tmp_path)})
    assert out.returncode == 0, out.stdout + out.stderr
    [copy] = list(config.parent.glob("config.yaml.bak-*"))
    lines = out.stdout.splitlines()
    assert lines[0].startswith("hermes[default]: registered kint (store "), lines
    assert lines[1:3] == [
        f"  hermes[default]: backup {copy}",
        "  hermes[default]: `hermes mcp add` does not keep the other keys of kint's entry "
        "(timeout, tools): the backup above holds them; set them again with `hermes -p "
        "default config set mcp_servers.kint.KEY VALUE` or in its config.yaml"]
