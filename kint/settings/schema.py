"""Every setting kint reads, once: its name, type, default, scope, who reads it, whether it
is a secret, and the line the docs give it (docs/settings.md is made from this table).

Scopes:

- `machine`: one value for the machine (the config file's top level, or the daemon's
  environment). A command given another value in its environment is told, in one line,
  what the daemon runs with and how to change it.
- `space`: like `machine`, and a `[spaces."<label>"]` table of the config file may give one
  space its own value. Watcher timings are also taken from kint-server's environment, which
  it sends when it attaches.
- `call`: each call's own value applies: the caller's environment, sent with the request
  when the daemon reads it. The config file and the daemon's environment give the value
  of a call that sets none.

`read_by` says which processes read the setting: `cli` (the `kint` command), `server`
(kint-server), `daemon` (the supervisor and its workers). A setting the daemon reads is
sent by a client that has it in its environment (a secret only as "set"), so the daemon
can apply it or report that it did not.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from kint.settings import secret_proof

Kind = Literal["float", "int", "flag", "text", "url", "address", "ttl", "path"]
Scope = Literal["machine", "space", "call"]

BASE_PUBLIC_RPC = "https://mainnet.base.org"
DEFAULT_CONTRACT = "0xa22E03f7a4145Bf4909a83595C90a38E14d79600"

CLI = frozenset({"cli"})
SERVER = frozenset({"server"})
CLIENTS = frozenset({"cli", "server"})
DAEMON = frozenset({"daemon"})
CLI_DAEMON = frozenset({"cli", "daemon"})
EVERYONE = frozenset({"cli", "server", "daemon"})


@dataclass(frozen=True)
class Setting:
    name: str
    kind: Kind
    default: Any
    scope: Scope
    read_by: frozenset[str]
    group: str
    doc: str
    default_doc: str = ""
    minimum: float | None = None
    secret: bool = False
    # May it be set in config.toml? (Never a secret, never what locates the file.)
    in_file: bool = True
    # The ops on which a caller's value of a non-call setting is applied anyway (the
    # watcher's timings, from kint-server's attach).
    applied_on: frozenset[str] = frozenset()
    # The platforms (`sys.platform`) on which it does anything (empty: every one), and why
    # it does nothing elsewhere: a value given there is said, never silently dropped.
    platforms: frozenset[str] = frozenset()
    elsewhere: str = ""
    # A call-scope setting a space's table may also give, as that space's default when the
    # call does not set it (a config.toml written when it was a per-space setting loads).
    space_table: bool = False
    # A value that does not parse refuses the work that reads it, wherever it was set,
    # instead of giving way to the next layer down: the settings that choose which chain
    # and which contract kint reads and writes, where the next layer down is Base mainnet's
    # EpochAnchor (kint.chain.config.load_chain_config raises on it).
    strict: bool = False

    @property
    def per_space(self) -> bool:
        """Whether a space's table in config.toml may set it."""
        return self.scope == "space" or self.space_table

    @property
    def key(self) -> str:
        """Its key in config.toml: the name without `KINT_`, in lower case."""
        return self.name.removeprefix("KINT_").lower()

    @property
    def sent(self) -> bool:
        """Whether a client sends its value (or, for a secret, that it is set) with a
        request: the daemon reads it, and it does not say which daemon to talk to."""
        return "daemon" in self.read_by and self.name != "KINT_HOME"

    def no_effect_here(self, value: Any) -> str | None:
        """Why `value` (set, on) does nothing on this platform, or None when it does
        something (or asks for nothing: off, zero, unset)."""
        if not self.platforms or sys.platform in self.platforms or not value:
            return None
        return f"no effect on {sys.platform}: {self.elsewhere}"

    def applies(self, op: str) -> bool:
        """Whether a caller's value is used for `op` (else it is compared and reported)."""
        return self.scope == "call" or op in self.applied_on


def _s(name: str, kind: Kind, default: Any, scope: Scope, read_by: frozenset[str], group: str,
       doc: str, default_doc: str = "", **kw: Any) -> Setting:
    return Setting(name, kind, default, scope, read_by, group, doc, default_doc, **kw)


PLACES = "Where kint and Sibyl keep things"
CHAIN = "The chain"
KEYS = "Keys"
SUPERVISOR = "The supervisor and its workers"
AGENTS = "Agents: kint-server and the watcher"

SETTINGS: tuple[Setting, ...] = (
    _s("KINT_HOME", "path", "~/.kint", "machine", EVERYONE, PLACES,
       "all of kint's state (mode 0700) and `config.toml`; every process of one machine "
       "must agree on it. An absolute path: a leading `~` is expanded (a harness's MCP "
       "config passes it unexpanded), and a relative one is refused (`KINT_HOME x is a "
       "relative path`), since from each current folder it would name another home",
       in_file=False),
    _s("KINT_TENANT", "text", None, "call", CLIENTS, PLACES,
       "the Sibyl tenant; `--tenant` overrides it for one command",
       "`tenant_id`, then `account_id` in Sibyl's credentials, then Sibyl's default tenant",
       in_file=False),
    _s("KINT_SPACE", "text", None, "call", CLIENTS, PLACES,
       "the space label, to give a store a space of its own", "derived from the store",
       in_file=False),
    _s("SIBYL_MEMORY_DB", "path", "~/.sibyl-memory/memory.db", "call", CLIENTS, PLACES,
       "Sibyl's store (Sibyl's own variable); `--db` overrides it for one command",
       in_file=False),
    _s("SIBYL_CREDENTIALS", "path", "~/.sibyl-memory/credentials.json", "call", CLIENTS, PLACES,
       "Sibyl's credentials file, read for the tenant (Sibyl's own variable)", in_file=False),
    _s("HERMES_HOME", "path", "~/.hermes", "call", CLIENTS, PLACES,
       "Hermes' root (or, inside `hermes -p`, a profile's folder under it): where `kint "
       "supervisor discover` and `kint setup hermes` look for profiles and their stores",
       in_file=False),

    _s("KINT_RPC_URL", "url", BASE_PUBLIC_RPC, "space", CLI_DAEMON, CHAIN,
       "the primary endpoint", "on macOS the Alchemy key in the Keychain item "
       "`dev.api.alchemy` (account `api-key`, read with `security`; not with "
       f"`KINT_NO_KEYCHAIN=1`), else `{BASE_PUBLIC_RPC}`; a devchain running under "
       "`KINT_HOME` is used when nothing sets it", strict=True),
    _s("KINT_RPC_URL_2", "url", None, "space", CLI_DAEMON, CHAIN,
       "the independent second opinion a cold-start pull asks. Unset, it is Base's even "
       "when `KINT_RPC_URL` names another chain: set both to that chain's endpoints (a cold "
       "start that fails says which chain each endpoint answers for)",
       "`https://base-rpc.publicnode.com` when the primary is `mainnet.base.org`, else "
       "`https://mainnet.base.org`", strict=True),
    _s("KINT_CONTRACT", "address", DEFAULT_CONTRACT, "space", CLI_DAEMON, CHAIN,
       "the EpochAnchor address", strict=True),
    # A call setting, as KINT_OFFLINE: v0.3.0 reads it in the process that pulls, so
    # `KINT_ALLOW_SINGLE_RPC=1 kint pull` lets that one cold start go ahead.
    _s("KINT_ALLOW_SINGLE_RPC", "flag", False, "call", DAEMON, CHAIN,
       "`1`: a cold-start pull trusts one endpoint when the second is the same or "
       "unreachable (never over a disagreement)", "unset", space_table=True),
    _s("KINT_RPC_TIMEOUT", "float", 10.0, "call", CLI_DAEMON, CHAIN,
       "seconds for any one try of an RPC call; a read that times out or cannot connect is "
       "tried twice more, a send never. The watcher's pushes take the newest kint-server "
       "session's value (of those that ask for a watcher), as v0.3.0's kint-server pushes "
       "with its own", minimum=0.1),
    _s("KINT_VERIFY_HEAD_SECONDS", "float", 2.0, "call", DAEMON, CHAIN,
       "how long verify's head read may wait", minimum=0.1),
    _s("KINT_OFFLINE", "flag", False, "call", CLI_DAEMON, CHAIN,
       "`1`: verify reads no chain head; `connect`, `rekey` and `recovery-code` read no "
       "header", "unset"),
    _s("KINT_NONCE_RETRY_SECONDS", "float", 15.0, "call", CLI_DAEMON, CHAIN,
       "how long a transaction waits before another space's stuck one is pushed through "
       "(by half its 60 s receipt wait at the latest, whatever the setting); "
       "twice it, how long a previous session key's nonce that waits at another endpoint "
       "of the space is waited for before it is filled (a kint extension); a previous "
       "session key's receipt wait looks for such a nonce by half the wait at the latest, "
       "whatever the setting. The watcher's pushes take the newest kint-server session's "
       "value (of those that ask for a watcher)", minimum=0.5),
    _s("KINT_ANVIL", "path", None, "call", CLI, CHAIN,
       "the anvil binary `kint devchain start` runs",
       "the checkout's pinned npm package, then `anvil` on `PATH`, then "
       "`~/.foundry/bin/anvil`"),

    _s("KINT_SESSION_PASSPHRASE", "text", None, "machine", CLI_DAEMON, KEYS,
       "the local secret that seals `session.key` and the key cache (else the macOS "
       "Keychain item `dev.kint-session-key`, else `KINT_HOME/local.secret`); the commands "
       "and the supervisor must see the same one", "unset", secret=True, in_file=False),
    _s("KINT_NO_KEYCHAIN", "flag", False, "machine", CLI_DAEMON, KEYS,
       "`1`: never use the macOS Keychain. macOS only: elsewhere there is none, and a "
       "command that sets it is told so", "unset", platforms=frozenset({"darwin"}),
       elsewhere="there is no macOS Keychain here; the local secret is "
       "KINT_SESSION_PASSPHRASE, else KINT_HOME/local.secret"),
    _s("KINT_KEY_TTL", "ttl", "24h", "call", DAEMON, KEYS,
       "how long the unwrapped data key stays cached: seconds, or `30d`, `12h`, `15m`; "
       "`session` keeps it in the worker's memory only. Each pull and push renews it; the "
       "watcher's pushes with the newest kint-server session's value (of those that ask "
       "for a watcher), as v0.3.0's kint-server renews with its own. A key held in "
       "memory stays there, and a `kint rekey`'s new key takes its place there, unless "
       "the pull, push or rekey itself sets it (the caller's, or that session's, "
       "environment)"),
    _s("KINT_OWNER_KEY", "text", None, "call", CLI, KEYS,
       "the owner's private key, for `kint authorize direct` and `burn-nonce` only; from "
       "the environment only, never argv; unset it afterwards", "unset", secret=True,
       in_file=False),
    _s("KINT_AUTHORIZE_PAGE_TIMEOUT", "float", 900.0, "call", CLI, KEYS,
       "seconds `kint authorize page`'s server waits for a result", minimum=1.0),
    _s("KINT_AUTHORIZE_POLL_SECONDS", "float", 3.0, "call", CLI, KEYS,
       "seconds between `canWrite` polls after the page", minimum=0.05),
    _s("KINT_AUTHORIZE_POLL_COUNT", "int", 120, "call", CLI, KEYS,
       "how many polls after the page", minimum=1),

    _s("KINT_WORKER_HEARTBEAT_TIMEOUT", "float", 10.0, "machine", DAEMON, SUPERVISOR,
       "seconds without a heartbeat before a worker is hung (declared down: its requests "
       "answered `WORKER_DOWN`; SIGTERM with a SIGCONT, SIGKILL 5 s later if it is still "
       "there, restarted); an idle worker beats every quarter of it (1 to 3 s), and one spawned "
       "before a reload shortened it is given two of its beats", minimum=1.0),
    _s("KINT_WORKER_IDLE_SECONDS", "float", 900.0, "machine", DAEMON, SUPERVISOR,
       "seconds with nothing to do (no request, no answer; counted only while the "
       "supervisor runs) before a worker exits; never while an agent session is attached, "
       "which a beat sent after its last answer, and after it took every request sent to "
       "it, tells",
       minimum=1.0),
    _s("KINT_WORKER_RECYCLE_MIB", "float", 22.0, "machine", DAEMON, SUPERVISOR,
       "a worker holding more than this many MiB of its own (USS: pages no other process "
       "shares) after 5 s with nothing to do is stopped, and the next request starts a "
       "fresh one, or at once one that takes over the agent sessions attached (at most "
       "once in 10 min a space); `0`: never. Linux only", minimum=0.0,
       platforms=frozenset({"linux"}),
       elsewhere="a worker's own memory (USS) is read on Linux only, so no worker is "
       "recycled for it"),
    _s("KINT_QUARANTINE_BACKOFF_SECONDS", "float", 30.0, "machine", DAEMON, SUPERVISOR,
       "the first retry delay of a quarantined space; it doubles to 600", minimum=0.1),
    _s("KINT_LOG_MAX_BYTES", "int", 262144, "machine", DAEMON, SUPERVISOR,
       "the size over which `supervisor.log` and `kint.log` are moved to `<name>.1`",
       "`262144` (256 KiB)", minimum=1024),

    _s("KINT_BOOTSTRAP_SECONDS", "float", 20.0, "call", SERVER, AGENTS,
       "how long kint-server waits for its start-up pull before serving; the pull goes out "
       "whatever the budget (`0` included) and finishes in the worker", minimum=0.0),
    _s("KINT_NO_WATCHER", "flag", False, "call", SERVER, AGENTS,
       "`1`: this session asks for no watcher (the exit push still runs)", "unset"),
    _s("KINT_QUIET_SECONDS", "float", 300.0, "space", DAEMON | SERVER, AGENTS,
       "seconds without a store change before the watcher pushes", minimum=0.0,
       applied_on=frozenset({"attach"})),
    _s("KINT_POLL_SECONDS", "float", 15.0, "space", DAEMON | SERVER, AGENTS,
       "how often the watcher looks at the store", minimum=1.0,
       applied_on=frozenset({"attach"})),
    _s("KINT_SIZE_TRIGGER_BYTES", "float", 32768.0, "space", DAEMON | SERVER, AGENTS,
       "the estimated unanchored size (400 B a row) more than which pushes without waiting "
       "for quiet (82 rows at the default)",
       "`32768`", minimum=0.0, applied_on=frozenset({"attach"})),
    _s("KINT_PUSH_RETRY_SECONDS", "float", 60.0, "space", DAEMON | SERVER, AGENTS,
       "how long the watcher waits before it tries a failed push again (a held one waits "
       "for the next store change instead; one held within 2 s of the store's last write "
       "is tried again once that write is 2 s old, at once past the quiet period or while "
       "the unanchored size is past `KINT_SIZE_TRIGGER_BYTES`, else at the quiet period), at least "
       "`KINT_POLL_SECONDS`; "
       "each further failure doubles the wait, up to 900 (or this, when larger). Any "
       "successful push of the space, or a change of config.toml, ends the wait", minimum=1.0,
       applied_on=frozenset({"attach"})),
)

# How a setting differs from the same variable in kint v0.3.0 (its 10-configuration.md is
# the specification of the settings users meet); a setting not named here behaves as there.
_SPACE_NOT_CALL = (
    "v0.3.0 reads each in every process; here a space's endpoints and contract are the "
    "supervisor's (config.toml, its environment, `connect --rpc-urls`): a command's or "
    "kint-server's different value is reported in one line and not used. A value that does "
    "not parse stops the chain work as in v0.3.0, wherever it is set (the command's "
    "environment too): it never gives way to the default, Base mainnet's EpochAnchor "
    "([Chain settings that do not parse](#chain-settings-that-do-not-parse))")
_NEWEST_SESSION = ("one watcher, in the space's worker, serves every session: the newest "
                   "value of a kint-server session that asks for it applies while it runs")
V030_DEPARTURES: dict[str, str] = {
    "KINT_HOME": "v0.3.0 takes an empty value as a path (the current folder) and a relative "
                 "one as given; here an empty or blank one counts as unset and a relative one "
                 "is refused, since each process, started from its own folder, would find "
                 "another home",
    "KINT_TENANT": "a value of spaces only counts as unset too (v0.3.0 takes it as a tenant)",
    "SIBYL_MEMORY_DB": "v0.3.0 and Sibyl's server take an empty value as a path (the current "
                       "folder); here an empty or blank one counts as unset",
    "KINT_RPC_URL": _SPACE_NOT_CALL,
    "KINT_RPC_URL_2": _SPACE_NOT_CALL,
    "KINT_CONTRACT": _SPACE_NOT_CALL,
    "KINT_RPC_TIMEOUT": "a call that times out or cannot connect is tried twice more, as in "
                        "v0.3.0, after 0.25 s and then 0.5 s (v0.3.0 names no pause), so a "
                        "hung endpoint costs three timeouts; but a transaction's send is "
                        "tried once only (its request may have reached the endpoint, and the "
                        "push's journal decides what becomes of it); an answer (an HTTP "
                        "status such as 429, an error object) is not tried again, except by "
                        "a pull's history walk, which asks a log read the endpoint refused "
                        "so once more after a second; and "
                        "verify's head read, status's session-key facts (its balance and "
                        "authorization) and doctor's calls, each bounded as a whole "
                        "(`KINT_VERIFY_HEAD_SECONDS`, doctor's own bound), are tried once; "
                        "web3's own retries are off; below 0.1 is raised to 0.1",
    "KINT_OFFLINE": "`kint join`, which must read the chain, refuses",
    "KINT_SESSION_PASSPHRASE": "the supervisor's value unseals the keys, so a command whose "
                               "value differs is told so when it asks a space's worker "
                               "(v0.3.0 reads each process's own)",
    "KINT_NO_KEYCHAIN": "the supervisor's value applies to what its workers do; a command's "
                        "is used for what the command does itself and otherwise reported "
                        "(v0.3.0 reads each process's own)",
    "KINT_KEY_TTL": "`session` keeps the key in the space's worker, which the commands and "
                    "kint-server share (v0.3.0 kept it in the one process that connected, so "
                    "a terminal's `session` left nothing for kint-server). One file holds a "
                    "data key on disk even then: while a `kint rekey` is under way, its journal "
                    "`rekey-<space16>.json` (mode 0600) keeps the new key, sealed under the "
                    "local secret, so a worker killed mid-rotation can still finish it, "
                    "with how long the rekey keeps the new key (a worker restarted with a "
                    "`session` key finishes it with the new key in its memory, never on "
                    "disk; `KINT_KEY_TTL=30d kint rekey` caches it for 30 days); the "
                    "journal goes once the rotation settles (completed or abandoned). This "
                    "adds no exposure the rotation does not already make, since every rekey "
                    "writes the new key as the recovery code to `RECOVERY-<space16>.txt` "
                    "(05-keys.md, \"The recovery code\")",
    "KINT_NO_WATCHER": "one watcher serves every session of a space: `1` is this session "
                       "asking for none, and another session's watcher still runs",
    "KINT_QUIET_SECONDS": _NEWEST_SESSION,
    "KINT_POLL_SECONDS": _NEWEST_SESSION,
    "KINT_SIZE_TRIGGER_BYTES": _NEWEST_SESSION,
    "KINT_BOOTSTRAP_SECONDS": "the start-up pull is waited for at least 0.5 s, whatever the "
                              "budget",
}
# kint's own settings: v0.3.0 has none of these.
EXTENSIONS = frozenset({
    "KINT_SPACE", "KINT_VERIFY_HEAD_SECONDS", "KINT_NONCE_RETRY_SECONDS", "KINT_ANVIL",
    "KINT_AUTHORIZE_PAGE_TIMEOUT", "KINT_AUTHORIZE_POLL_SECONDS", "KINT_AUTHORIZE_POLL_COUNT",
    "KINT_WORKER_HEARTBEAT_TIMEOUT", "KINT_WORKER_IDLE_SECONDS", "KINT_WORKER_RECYCLE_MIB",
    "KINT_QUARANTINE_BACKOFF_SECONDS", "KINT_LOG_MAX_BYTES", "KINT_PUSH_RETRY_SECONDS"})

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
# The settings that choose the chain and the contract (`Setting.strict`).
STRICT: tuple[str, ...] = tuple(s.name for s in SETTINGS if s.strict)
BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS if s.in_file}
SENT: frozenset[str] = frozenset(s.name for s in SETTINGS if s.sent)
# Every call-scope setting the supervisor reads (KINT_OFFLINE, KINT_ALLOW_SINGLE_RPC,
# KINT_KEY_TTL, KINT_RPC_TIMEOUT, KINT_VERIFY_HEAD_SECONDS, KINT_NONCE_RETRY_SECONDS): a
# command sends its value with its request, so each is that command's alone, as in v0.3.0,
# where every command reads its own environment. A supervisor a command starts on demand
# does not take them (autostart.spawn_daemon): it would apply them, unsaid, to every later
# call of every space that sets none (a connect "with the chain reachable" after
# `KINT_OFFLINE=1 kint connect` started it read no chain, kept the fresh vault's key and
# wrote its recovery code; one after `KINT_KEY_TTL=session kint connect` cached no key on
# disk; after `KINT_RPC_TIMEOUT=60 kint pull` every later call waited a minute on a hung
# endpoint). The supervisor's own value of each (config.toml, the environment `kint
# supervisor start` or the service gives it) is what a call that sets none gets, and what
# its work outside any call (a transaction's resend) uses; a watcher's push takes a
# kint-server session's values of those a push reads first
# (tenant_worker.space_settings.PUSH_SETTINGS).
CALL_SWITCHES: frozenset[str] = frozenset(s.name for s in SETTINGS
                                          if s.scope == "call" and "daemon" in s.read_by)
# The value a client sends for a secret it has (never the secret itself), before the proof
# that tells the worker whether it is its own (kint.settings.secret_proof).
SECRET_SET = secret_proof.SECRET_SET
GROUPS = (PLACES, CHAIN, KEYS, SUPERVISOR, AGENTS)


def lower_minimum(name: str, minimum: float) -> Setting:
    """Let this process take values of setting `name` down to `minimum`, below the floor
    the table gives it, and return the setting as it now is. For a test harness whose
    store watcher must tick in a fraction of a second (KINT_POLL_SECONDS' floor of 1 s
    keeps a user's watcher from reading the store ten times a second); kint itself never
    calls it. Call it before any value is read: a value already resolved keeps the floor it
    was resolved with.

    A `Setting` is frozen, so that no caller changes a rule by accident: this replaces it
    with a copy in the tables the checks read it from, in place, so that the modules that
    imported them see the copy too: BY_NAME (the loader, the wire, the harnesses' `--env`)
    and BY_KEY (the config file). SETTINGS, a tuple, is made anew here; a module that took
    the old tuple at its import (the docs, `kint config`'s listing) prints the table's floor.
    Only a lower floor is taken: a higher one would refuse values the docs promise."""
    old = BY_NAME[name]
    if old.minimum is None or not minimum < old.minimum:
        raise ValueError(f"{name}: {minimum} is not below its minimum {old.minimum}")
    global SETTINGS
    new = replace(old, minimum=minimum)
    BY_NAME[name] = new
    if old.key in BY_KEY:
        BY_KEY[old.key] = new
    SETTINGS = tuple(new if s is old else s for s in SETTINGS)
    return new


def environment_for(reader: str | None, environ: Mapping[str, str], *,
                    call_switches: bool = True) -> dict[str, str]:
    """`environ` for a process kint starts, less every secret setting `reader` (`daemon`)
    does not read; None, a program of another's (the devchain's anvil): less every one.
    A process started by a command lives on after it, with the environment it was given
    (/proc/<pid>/environ, a core dump): the owner's private key exported in the shell for
    `kint authorize direct` must not live on in a supervisor, its workers or an anvil.
    `call_switches` False: less the one-off switches of a call too (CALL_SWITCHES)."""
    return {name: value for name, value in environ.items()
            if not ((setting := BY_NAME.get(name)) is not None and
                    ((setting.secret and (reader is None or reader not in setting.read_by))
                     or (not call_switches and name in CALL_SWITCHES)))}
