"""Claude Code: a user-scope MCP server, written by Claude Code's own CLI
(`claude mcp add-json --scope user kint -`, the entry's JSON on its stdin) into
`~/.claude.json` (or `$CLAUDE_CONFIG_DIR/.claude.json`), under `mcpServers`.

The JSON goes on stdin, never on the command line: a process's argv is readable by every
user of the machine (/proc/<pid>/cmdline, `ps`), and the entry carries the keys a user
added to kint's entry (a header with a token, say). A Claude Code older than add-json's
`-` takes an entry only on its command line: kint's own entry (kint's settings alone,
checked to hold no secret and no keyed URL) is given there, and the user's keys are left
in the backup, named, rather than shown to the machine.

Claude Code starts a server with its own whole environment plus the entry's `env`, so the
entry launches `/usr/bin/env -u PYTHONPATH <kint-server>`: kint's variables pinned in
`env`, the shell's PYTHONPATH dropped. The variables of the user's own already in that
`env` (env_checks.users_env) are written back beside kint's, those with a string value:
Claude Code's schema takes no other, and refuses the whole entry for one (after `claude mcp
remove` ran), so any other is left out and named with the backup that holds it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from kint.harnesses.cli_run import env_command, help_mentions, run_cli, tail, which
from kint.harnesses.config_files import backed_up, backup, kept_backup
from kint.harnesses.env_checks import (left_line, refuse_users_values_on_argv, replaced_lines,
                                       string_only, users_env, users_values)
from kint.harnesses.failures import HarnessFailure, read_config
from kint.harnesses.plan import SERVER_NAME, Plan, Report, failed
from kint.protocol.errors import ErrorCode

TIMEOUT = 60


def config_path() -> Path:
    raw = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(raw).expanduser() if raw else Path.home()) / ".claude.json"


def entry(plan: Plan, theirs: dict[str, str] | None = None) -> dict[str, Any]:
    """kint's entry; `theirs`, the variables of the user's own kept in its `env`."""
    return {"type": "stdio", "command": env_command(),
            "args": ["-u", "PYTHONPATH", str(plan.server)], "env": {**(theirs or {}), **plan.env}}


def user_servers(path: Path) -> dict[str, Any]:
    """The user-scope servers in Claude Code's config file. A file that is not JSON fails
    here, before anything runs: Claude Code refuses to start on it too, and `claude mcp
    add-json` would fail after setup had copied it."""
    text = read_config(path)
    try:
        data = json.loads(text) if text is not None else {}
    except ValueError as err:
        raise HarnessFailure(f"{path} does not parse as JSON ({err})",
                             "fix it or move it aside (Claude Code does not start on it "
                             "either), then run `kint setup claude` again; nothing was "
                             "changed") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    return servers if isinstance(servers, dict) else {}


def same(current: Any, wanted: dict[str, Any]) -> bool:
    if not isinstance(current, dict):
        return False
    return all(current.get(k, [] if k == "args" else None) == v for k, v in wanted.items())


# v0.3.0's reminder, printed after every Claude Code registration (13-harnesses.md, "kint
# setup"): its words are conditional, so it stands whether or not Sibyl's server is there.
SIBYL_REMINDER = ("  claude: `claude mcp remove -s user sibyl-memory` if Sibyl's own server is "
                  "also registered (one store, one server)")


def sibyl_note(servers: dict[str, Any]) -> list[str]:
    """v0.3.0's reminder, then a line for each Sibyl server registered under a name other
    than `sibyl-memory`, which the reminder's command would not remove."""
    names = [n for n, s in servers.items()
             if n not in (SERVER_NAME, "sibyl-memory") and _is_sibyls(n, s)]
    return [SIBYL_REMINDER, *(f"  claude: Sibyl's own server is registered too ({n}): `claude "
                              f"mcp remove -s user {n}` (one store, one server)" for n in names)]


def _is_sibyls(name: str, server: Any) -> bool:
    text = json.dumps(server) if isinstance(server, dict) else ""
    return name == "sibyl-memory" or "sibyl-memory-mcp" in text or "sibyl_memory_mcp" in text


# The keys of a Claude Code MCP entry that say how kint-server is started: setup writes
# these. Any other key of a kint entry already saved (a `timeout` the user set) is given to
# `claude mcp add-json` again with them, since the entry is removed and added anew; Claude
# Code saves those its schema takes (`timeout`) and leaves out the rest, which setup names.
MANAGED = ("type", "command", "args", "env")


def users_keys(current: Any) -> dict[str, Any]:
    return {k: v for k, v in current.items() if k not in MANAGED} \
        if isinstance(current, dict) else {}


def dropped_keys(kept: dict[str, Any], theirs: dict[str, str], saved: Any, why: str | None
                 ) -> list[str]:
    """The line naming the keys (and `env` variables, `theirs`) of the user's own that Claude
    Code did not save back into kint's entry, and where they are: the keys its schema
    leaves out, or all of them when they were not given to it (`why`, said as the reason)."""
    saved = saved if isinstance(saved, dict) else {}
    env = saved.get("env") if isinstance(saved.get("env"), dict) else {}
    gone = [k for k in kept if saved.get(k) != kept[k]]
    gone += [f"env.{k}" for k in theirs if env.get(k) != theirs[k]]
    if not gone:
        return []
    why = why or "Claude Code does not keep keys it does not know"
    return [f"  claude: kint's entry lost keys of yours ({', '.join(gone)}): {why}; the "
            "backup above holds them"]


ADD_JSON = ("mcp", "add-json", "--scope", "user", SERVER_NAME)
ARGV_ONLY = ("this Claude Code takes an entry only on its command line, where every user of "
             "this machine can read it, so kint gave it its own entry alone (update Claude "
             "Code to one whose `claude mcp add-json` reads `-` from stdin, then run `kint "
             "setup claude` again)")


def add(cli: str, wanted: dict[str, Any], kept: dict[str, Any], theirs: dict[str, str]
        ) -> tuple[subprocess.CompletedProcess[str], str | None, dict[str, Any]]:
    """`claude mcp add-json` of kint's entry with the user's keys kept, the JSON on stdin;
    when Claude Code refuses the entry for one of them (a value its schema does not take),
    kint's entry alone, so kint is registered rather than left removed. Returns the last
    run, why the user's keys (or variables, `theirs`) were not given or were refused (for
    `dropped_keys`), and the entry given, less the user's keys."""
    argv = [cli, *ADD_JSON, "-"]
    added = run_cli(argv, timeout=TIMEOUT, stdin=json.dumps({**kept, **wanted}))
    if added.returncode == 0:
        return added, None, wanted
    why = None
    if kept:  # refused for a value of the user's keys: kint's entry alone
        why = f"Claude Code refused them ({tail(added)})"
        added = run_cli(argv, timeout=TIMEOUT, stdin=json.dumps(wanted))
    if added.returncode == 0 or reads_stdin(cli):
        return added, why, wanted
    # An older Claude Code, which took `-` for the JSON itself: the user's variables left
    # in the backup, as their keys are.
    own = argv_safe({**wanted, "env": {k: v for k, v in wanted["env"].items()
                                       if k not in theirs}})
    return (run_cli([cli, *ADD_JSON, json.dumps(own)], timeout=TIMEOUT),
            ARGV_ONLY if kept or theirs else None, own)


def reads_stdin(cli: str) -> bool:
    """Whether this Claude Code's `mcp add-json` reads the JSON from stdin (`-`), as its
    help says since it does: asked only once an add on stdin failed, so a Claude Code that
    takes it costs no second run."""
    return help_mentions([cli, "mcp", "add-json", "--help"], "stdin", timeout=TIMEOUT)


def argv_safe(wanted: dict[str, Any]) -> dict[str, Any]:
    """kint's entry, for a Claude Code that takes it only on its command line: refused
    (HarnessFailure) when its `env` holds a variable that is not a kint setting (an
    `--env` of the user's, whose value kint has not checked), since that would show it to
    every user of the machine. kint's settings are checked before setup writes them: no
    secret, no endpoint URL that may carry an API key (env_checks.py)."""
    refuse_users_values_on_argv(
        "this Claude Code takes an entry only on its command line",
        users_values(wanted.get("env", {})),
        "update Claude Code to one whose `claude mcp add-json` reads `-` from stdin, then "
        "run `kint setup claude` again")
    return wanted


def setup(plan: Plan, explicit_target: bool = True) -> list[Report]:
    cli = which("claude")
    if cli is None:
        return [Report("claude", "skipped", ["claude: CLI not found, skipped"])]
    path = config_path()
    servers = user_servers(path)
    current = servers.get(SERVER_NAME)
    theirs, left = users_env(current, plan.env, string_only)
    wanted = entry(plan, theirs)
    if same(current, wanted):
        # v0.3.0's line (13-harnesses.md, "kint setup"): kint is registered at user scope,
        # as setup writes it; the report's status says nothing was rewritten.
        return [Report("claude", "unchanged",
                       ["claude: registered kint (user scope)", *sibyl_note(servers)])]
    kept = users_keys(current)
    copy = backup(path)
    try:
        if SERVER_NAME in servers:
            run_cli([cli, "mcp", "remove", "--scope", "user", SERVER_NAME], timeout=TIMEOUT)
        added, why, given = add(cli, wanted, kept, theirs)
    except HarnessFailure as err:
        return [failed("claude", err, *kept_backup("claude", copy, path))]
    servers = user_servers(path)
    lines: list[str] = []
    if added.returncode != 0 or not same(servers.get(SERVER_NAME), given):
        lines = kept_backup("claude", copy, path)
        return [failed("claude", HarnessFailure(
            f"`claude mcp add-json` did not register kint: {tail(added)}",
            "run `claude mcp list` to see what Claude Code reads, then run `kint setup "
            "claude` again", ErrorCode.HARNESS_ERROR), *lines)]
    backed_up(lines, "claude", copy)
    lines += dropped_keys(kept, theirs, servers.get(SERVER_NAME), why)
    lines += left_line("claude", left)
    lines += replaced_lines("claude", current, given["env"], plan.explicit)
    return [Report("claude", "changed",
                   ["claude: registered kint (user scope)", *sibyl_note(servers), *lines])]
