"""`kint setup` without the real clients: the Codex file setup writes itself (read back
with tomllib), the lines and exit codes, the refusals, OpenClaw through a stand-in CLI (its
failures, and the config file its variables move), and the list of settings Codex forwards
by name. The real Claude Code, Codex, Hermes and OpenClaw are in test_setup_clients.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import harness_stand_ins
from conftest import KINT
from harness_stand_ins import calls

from kint.harnesses import codex as codex_mod

ROOT = Path(__file__).resolve().parent.parent
SERVER = str(Path(KINT).parent / "kint-server")

USER_CONFIG = """\
# my Codex settings
model = "o3"

[mcp_servers.kint]
command = "kint-server"
args = []
tool_timeout_sec = 300

[mcp_servers.kint.env]
SIBYL_MEMORY_TELEMETRY = "0"

# the docs server
[mcp_servers.docs]
command = "docs-mcp"
args = ["--port", "0"]

[profiles.fast]
model = "o4-mini"
"""


def bare_path(tmp_path: Path) -> str:
    """A PATH with no harness CLI on it (and no kint-server: setup finds it next to kint)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    return f"{empty}:/usr/bin:/bin"


def setup(sandbox, *args: str, **env: str):
    return sandbox.kint("setup", *args, env={"PATH": bare_path(sandbox.root), **env})


def kint_at(sandbox, exe: Path, *args: str, path: str):
    """A `kint` script copied elsewhere (what "next to kint" is measured against)."""
    return subprocess.run([str(exe), *args], env={**sandbox.env, "PATH": path}, text=True,
                          capture_output=True, timeout=90, stdin=subprocess.DEVNULL)


def backups(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.bak-*"))


def test_codex_pins_the_identity_forwards_the_rest_keeps_the_file_and_runs_once(sandbox):
    config = sandbox.home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(USER_CONFIG)

    out = setup(sandbox, "codex", "--env", "KINT_TENANT=kint-demo", "--env", "KINT_KEY_TTL=30d")
    assert out.returncode == 0, out.stdout + out.stderr
    copy = backups(config.parent)
    assert len(copy) == 1 and copy[0].read_text() == USER_CONFIG
    assert out.stdout.splitlines() == [f"codex: wrote [mcp_servers.kint] to {config}",
                                       f"  codex: backup {copy[0]}"]
    text = config.read_text()
    doc = tomllib.loads(text)
    kint = doc["mcp_servers"]["kint"]
    assert kint["command"] == SERVER and kint["args"] == []
    # The user's own variable in the table (Sibyl's, not a kint setting) is kept.
    assert kint["env"] == {"SIBYL_MEMORY_TELEMETRY": "0", "KINT_HOME": str(sandbox.kint_home),
                           "SIBYL_MEMORY_DB": str(sandbox.sibyl_db),
                           "KINT_TENANT": "kint-demo", "KINT_KEY_TTL": "30d"}
    # Settings not pinned reach the server by name only when Codex runs with them; the
    # session passphrase is one of them, never written.
    assert "KINT_SESSION_PASSPHRASE" in kint["env_vars"] and "KINT_TENANT" not in kint["env_vars"]
    assert not {"PYTHONPATH", "KINT_OWNER_KEY", "KINT_HOME"} & set(kint["env_vars"])
    # The user's own key in the table is kept; the missing timeout is added.
    assert kint["tool_timeout_sec"] == 300 and kint["startup_timeout_sec"] == 90
    # Everything else is as it was, comments included.
    assert doc["model"] == "o3" and doc["profiles"] == {"fast": {"model": "o4-mini"}}
    assert doc["mcp_servers"]["docs"] == {"command": "docs-mcp", "args": ["--port", "0"]}
    assert text.startswith("# my Codex settings\n")
    assert "# the docs server\n[mcp_servers.docs]" in text

    again = setup(sandbox, "codex", "--env", "KINT_TENANT=kint-demo", "--env", "KINT_KEY_TTL=30d")
    assert again.returncode == 0
    assert again.stdout.splitlines() == ["codex: already configured"]  # v0.3.0's line
    assert config.read_text() == text and len(backups(config.parent)) == 1

    # Another --env value replaces the pins (as re-running Claude Code's setup does).
    changed = setup(sandbox, "codex", "--env", "KINT_TENANT=other")
    assert changed.returncode == 0 and "wrote [mcp_servers.kint]" in changed.stdout
    kint = tomllib.loads(config.read_text())["mcp_servers"]["kint"]
    assert kint["env"]["KINT_TENANT"] == "other" and "KINT_KEY_TTL" not in kint["env"]
    assert kint["tool_timeout_sec"] == 300


def test_codex_home_and_the_global_tenant_and_db_are_honoured(sandbox, tmp_path):
    codex_home = tmp_path / "codex-home"
    db = tmp_path / "stores" / "memory.db"
    out = sandbox.kint("--tenant", "team-a", "--db", str(db), "setup", "codex",
                       env={"PATH": bare_path(tmp_path), "CODEX_HOME": str(codex_home)})
    assert out.returncode == 0, out.stdout + out.stderr
    env = tomllib.loads((codex_home / "config.toml").read_text())["mcp_servers"]["kint"]["env"]
    assert env["KINT_TENANT"] == "team-a" and env["SIBYL_MEMORY_DB"] == str(db)
    assert not (sandbox.home / ".codex").exists()


def test_a_global_flag_and_an_env_that_disagree_are_refused_and_paths_made_absolute(
        sandbox, tmp_path):
    """`kint --tenant a setup --env KINT_TENANT=b` pinned b and dropped a without a word
    (--db and SIBYL_MEMORY_DB the same): refused now. Agreeing ones are taken; a relative
    path setting is made absolute from the folder setup runs in (a harness starts the
    server in a folder of its own), as the store always was."""
    config = sandbox.home / ".codex" / "config.toml"
    for argv, message in (
            (("--tenant", "team-a", "setup", "codex", "--env", "KINT_TENANT=team-b"),
             "--tenant team-a and --env KINT_TENANT=team-b name two different tenants"),
            (("--db", str(tmp_path / "a.db"), "setup", "codex", "--env",
              f"SIBYL_MEMORY_DB={tmp_path / 'b.db'}"),
             f"--db {tmp_path / 'a.db'} and --env SIBYL_MEMORY_DB={tmp_path / 'b.db'} name "
             f"two different stores")):
        out = sandbox.kint(*argv, env={"PATH": bare_path(tmp_path)})
        assert out.returncode == 2, out.stdout + out.stderr
        assert out.stderr.splitlines()[0] == f"kint: error: {message} [BAD_REQUEST]"
        assert not config.exists()
    out = subprocess.run(
        [KINT, "--tenant", "team-a", "--db", "stores/memory.db", "setup", "codex", "--env",
         "KINT_TENANT=team-a", "--env", f"SIBYL_MEMORY_DB={tmp_path / 'stores' / 'memory.db'}",
         "--env", "SIBYL_CREDENTIALS=creds/credentials.json"],
        env={**sandbox.env, "PATH": bare_path(tmp_path)}, cwd=tmp_path, text=True,
        capture_output=True, timeout=90, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stdout + out.stderr
    env = tomllib.loads(config.read_text())["mcp_servers"]["kint"]["env"]
    assert env["KINT_TENANT"] == "team-a"
    assert env["SIBYL_MEMORY_DB"] == str(tmp_path / "stores" / "memory.db")
    assert env["SIBYL_CREDENTIALS"] == str(tmp_path / "creds" / "credentials.json")


def test_codex_kint_written_inline_is_left_alone(sandbox):
    config = sandbox.home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    inline = '[mcp_servers]\nkint = { command = "kint-server" }\n'
    config.write_text(inline)
    out = setup(sandbox, "codex")
    assert out.returncode == 1
    assert out.stdout.startswith("codex: failed: mcp_servers.kint is written inline")
    assert config.read_text() == inline and backups(config.parent) == []


def test_all_runs_in_order_and_skips_what_is_not_installed(sandbox):
    out = setup(sandbox, "all")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "claude: CLI not found, skipped",
        f"codex: CLI not found and no {sandbox.home / '.codex'}, skipped",
        "hermes: CLI not found, skipped",
        "openclaw: CLI not found, skipped",
    ]
    # Named on its own, Codex needs no CLI: setup writes its file.
    out = setup(sandbox, "codex")
    assert out.returncode == 0 and (sandbox.home / ".codex" / "config.toml").is_file()


def test_a_named_harness_without_its_cli_is_skipped_as_v030_says_exit_0(sandbox):
    """`kint setup claude` (or hermes, openclaw) with that CLI not on PATH: v0.3.0's line for
    a target whose CLI is missing, and no failure (13-harnesses.md and 09-cli.md, "kint
    setup", give that line for any target and setup no exit status of its own for it);
    `--json` says `skipped` where a script can see it."""
    out = setup(sandbox, "claude")
    assert (out.returncode, out.stdout, out.stderr) == (
        0, "claude: CLI not found, skipped\n", ""), out.stdout + out.stderr
    out = setup(sandbox, "openclaw", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["reports"] == [
        {"target": "openclaw", "status": "skipped", "lines": ["openclaw: CLI not found, skipped"],
         "code": None, "hint": None, "dropped_env": []}]


def test_kint_server_is_found_next_to_kint_else_on_path_else_refused(sandbox, tmp_path):
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(KINT, lone / "kint")
    out = kint_at(sandbox, lone / "kint", "setup", "codex", path=bare_path(tmp_path))
    assert out.returncode == 2
    assert out.stderr.splitlines()[0] == ("kint: error: kint-server not found next to kint "
                                          "or on PATH [INTERNAL]")
    assert out.stderr.splitlines()[1].startswith("hint: ")
    assert not (sandbox.home / ".codex").exists()
    on_path = kint_at(sandbox, lone / "kint", "setup", "codex",
                              path=f"{Path(SERVER).parent}:{bare_path(tmp_path)}")
    assert on_path.returncode == 0, on_path.stderr
    env = tomllib.loads((sandbox.home / ".codex" / "config.toml").read_text())
    assert env["mcp_servers"]["kint"]["command"] == SERVER


def test_an_env_pair_is_split_at_its_first_equals_sign(sandbox):
    """10-configuration.md, "Handing the environment to kint-server": `--env KEY=VALUE` is
    split at the first `=`, so a value may hold more of them."""
    out = setup(sandbox, "codex", "--env", "KINT_TENANT=team=a", "--env", "MY_FLAG=x=y=z")
    assert out.returncode == 0, out.stdout + out.stderr
    config = sandbox.home / ".codex" / "config.toml"
    env = tomllib.loads(config.read_text())["mcp_servers"]["kint"]["env"]
    assert (env["KINT_TENANT"], env["MY_FLAG"]) == ("team=a", "x=y=z")


@pytest.mark.parametrize("pair, message", [
    ("KINT_TENANT", "--env 'KINT_TENANT' is not KEY=VALUE"),
    ("1X=2", "--env '1X' is not a variable name"),
    ("X\n=2", "--env 'X\\n' is not a variable name"),  # `$` matched before a final newline
    ("KINT_OWNER_KEY=0xabc", "--env KINT_OWNER_KEY is refused"),
    ("KINT_SESSION_PASSPHRASE=pw", "--env KINT_SESSION_PASSPHRASE is refused"),
    ("PYTHONPATH=/x", "--env PYTHONPATH is refused"),
    ("KINT_RPC_URL=https://base.example/v2/K3Y",
     "--env KINT_RPC_URL: https://base.example/<redacted> has a user, path or query part"),
    ("KINT_RPC_URL=https://base.example:K3Y/v2",  # a port that is no number: no traceback
     "--env KINT_RPC_URL: https://base.example:<bad port>/<redacted> has a user, path or "
     "query part"),
    # A kint setting's value is checked as config.toml checks it: kint-server would log it
    # and run with the default, out of sight of whoever ran setup.
    ("KINT_QUIET_SECONDS=5m", "--env KINT_QUIET_SECONDS='5m' is not a number"),
    ("KINT_POLL_SECONDS=0.5", "--env KINT_POLL_SECONDS=0.5 is below its minimum 1"),
    ("KINT_NO_WATCHER=yes", "--env KINT_NO_WATCHER='yes' is not 1 (on) or 0 (off)"),
    ("KINT_KEY_TTL=forever", "--env KINT_KEY_TTL='forever' is not a duration"),
    ("KINT_CONTRACT=0x12", "--env KINT_CONTRACT='0x12' is not an address"),
    ("KINT_HOME=relative/home", "--env KINT_HOME=relative/home is a relative path"),
])
def test_bad_or_secret_env_is_refused_before_anything_is_written(sandbox, pair, message):
    out = setup(sandbox, "codex", "--env", pair)
    assert out.returncode == 2
    assert out.stderr.startswith(f"kint: error: {message}")
    assert out.stderr.splitlines()[0].endswith(" [BAD_REQUEST]"), out.stderr
    assert out.stderr.splitlines()[1].startswith("hint: "), out.stderr
    assert "K3Y" not in out.stderr
    assert not (sandbox.home / ".codex").exists()


@pytest.mark.parametrize("argv, message", [
    (("claude", "--hermes-profile", "work"), "--hermes-profile is for hermes (or all), not claude"),
    (("hermes", "--hermes-profile", "Bad Name"),
     "--hermes-profile 'Bad Name' is not a Hermes profile name"),
    (("all", "--hermes-profile", "ok", "--hermes-profile", "../x"),
     "--hermes-profile '../x' is not a Hermes profile name"),
])
def test_a_hermes_profile_that_would_do_nothing_is_refused(sandbox, argv, message):
    """Given with another target, or naming a profile Hermes cannot have, --hermes-profile
    is refused (exit 2) before anything is written, not skipped or ignored."""
    out = setup(sandbox, *argv)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.splitlines()[0] == f"kint: error: {message} [BAD_REQUEST]"
    assert not (sandbox.home / ".claude.json").exists()


def stand_in_openclaw(tmp_path: Path, config_file_fails: bool = False) -> str:
    """A PATH with the stand-in `openclaw` first (and no other harness CLI)."""
    harness_stand_ins.stand_in_openclaw(tmp_path / "bin", config_file_fails=config_file_fails)
    return f"{tmp_path / 'bin'}:{bare_path(tmp_path)}"


def mcp_set_calls(sandbox) -> list[list[str]]:
    """The writes of kint's entry (`config patch --stdin`, the entry on stdin)."""
    return [c for c in calls(sandbox.home, "openclaw") if c[:3] == ["config", "patch", "--stdin"]]


def test_openclaw_is_set_through_its_cli_with_the_env_in_the_launch_line(sandbox, tmp_path):
    path = stand_in_openclaw(tmp_path)
    out = sandbox.kint("setup", "openclaw", "--env", "KINT_TENANT=kint-demo",
                       env={"PATH": path})
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines() == ["openclaw: saved MCP server kint (openclaw mcp set)"]
    config = sandbox.home / ".openclaw" / "openclaw.json"
    saved = json.loads(config.read_text())["mcp"]["servers"]["kint"]
    assert saved == {"command": "/usr/bin/env",
                     "args": ["-u", "PYTHONPATH", f"KINT_HOME={sandbox.kint_home}",
                              f"SIBYL_MEMORY_DB={sandbox.sibyl_db}", "KINT_TENANT=kint-demo",
                              SERVER]}
    again = sandbox.kint("setup", "openclaw", "--env", "KINT_TENANT=kint-demo",
                         env={"PATH": path})
    assert again.stdout.splitlines() == ["openclaw: kint already saved, nothing changed"]
    assert len(mcp_set_calls(sandbox)) == 1
    changed = sandbox.kint("setup", "openclaw", env={"PATH": path})
    assert changed.returncode == 0
    assert len(backups(config.parent)) == 1  # the file was copied before its second change


def test_openclaw_config_moved_by_its_variables_is_the_one_checked_and_backed_up(sandbox,
                                                                                tmp_path):
    """OPENCLAW_CONFIG_PATH (or OPENCLAW_STATE_DIR, OPENCLAW_HOME) moves OpenClaw's config
    away from ~/.openclaw/openclaw.json: the file OpenClaw names is the one setup reads and
    backs up, so a default-place file that still holds kint from an earlier run does not
    make it report "already saved" while OpenClaw's own config lacks kint."""
    path = stand_in_openclaw(tmp_path)
    first = sandbox.kint("setup", "openclaw", env={"PATH": path})
    assert first.returncode == 0, first.stdout + first.stderr
    default = sandbox.home / ".openclaw" / "openclaw.json"
    moved = tmp_path / "elsewhere" / "openclaw.json"
    moved.parent.mkdir()
    moved.write_text(json.dumps({"gateway": {"port": 18789}}))
    moved.chmod(0o600)
    env = {"PATH": path, "OPENCLAW_CONFIG_PATH": str(moved)}

    out = sandbox.kint("setup", "openclaw", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "openclaw: saved MCP server kint (openclaw mcp set)", out.stdout
    [copy] = backups(moved.parent)
    assert lines[1:] == [f"  openclaw: backup {copy}"]
    assert json.loads(copy.read_text()) == {"gateway": {"port": 18789}}
    data = json.loads(moved.read_text())
    assert data["mcp"]["servers"]["kint"] == \
        json.loads(default.read_text())["mcp"]["servers"]["kint"]
    assert not backups(default.parent)
    again = sandbox.kint("setup", "openclaw", env=env)
    assert again.stdout.splitlines() == ["openclaw: kint already saved, nothing changed"]
    assert len(mcp_set_calls(sandbox)) == 2


def test_openclaw_that_cannot_name_its_config_file_is_still_set(sandbox, tmp_path):
    """An OpenClaw whose `config file` fails (one without the command): setup cannot tell
    which file to check or copy, so it writes kint's entry and says nothing was backed up."""
    path = stand_in_openclaw(tmp_path, config_file_fails=True)
    for _ in range(2):
        out = sandbox.kint("setup", "openclaw", env={"PATH": path})
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.splitlines() == [
            "openclaw: saved MCP server kint (openclaw mcp set)",
            "  openclaw: not backed up: `openclaw config file` did not name OpenClaw's "
            "config file"]
    assert len(mcp_set_calls(sandbox)) == 2
    assert not backups(sandbox.home / ".openclaw")


def test_openclaw_that_fails_is_reported_without_its_string_bridge_plugins_lines(sandbox,
                                                                                tmp_path):
    """OpenClaw's `string` plugin prints lines of its own on every call; a failed write
    is reported with OpenClaw's reason, not with them (v0.3.0's setup drops them too)."""
    harness_stand_ins.stand_in_openclaw(
        tmp_path / "bin", "print('Error: config is locked by another openclaw process')\n"
        "for n in range(4):\n"
        "    print(f'[plugins] string-bridge: polling block {n}', file=sys.stderr)\n"
        "sys.exit(1)\n")
    out = sandbox.kint("setup", "openclaw", env={"PATH": f"{tmp_path / 'bin'}:"
                                                         f"{bare_path(tmp_path)}"})
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.splitlines() == [
        "openclaw: failed: `openclaw config patch` exited 1: Error: config is locked by another "
        "openclaw process [HARNESS_ERROR]", OPENCLAW_HINT]


OPENCLAW_HINT = ("  openclaw: hint: run `openclaw config validate` to see what OpenClaw "
                 "refuses, then run `kint setup openclaw` again")

# What OpenClaw 2026.9.6's `mcp set` printed (on stderr, exit 1) for a config file that
# fails its schema: the reason first, the advice after a blank line.
OPENCLAW_INVALID_CONFIG = """\
OpenClaw config is invalid
File: ~/.openclaw/openclaw.json
Problem:
  - openclaw.json:1 \u2014 gateway.port: Invalid input: expected number, received string
  - <root>: Unrecognized key: "bogusKey"

Inspect: openclaw config validate
Audit, status, health, logs, tasks list/audit, and doctor commands still run with invalid config.
Run "openclaw doctor --fix" to repair the config, then retry.
"""


def test_openclaw_refusing_an_invalid_config_is_reported_with_its_problems(sandbox, tmp_path):
    """OpenClaw's reason comes first and its advice last: the failed line quotes the
    reason (which file, each problem) and the last line of advice, not only the advice."""
    harness_stand_ins.stand_in_openclaw(
        tmp_path / "bin", f"sys.stderr.write({OPENCLAW_INVALID_CONFIG!r})\nsys.exit(1)\n")
    out = sandbox.kint("setup", "openclaw", env={"PATH": f"{tmp_path / 'bin'}:"
                                                         f"{bare_path(tmp_path)}"})
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.splitlines() == [
        "openclaw: failed: `openclaw config patch` exited 1: OpenClaw config is invalid | File: "
        "~/.openclaw/openclaw.json | Problem: | - openclaw.json:1 \u2014 gateway.port: Invalid "
        "input: expected number, received string | - <root>: Unrecognized key: \"bogusKey\" | "
        "Run \"openclaw doctor --fix\" to repair the config, then retry. [HARNESS_ERROR]",
        OPENCLAW_HINT]


def test_run_setup_is_the_same_registration_for_join(sandbox, monkeypatch):
    """`kint join`'s harness step calls `run_setup` and reports as `kint setup --json` does
    (`reports_json`), each report's lines the ones `kint setup` prints."""
    from kint.commands.setup import reports_json, run_setup

    monkeypatch.setenv("HOME", str(sandbox.home))
    monkeypatch.setenv("KINT_HOME", str(sandbox.kint_home))
    monkeypatch.setenv("PATH", bare_path(sandbox.root))
    monkeypatch.setattr(sys, "argv", [KINT, "join"])
    config = sandbox.home / ".codex" / "config.toml"
    assert reports_json(run_setup(["codex"], {"KINT_TENANT": "joined"})) == [
        {"target": "codex", "status": "changed",
         "lines": [f"codex: wrote [mcp_servers.kint] to {config}"], "code": None, "hint": None,
         "dropped_env": []}]
    assert reports_json(run_setup(["codex"], {"KINT_TENANT": "joined"})) == [
        {"target": "codex", "status": "unchanged",
         "lines": ["codex: already configured"], "code": None, "hint": None,
         "dropped_env": []}]
    assert run_setup(["all"], {"KINT_TENANT": "joined"})[0].lines == [
        "claude: CLI not found, skipped"]


def test_setup_json_is_one_object_for_the_reports_and_one_for_a_refusal(sandbox, tmp_path):
    """`--json`: each harness's report on stdout (exit 1 still when one failed), and a
    refusal as the JSON error object on stdout with the plain form's exit status, nothing
    on stderr."""
    out = setup(sandbox, "all", "--json")
    assert out.returncode == 0 and out.stderr == "", out.stderr
    reports = json.loads(out.stdout)
    assert reports["target"] == "all"
    assert [(r["target"], r["status"]) for r in reports["reports"]] == [
        ("claude", "skipped"), ("codex", "skipped"), ("hermes", "skipped"),
        ("openclaw", "skipped")]
    assert reports["reports"][0]["lines"] == ["claude: CLI not found, skipped"]

    config = sandbox.home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[mcp_servers]\nkint = { command = "kint-server" }\n')
    failed = setup(sandbox, "codex", "--json")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert json.loads(failed.stdout)["reports"][0]["status"] == "failed"

    refused = setup(sandbox, "codex", "--env", "PYTHONPATH=/x", "--json")
    assert refused.returncode == 2 and refused.stderr == "", refused.stderr
    assert json.loads(refused.stdout) == {
        "error": "BAD_REQUEST", "message": "--env PYTHONPATH is refused: setup keeps "
        "PYTHONPATH out of kint-server", "hint": "setup writes --env values into the "
        "harness's configuration in plain text"}
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(KINT, lone / "kint")
    missing = kint_at(sandbox, lone / "kint", "setup", "codex", "--json",
                      path=bare_path(tmp_path))
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert json.loads(missing.stdout)["error"] == "INTERNAL"


def test_codex_forwards_every_setting_kint_reads_that_it_does_not_pin():
    """Codex drops what its entry does not name: every KINT_/SIBYL_ variable kint reads is
    pinned, forwarded by name, or deliberately kept from the server."""
    names: set[str] = set()
    for source in (ROOT / "kint").rglob("*.py"):
        names |= set(re.findall(r"[\"']((?:KINT|SIBYL)_[A-Z0-9_]+)[\"']", source.read_text()))
    not_variables = {"SIBYL_ERROR"}  # an error code
    pinned = {"KINT_HOME", "SIBYL_MEMORY_DB"}
    known = set(codex_mod.FORWARDED) | set(codex_mod.NOT_FORWARDED) | pinned | not_variables
    assert names - known == set(), "a new setting: add it to FORWARDED or NOT_FORWARDED"
    assert not set(codex_mod.FORWARDED) & set(codex_mod.NOT_FORWARDED)


def test_the_codex_edit_keeps_neighbouring_comments_and_appends_when_absent():
    table = {"command": "/k/kint-server", "args": [], "env": {"KINT_HOME": "/h"}}
    text = codex_mod.replace_table('model = "o3"\n', table)
    assert text == ('model = "o3"\n\n[mcp_servers.kint]\ncommand = "/k/kint-server"\n'
                    'args = []\n\n[mcp_servers.kint.env]\nKINT_HOME = "/h"\n')
    quoted = '["mcp_servers"."kint"]\ncommand = "old"\n\n# keep me\n[other]\nx = 1\n'
    text = codex_mod.replace_table(quoted, table)
    assert tomllib.loads(text) == {"mcp_servers": {"kint": table}, "other": {"x": 1}}
    assert "# keep me\n[other]" in text and "old" not in text


def test_a_symlinked_codex_config_is_written_where_it_points(sandbox, tmp_path):
    dotfiles = tmp_path / "dotfiles" / "codex.toml"
    dotfiles.parent.mkdir()
    dotfiles.write_text('[mcp_servers.kint]\ncommand = "kint-server"\n\n'
                        '[mcp_servers.kint.tools.memory_push]\napproval_mode = "approve"\n')
    link = sandbox.home / ".codex" / "config.toml"
    link.parent.mkdir(parents=True)
    link.symlink_to(dotfiles)
    out = setup(sandbox, "codex")
    assert out.returncode == 0, out.stdout + out.stderr
    assert link.is_symlink() and link.resolve() == dotfiles
    kint = tomllib.loads(dotfiles.read_text())["mcp_servers"]["kint"]
    assert kint["command"] == SERVER
    assert kint["tools"] == {"memory_push": {"approval_mode": "approve"}}  # the user's, kept


def test_the_python_hermes_runs_in_is_read_from_its_script(tmp_path):
    """kint's Hermes plugin is installed only when this Python can import kint: pip's
    `#!/abs/python`, `#!/usr/bin/env python3` and nothing else (a shell wrapper)."""
    from kint.harnesses.hermes_provider import hermes_python

    def script(name: str, first: str) -> str:
        path = tmp_path / name
        path.write_text(first + "\nimport sys\n")
        path.chmod(0o755)
        return str(path)

    assert hermes_python(script("pip", f"#!{sys.executable}")) == sys.executable
    assert hermes_python(script("env", "#!/usr/bin/env python3")) == shutil.which("python3")
    assert hermes_python(script("sh", "#!/bin/sh")) is None
    assert hermes_python(script("none", "import sys")) is None
    assert hermes_python(str(tmp_path / "missing")) is None


def test_a_config_backup_is_never_readable_by_others_while_it_is_written(tmp_path, monkeypatch):
    """A harness's config can hold tokens (an MCP server's env). Its backup is created 0600
    and only then given the original's mode, so no other user can open it half-written.
    The file system is real; the two spies below only look at each file the moment it is
    created (a window too short to catch from another process)."""
    import builtins
    import os
    import stat

    from kint.harnesses.config_files import backup

    config = tmp_path / ".claude.json"
    config.write_text('{"mcpServers": {"x": {"env": {"TOKEN": "s3cret"}}}}')
    config.chmod(0o600)
    seen: dict[str, int] = {}
    real_open, real_os_open = builtins.open, os.open

    def look(path) -> None:
        if ".bak-" in str(path):
            seen.setdefault(str(path), stat.S_IMODE(os.stat(path).st_mode))

    def spy_open(file, *args, **kwargs):
        handle = real_open(file, *args, **kwargs)
        if isinstance(file, (str, os.PathLike)):
            look(file)
        return handle

    def spy_os_open(path, *args, **kwargs):
        fd = real_os_open(path, *args, **kwargs)
        look(path)
        return fd

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(os, "open", spy_os_open)
    old_umask = os.umask(0o022)
    try:
        first, second = backup(config), backup(config)
    finally:
        os.umask(old_umask)
        monkeypatch.undo()
    assert first != second and first.read_bytes() == second.read_bytes() == config.read_bytes()
    assert seen == {str(first): 0o600, str(second): 0o600}
    assert stat.S_IMODE(first.stat().st_mode) == 0o600
    config.chmod(0o644)  # the original's mode is kept, once the bytes are in
    assert stat.S_IMODE(backup(config).stat().st_mode) == 0o644
