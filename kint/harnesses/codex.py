"""Codex: the `[mcp_servers.kint]` table of `$CODEX_HOME/config.toml` (default
`~/.codex/config.toml`), written by setup itself (Codex's `codex mcp add` cannot write
`env_vars`, and Codex needs no CLI for its file).

Codex starts a stdio server with a short whitelist of its own environment (HOME, PATH,
USER, ...) plus the entry's `env` (values) and `env_vars` (names forwarded from Codex's
environment). Anything else is dropped: a server started without KINT_HOME falls back to
`~/.kint` and starts a second supervisor under the wrong home. So the table pins kint's
identity variables in `env` and lists in `env_vars` the settings kint reads that are not
pinned, which then reach the server only when Codex itself runs with them (by name: no
value, secret or not, is written). PYTHONPATH is in neither, so it never reaches the server.

Setup owns `command`, `args`, `env` and `env_vars`, but for the variables of the user's own
in them (names that are not kint settings, nor PYTHONPATH), which are kept beside kint's
when Codex takes them (`managed`: the others are named with the backup); a value of the
user's under a kint setting's name that setup replaces or drops is named too (never shown);
every other key of the table (timeouts you set, tool filters) is kept, and
`startup_timeout_sec` / `tool_timeout_sec` are set when absent (the startup pull, and pushes
that wait for confirmations). The file is copied to `config.toml.bak-<unix time>` first, and
the edit is checked by parsing the result: every other table must come back unchanged, or
nothing is written."""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from kint.harnesses.cli_run import which
from kint.harnesses.config_files import backed_up, backup, reenabled, write_text_atomic
from kint.harnesses.env_checks import (left_line, replaced_lines, string_only, users_env,
                                       users_own)
from kint.harnesses.failures import HarnessFailure, read_config
from kint.harnesses.plan import SERVER_NAME, Plan, Report, failed

TABLE = ("mcp_servers", SERVER_NAME)
DEFAULT_TIMEOUTS = {"startup_timeout_sec": 90, "tool_timeout_sec": 180}
MANAGED = ("command", "args", "env", "env_vars")

# The settings kint and its supervisor read, forwarded by name when not pinned in `env`.
# Left out: KINT_OWNER_KEY (never near a server), the devchain's and `kint authorize`'s own.
FORWARDED = (
    "KINT_TENANT", "KINT_SPACE", "SIBYL_CREDENTIALS", "SIBYL_MEMORY_TELEMETRY", "HERMES_HOME",
    "KINT_SESSION_PASSPHRASE", "KINT_NO_KEYCHAIN", "KINT_KEY_TTL",
    "KINT_RPC_URL", "KINT_RPC_URL_2", "KINT_RPC_TIMEOUT", "KINT_CONTRACT", "KINT_OFFLINE",
    "KINT_ALLOW_SINGLE_RPC", "KINT_VERIFY_HEAD_SECONDS",
    "KINT_BOOTSTRAP_SECONDS", "KINT_POLL_SECONDS", "KINT_QUIET_SECONDS",
    "KINT_SIZE_TRIGGER_BYTES", "KINT_PUSH_RETRY_SECONDS", "KINT_NO_WATCHER", "KINT_LOG_MAX_BYTES",
    "KINT_NONCE_RETRY_SECONDS", "KINT_QUARANTINE_BACKOFF_SECONDS",
    "KINT_WORKER_HEARTBEAT_TIMEOUT", "KINT_WORKER_IDLE_SECONDS", "KINT_WORKER_RECYCLE_MIB",
)
NOT_FORWARDED = ("KINT_OWNER_KEY", "KINT_ANVIL", "KINT_AUTHORIZE_PAGE_TIMEOUT",
                 "KINT_AUTHORIZE_POLL_COUNT", "KINT_AUTHORIZE_POLL_SECONDS")


def codex_home() -> Path:
    raw = os.environ.get("CODEX_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".codex"


def config_path() -> Path:
    return codex_home() / "config.toml"


def managed(plan: Plan, current: Any = None) -> tuple[dict[str, Any], dict[str, str]]:
    """What setup writes of the table: kint's, and the variables of the user's own already in
    `current`'s `env` and `env_vars` (env_checks.users_env), kept when Codex takes them;
    and those left out, name -> why (for env_checks.left_line). Codex refuses its whole
    config for an `env` value that is not a string, or an `env_vars` item that is neither a
    name nor a table (`{ name = "NAME", ... }`, kept as it is)."""
    theirs, left = users_env(current, plan.env, string_only)
    forwarded = [name for name in FORWARDED if name not in plan.env]
    names = current.get("env_vars") if isinstance(current, dict) else None
    kept: list[Any] = []
    for number, item in enumerate(names if isinstance(names, list) else [], 1):
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str):
            left[f"env_vars item {number}"] = "neither a name nor a table with one"
        elif users_own(name, plan.env) and name not in forwarded:
            kept.append(item)
    return ({"command": str(plan.server), "args": [], "env": {**theirs, **plan.env},
             "env_vars": [*forwarded, *kept]}, left)


def wanted_table(plan: Plan, current: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The table setup writes, and the user's values it leaves out (`managed`)."""
    table = dict(current) if isinstance(current, dict) else {}
    for key, value in DEFAULT_TIMEOUTS.items():
        table.setdefault(key, value)
    for key in MANAGED:
        table.pop(key, None)
    if table.get("enabled") is False:  # turned on again, and said (harnesses.reenabled)
        del table["enabled"]
    mine, left = managed(plan, current)
    return {**mine, **table}, left


def setup(plan: Plan, explicit_target: bool = True) -> list[Report]:
    path = config_path()
    if not explicit_target and which("codex") is None and not codex_home().is_dir():
        return [Report("codex", "skipped",
                       [f"codex: CLI not found and no {codex_home()}, skipped"])]
    text = read_config(path) or ""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        return [failed("codex", HarnessFailure(
            f"{path} does not parse ({err})", "fix it (Codex cannot read it either), then run "
            "`kint setup codex` again; nothing was changed"))]
    servers = doc.get("mcp_servers")
    current = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    wanted, left = wanted_table(plan, current)
    notes = sibyl_note(servers if isinstance(servers, dict) else {})
    if current == wanted:
        # v0.3.0's line (13-harnesses.md, "Codex"); here only a table that already is what
        # setup writes is left alone.
        return [Report("codex", "unchanged", ["codex: already configured", *notes])]
    try:
        new_text = replace_table(text, wanted)
    except EditError as err:
        return [failed("codex", HarnessFailure(
            f"{err}, in {path}", "edit that file by hand (deploy/mcp/codex.toml has the table); "
            "nothing was changed"))]
    expected = json.loads(json.dumps(doc, default=str))
    expected.setdefault("mcp_servers", {})[SERVER_NAME] = wanted
    got = json.loads(json.dumps(tomllib.loads(new_text), default=str))
    if got != json.loads(json.dumps(expected, default=str)):
        return [failed("codex", HarnessFailure(
            f"could not edit {path} safely", "edit that file by hand (deploy/mcp/codex.toml "
            "has the table); nothing was changed"))]
    lines = reenabled("codex", current, "mcp_servers.kint.enabled")
    backed_up(lines, "codex", backup(path))
    lines += left_line("codex", left)
    lines += replaced_lines("codex", current, wanted["env"], plan.explicit)
    write_text_atomic(path, new_text)
    return [Report("codex", "changed",
                   [f"codex: wrote [mcp_servers.kint] to {path}", *lines, *notes])]


def sibyl_note(servers: dict[str, Any]) -> list[str]:
    out = []
    for name, server in servers.items():
        text = json.dumps(server, default=str)
        if name != SERVER_NAME and (name == "sibyl-memory" or "sibyl-memory-mcp" in text
                                    or "sibyl_memory_mcp" in text):
            out.append(f"  codex: Sibyl's own server is registered too ([mcp_servers.{name}]): "
                       "remove it (one store, one server)")
    return out


# --- editing the TOML text -------------------------------------------------------------

class EditError(Exception):
    pass


HEADER = re.compile(r"^[ \t]*(\[\[?)([^\[\]\n]+)(\]\]?)[ \t]*(#.*)?$")


def split_key(raw: str) -> tuple[str, ...]:
    """`a."b.c" . d` -> ("a", "b.c", "d")."""
    parts: list[str] = []
    buf = ""
    quote = ""
    i = 0
    while i < len(raw):
        ch = raw[i]
        if quote:
            if ch == "\\" and quote == '"' and i + 1 < len(raw):
                buf += raw[i:i + 2]
                i += 2
                continue
            buf += ch
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
            buf += ch
        elif ch == ".":
            parts.append(buf)
            buf = ""
        else:
            buf += ch
        i += 1
    parts.append(buf)
    out = []
    for part in parts:
        part = part.strip()
        if part[:1] == '"':
            part = tomllib.loads(f"k = {part}")["k"]
        elif part[:1] == "'":
            part = part[1:-1]
        out.append(part)
    return tuple(out)


def replace_table(text: str, table: dict[str, Any]) -> str:
    """`text` with every `[mcp_servers.kint...]` section replaced by `table`, written where
    the first one was (or appended)."""
    lines = text.splitlines(keepends=True)
    keep: list[str] = []
    dropped: list[str] = []  # the current kint section
    insert_at: int | None = None
    inside = False

    def close_section() -> None:
        # Blank and comment lines at the end of a kint section belong to what follows.
        trailing: list[str] = []
        while dropped and (not dropped[-1].strip() or dropped[-1].lstrip().startswith("#")):
            trailing.insert(0, dropped.pop())
        keep.extend(trailing)
        dropped.clear()

    for line in lines:
        match = HEADER.match(line.rstrip("\r\n"))
        if match:
            key = split_key(match.group(2))
            if inside:
                close_section()
            inside = key[:2] == TABLE
            if inside and match.group(1) == "[[":
                raise EditError("[[mcp_servers.kint]] is an array of tables")
            if inside and insert_at is None:
                insert_at = len(keep)
        (dropped if inside else keep).append(line)
    if inside:
        close_section()
    rest = "".join(keep)
    try:
        leftover = tomllib.loads(rest).get("mcp_servers", {})
    except tomllib.TOMLDecodeError as err:
        raise EditError(f"the file does not parse without the kint table ({err})") from None
    if isinstance(leftover, dict) and SERVER_NAME in leftover:
        raise EditError("mcp_servers.kint is written inline or as dotted keys, not as a "
                        "[mcp_servers.kint] table")
    block = emit_table(TABLE, table)
    if insert_at is None:
        prefix = rest if rest.endswith("\n") or not rest else rest + "\n"
        sep = "\n" if prefix.strip() else ""
        return prefix + sep + block
    before = "".join(keep[:insert_at])
    after = "".join(keep[insert_at:]).lstrip("\r\n")
    return before + block + ("\n" + after if after.strip() else "")


def emit_table(path: tuple[str, ...], table: dict[str, Any]) -> str:
    scalars = [(k, v) for k, v in table.items() if not isinstance(v, dict)]
    subtables = [(k, v) for k, v in table.items() if isinstance(v, dict)]
    out: list[str] = []
    if scalars or not subtables:  # a table of tables needs no header of its own
        out.append(f"[{'.'.join(key(p) for p in path)}]\n")
        out += [f"{key(k)} = {value(v)}\n" for k, v in scalars]
    for k, v in subtables:
        if out:
            out.append("\n")
        out.append(emit_table(path + (k,), v))
    return "".join(out)


BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def key(name: str) -> str:
    return name if BARE.match(name) else string(name)


def string(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return string(v)
    if isinstance(v, (list, tuple)):
        items = [value(x) for x in v]
        flat = "[" + ", ".join(items) + "]"
        if len(flat) <= 80:
            return flat
        return "[\n" + "".join(f"    {item},\n" for item in items) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{key(k)} = {value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, (_dt.datetime, _dt.date, _dt.time)):
        return v.isoformat()
    raise EditError(f"cannot write a value of type {type(v).__name__}")
