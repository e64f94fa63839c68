"""OpenClaw: `mcp.servers.kint` in OpenClaw's config file (`~/.openclaw/openclaw.json` by
default), written by OpenClaw's own CLI: `openclaw config patch --stdin --replace-path
mcp.servers.kint`, the entry on its stdin, which replaces the entry whole as `openclaw mcp
set kint '<json>'` does, in one validated write.

The entry goes on stdin, never on the command line (`mcp set` takes it only there): a
process's argv is readable by every user of the machine (/proc/<pid>/cmdline, `ps`), and
the entry carries the user's values (an `--env` that is not a kint setting, the keys and
variables of theirs kept in kint's entry). An OpenClaw whose `config patch` does not read
stdin gets `mcp set` with kint's own definition (kint's settings alone, checked to hold no
secret and no keyed URL); the user's keys are left in the backup, named, and an `--env` of
theirs fails setup, named, never its value.

The definition launches `/usr/bin/env -u PYTHONPATH KEY=VALUE ... <kint-server>`: kint's
settings travel in the launch line itself, so they reach the server whatever environment
OpenClaw's runtime gives it, and the shell's PYTHONPATH does not. The user's values (an
`--env` that is not a kint setting, the variables of theirs kept) go in the entry's `env`,
which OpenClaw gives the server too, never in that line: it is kint-server's argv, readable
by every user of the machine for as long as the server runs. OpenClaw leaves some names
of that `env` out when it starts the server (its host-env policy, openclaw_env), saying so
only in its log: setup names those, on every run. The file is copied to
`<file>.bak-<unix time>` first; a definition that already is this one is left alone.

Which file that is, OpenClaw's CLI says (`openclaw config file`): OPENCLAW_CONFIG_PATH,
OPENCLAW_STATE_DIR and OPENCLAW_HOME move it, and OpenClaw still reads the files of its
older names where no openclaw.json exists. Setup asks rather than re-deriving those rules:
a guessed path would back up the wrong file and, when that file held kint from an earlier
run, report "already saved" while OpenClaw's own config lacks it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from kint.harnesses.cli_run import env_command, help_mentions, run_cli, which
from kint.harnesses.config_files import backed_up, backup, kept_backup, reenabled
from kint.harnesses.env_checks import (refuse_users_values_on_argv, replaced_lines,
                                       shown_name, users_env, users_values)
from kint.harnesses.failures import HarnessFailure, read_config
from kint.harnesses.openclaw_env import dropped_why
from kint.harnesses.plan import SERVER_NAME, Plan, Report, failed
from kint.protocol.errors import ErrorCode

TIMEOUT = 120
# OpenClaw's `string` plugin (a chain poller) prints its own lines on every CLI call, and
# they would crowd out the reason `mcp set` failed (kint v0.3.0 drops them too).
PLUGIN_NOISE = "string-bridge"
REASON_LINES = 6


def config_path(cli: str) -> Path | None:
    """The config file OpenClaw reads and `mcp set` writes, as `openclaw config file`
    prints it (its last line that is an absolute path, past any plugin's chatter); None
    when the command fails or names no such path (an OpenClaw without it)."""
    out = run_cli([cli, "config", "file"], timeout=TIMEOUT)
    if out.returncode != 0:
        return None
    for line in reversed(out.stdout.splitlines()):
        text = line.strip()
        if text.startswith("/") and PLUGIN_NOISE not in text.lower():
            return Path(text)
    return None


def definition(plan: Plan) -> dict[str, Any]:
    """kint's launch line: kint's settings alone (checked to hold no secret and no keyed
    URL). An `--env` of the user's goes in the entry's `env` (`wanted_entry`): the launch
    line is the server's argv, which every user of the machine reads in /proc/<pid>/cmdline
    for as long as kint-server runs."""
    from kint.settings.schema import BY_NAME

    return {"command": env_command(),
            "args": ["-u", "PYTHONPATH", *[f"{k}={v}" for k, v in plan.env.items()
                                           if k in BY_NAME], str(plan.server)]}


def saved(path: Path) -> Any:
    """The saved definition, when the file is plain JSON (OpenClaw may write JSON5: then
    setup cannot tell and runs `mcp set`, which is idempotent on OpenClaw's side)."""
    text = read_config(path)
    try:
        return json.loads(text or "")["mcp"]["servers"][SERVER_NAME]
    except (ValueError, KeyError, TypeError):
        return None


def failure_reason(out: subprocess.CompletedProcess[str]) -> str:
    """Why an OpenClaw command failed, on one line. OpenClaw 2026.9 prints the reason first
    (for a config its schema refuses: the headline, the file and each problem) and its
    advice after a blank line, so the last lines alone would say what to run but not what
    is wrong: this quotes the first block (up to REASON_LINES lines) and the last line
    when it lies past that block, without the `string` plugin's lines."""
    blocks: list[list[str]] = [[]]
    for line in (out.stdout + "\n\n" + out.stderr).splitlines():
        if PLUGIN_NOISE in line.lower():
            continue
        if line.strip():
            blocks[-1].append(line.strip())
        elif blocks[-1]:
            blocks.append([])
    blocks = [b for b in blocks if b]
    if not blocks:
        return f"exit status {out.returncode}"
    quoted = blocks[0][:REASON_LINES]
    if len(blocks) > 1:
        quoted.append(blocks[-1][-1])
    return " | ".join(quoted)


# The keys of an entry that say how OpenClaw reaches the server, and whether it does: setup
# writes these (a stdio launch line, on). Any other key of a kint entry already saved (the
# user's `requestTimeoutMs`, `toolFilter`, ...) is kept, since the write replaces the whole
# entry with what it is given. (OpenClaw's docs/gateway/config-extensions.md, "MCP".) Its
# `env` holds the user's values: the variables of theirs already there (env_checks.users_env)
# and their `--env` values; kint's own travel in the launch line, which `env` runs after
# OpenClaw applied the entry's `env`.
MANAGED = ("command", "args", "env", "cwd", "url", "transport", "type", "headers", "auth",
           "oauth", "sslVerify", "clientCert", "clientKey", "enabled")


def wanted_entry(current: Any, plan: Plan) -> dict[str, Any]:
    """kint's entry as setup writes it. Every variable of the user's in it goes back as it
    is: OpenClaw's schema (2026.9) takes a string, a number or a boolean there, and a file
    holding any other value is refused by `config patch` before it writes (it validates the
    whole file), setup failing with OpenClaw's own words, which name the key."""
    kept = {k: v for k, v in current.items() if k not in MANAGED} \
        if isinstance(current, dict) else {}
    theirs, _ = users_env(current, plan.env, lambda name, value: None)
    env = {**theirs, **{k: plan.env[k] for k in users_values(plan.env)}}
    return {**definition(plan), **({"env": env} if env else {}), **kept}


PATCH = ("config", "patch", "--stdin", "--replace-path", f"mcp.servers.{SERVER_NAME}")
ARGV_ONLY = ("this OpenClaw takes an entry only on its command line (`openclaw mcp set`), "
             "where every user of this machine can read it, so kint gave it its own "
             "definition alone (update OpenClaw to one whose `openclaw config patch` reads "
             "`--stdin`, then run `kint setup openclaw` again)")


def save(cli: str, wanted: dict[str, Any], plan: Plan
         ) -> tuple[subprocess.CompletedProcess[str], str, bool]:
    """The entry written by `openclaw config patch`, on its stdin. Returns the run, the
    command it was (for a failure's line) and whether the user's keys were left out: an
    OpenClaw whose `config patch` does not read `--stdin` (its help says so when it does)
    gets `mcp set` with kint's own definition, refused when that holds an `--env` value of
    the user's."""
    patch = {"mcp": {"servers": {SERVER_NAME: wanted}}}
    out = run_cli([cli, *PATCH], timeout=TIMEOUT, stdin=json.dumps(patch))
    if out.returncode == 0 or patches_from_stdin(cli):
        return out, "openclaw config patch", False
    refuse_users_values_on_argv(
        "this OpenClaw takes an entry only on its command line (`openclaw mcp set`)",
        users_values(plan.env),
        "update OpenClaw to one whose `openclaw config patch` reads `--stdin`, then run "
        "`kint setup openclaw` again")
    own = definition(plan)
    out = run_cli([cli, "mcp", "set", SERVER_NAME, json.dumps(own)], timeout=TIMEOUT)
    return out, "openclaw mcp set", wanted != own


def patches_from_stdin(cli: str) -> bool:
    """Whether this OpenClaw's `config patch` reads the patch from stdin (`--stdin`, in its
    help): asked only once a patch failed, so an OpenClaw that takes it costs no more."""
    return help_mentions([cli, "config", "patch", "--help"], "--stdin", timeout=TIMEOUT)


def dropped_keys(wanted: dict[str, Any], plan: Plan) -> list[str]:
    """The line naming the keys of the user's own that an OpenClaw taking an entry only on
    its command line was not given, and where they are."""
    gone = [k for k in wanted if k not in definition(plan)]
    return [f"  openclaw: kint's entry lost keys of yours ({', '.join(gone)}): {ARGV_ONLY}; "
            "the backup above holds them"]


def dropped_by_openclaw(entry: dict[str, Any]) -> dict[str, str]:
    """The variables of `entry`'s `env` that OpenClaw leaves out when it starts kint-server
    (openclaw_env), name -> why: the entry holds them, the server never sees them. The
    names as the entry holds them, for `--json`; the line shows them (`dropped_line`)."""
    env = entry.get("env")
    return {name: why for name in (env if isinstance(env, dict) else {})
            if (why := dropped_why(name)) is not None}


def dropped_line(dropped: dict[str, str]) -> list[str]:
    """The line naming the variables of kint's entry OpenClaw will not give the server, and
    why: it says so only in its own log, when it starts the server."""
    if not dropped:
        return []
    said = "; ".join(f"{shown_name(name)}: {why}" for name, why in dropped.items())
    return [f"  openclaw: OpenClaw will not give kint-server these variables of kint's entry "
            f"({said}): it drops them when it starts the server, saying so only in its own "
            f"log; they stay in the entry, without effect"]


def with_dropped(report: Report, dropped: dict[str, str]) -> list[Report]:
    """`report`, its lines followed by the variables OpenClaw drops (`dropped_line`), which
    `--json` carries as a list of their names as the entry holds them (a line quotes an odd
    one: env_checks.shown_name)."""
    report.lines += dropped_line(dropped)
    report.dropped_env = list(dropped)
    return [report]


def setup(plan: Plan, explicit_target: bool = True) -> list[Report]:
    cli = which("openclaw")
    if cli is None:
        return [Report("openclaw", "skipped", ["openclaw: CLI not found, skipped"])]
    path = config_path(cli)
    current = saved(path) if path is not None else None
    wanted = wanted_entry(current, plan)
    if current == wanted:
        return with_dropped(Report("openclaw", "unchanged",
                                   ["openclaw: kint already saved, nothing changed"]),
                            dropped_by_openclaw(wanted))
    lines = reenabled("openclaw", current, "mcp.servers.kint.enabled")
    copy = backup(path) if path is not None else None
    try:
        out, ran, left_out = save(cli, wanted, plan)
    except HarnessFailure as err:
        return [failed("openclaw", err, *(kept_backup("openclaw", copy, path) if path else []))]
    if out.returncode != 0:
        lines = kept_backup("openclaw", copy, path) if path is not None else []
        return [failed("openclaw", HarnessFailure(
            f"`{ran}` exited {out.returncode}: {failure_reason(out)}",
            "run `openclaw config validate` to see what OpenClaw refuses, then run `kint setup "
            "openclaw` again", ErrorCode.HARNESS_ERROR), *lines)]
    backed_up(lines, "openclaw", copy)
    if path is None:
        lines.append("  openclaw: not backed up: `openclaw config file` did not name "
                     "OpenClaw's config file")
    if left_out:
        lines += dropped_keys(wanted, plan)
    # What the server is given: the entry's `env`, then kint's settings in the launch line.
    lines += replaced_lines("openclaw", current, {**wanted.get("env", {}), **plan.env},
                            plan.explicit)
    # v0.3.0's line (13-harnesses.md, "OpenClaw"), whichever command wrote the entry.
    return with_dropped(Report("openclaw", "changed",
                               ["openclaw: saved MCP server kint (openclaw mcp set)", *lines]),
                        dropped_by_openclaw(definition(plan) if left_out else wanted))
