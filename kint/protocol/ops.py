"""Every operation a client may ask for: who serves it, what arguments it takes, and the
longest deadline it may carry.

An op not in `OPS` is answered with UNKNOWN_OP. Arguments are checked here, before any
handler runs, so a handler only ever sees arguments of the declared types and bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from kint.protocol.errors import ErrorCode, ProtocolError
from kint.protocol.limits import MAX_ARG_STRING_CHARS

Target = Literal["supervisor", "worker"]


@dataclass(frozen=True)
class ArgSpec:
    kind: Literal["str", "int", "float", "bool", "settings"]
    required: bool = False
    max_chars: int = MAX_ARG_STRING_CHARS
    # A string that must say something: verify's query ("" searched for nothing and came
    # back a REFUSE, exit 1, rather than the bad input it is).
    non_empty: bool = False
    min_value: int | None = None
    max_value: int | None = None


@dataclass(frozen=True)
class OpSpec:
    name: str
    target: Target
    summary: str
    max_timeout_ms: int = 60_000
    args: dict[str, ArgSpec] = field(default_factory=dict)
    # Ops that need a space (tenant, store) to route to.
    needs_space: bool = False
    # The names of the required arguments (from `args`): a request with no arguments
    # needs checking only when there are some.
    required: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "required",
                           frozenset(n for n, a in self.args.items() if a.required))

    def validate_args(self, args: dict[str, Any], request_id: str | None) -> None:
        for name in args:
            if name not in self.args:
                raise ProtocolError(
                    ErrorCode.BAD_REQUEST,
                    f"{self.name}: unknown argument {name!r}",
                    request_id=request_id,
                )
        for name, spec in self.args.items():
            if name not in args or args[name] is None:
                if spec.required:
                    raise ProtocolError(
                        ErrorCode.BAD_REQUEST,
                        f"{self.name}: argument {name!r} is required",
                        request_id=request_id,
                    )
                continue
            _check_arg(self.name, name, spec, args[name], request_id)


def _check_arg(op: str, name: str, spec: ArgSpec, value: Any, request_id: str | None) -> None:
    def bad(why: str, hint: str | None = None) -> ProtocolError:
        return ProtocolError(ErrorCode.BAD_REQUEST, f"{op}: argument {name!r} {why}", hint,
                             request_id=request_id)

    if spec.kind == "str":
        if not isinstance(value, str):
            raise bad("must be a string")
        if len(value) > spec.max_chars:
            raise bad(f"is longer than {spec.max_chars} characters")
        if spec.non_empty and not value.strip():
            raise bad("is empty")
        if "\x00" in value:
            raise bad("contains a NUL character")
    elif spec.kind == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            raise bad("must be an integer")
        if spec.min_value is not None and value < spec.min_value:
            raise bad(f"must be at least {spec.min_value}")
        if spec.max_value is not None and value > spec.max_value:
            raise bad(f"must be at most {spec.max_value}")
    elif spec.kind == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise bad("must be a number")
    elif spec.kind == "bool":
        if not isinstance(value, bool):
            raise bad("must be true or false")
    elif spec.kind == "settings":
        from kint.settings.wire import check_sent

        refused = check_sent(value)
        if refused is not None:
            raise bad(*refused)


# Every op a worker serves may carry the caller's settings (kint.settings.wire): the
# names of settings the daemon reads, each with the caller's value (a secret: `set`, or
# its proof: kint.settings.secret_proof).
SETTINGS_ARG = "settings"


def _ops(*specs: OpSpec) -> dict[str, OpSpec]:
    out: dict[str, OpSpec] = {}
    for spec in specs:
        if spec.target == "worker":
            spec = OpSpec(spec.name, spec.target, spec.summary, spec.max_timeout_ms,
                          {**spec.args, SETTINGS_ARG: ArgSpec("settings")}, spec.needs_space)
        out[spec.name] = spec
    return out


OPS: dict[str, OpSpec] = _ops(
    # Served by the supervisor itself.
    OpSpec("sup.ping", "supervisor", "answer if the supervisor is up", 10_000,
           # `kint supervisor start`'s settings, to be told which differ from its own.
           args={SETTINGS_ARG: ArgSpec("settings")}),
    OpSpec("sup.status", "supervisor", "one row per space: worker state, op, restarts", 10_000,
           # The caller's proof of its KINT_SESSION_PASSPHRASE (kint.settings.secret_proof).
           args={"passphrase": ArgSpec("str", max_chars=128)}),
    OpSpec("sup.spaces", "supervisor", "the spaces the supervisor knows, with their stores",
           10_000),
    OpSpec("sup.stop", "supervisor", "stop every worker, then the supervisor", 60_000,
           # The supervisor the stop is meant for, by its pid and when it took its home
           # (its ping's `started` and `started_boot`): another refuses it, one with the
           # same pid too (kint/supervisor/commands.py, `stop`). Left out, whichever
           # serves stops.
           args={"pid": ArgSpec("int", min_value=1), "started": ArgSpec("float"),
                 "started_boot": ArgSpec("float")}),
    OpSpec("sup.reload", "supervisor", "read $KINT_HOME/config.toml again now (the workers "
           "read it on their next request)", 10_000),
    OpSpec("sup.restart", "supervisor", "restart the workers of a space id, label or tenant "
           "(a quarantine released)", 60_000,
           args={"target": ArgSpec("str", required=True, max_chars=512)}),
    # Served by the space's worker.
    OpSpec("status", "worker", "the space's tenant, store, row counts and kint files; with "
           "`chain`, the heads, in_step, unanchored changes, a half-done pull, the hold and the "
           "cap too",
           30_000, needs_space=True, args={"chain": ArgSpec("bool"), "keys": ArgSpec("bool")}),
    OpSpec("verify", "worker", "check recalled rows against what was anchored: proceed or "
           "refuse", 120_000, needs_space=True, args={
               "query": ArgSpec("str", required=True, max_chars=4096, non_empty=True),
               "limit": ArgSpec("int", min_value=1, max_value=100),
               "write": ArgSpec("bool"),
           }),
    # Secrets (signature, passphrases, recovery code) travel only over the 0700 ipc socket
    # to the space's worker, which needs them to derive the key; no log line names them.
    OpSpec("connect", "worker", "connect this machine to the owner's vault: local wraps, the "
           "head epoch's header, or a fresh vault", 300_000, needs_space=True, args={
               "owner": ArgSpec("str", max_chars=64),
               "signature": ArgSpec("str", max_chars=200),
               "salt_passphrase": ArgSpec("str", max_chars=4096),
               "passphrase": ArgSpec("str", max_chars=4096),
               "extra_passphrase": ArgSpec("str", max_chars=4096),
               "recovery_code": ArgSpec("str", max_chars=200),
               "dev": ArgSpec("bool"),
               "rpc_urls": ArgSpec("str", max_chars=4096),
           }),
    OpSpec("join_chain", "worker", "what `kint join` reads of the chain, through the "
           "space's endpoints and contract: the contract; with `head`, the vault's head for "
           "`owner`; with `key`, that session key's balance and authorization", 60_000,
           needs_space=True, args={"owner": ArgSpec("str", max_chars=64),
                                   "head": ArgSpec("bool"),
                                   "key": ArgSpec("str", max_chars=64)}),
    OpSpec("space_chain", "worker", "the chain settings the space's worker runs with (its "
           "endpoints, chain id and contract), for the command line's own exchanges with the "
           "chain (session-key show, authorize)", 30_000, needs_space=True, args={}),
    OpSpec("push", "worker", "anchor the store's changes on chain", 900_000, needs_space=True,
           args={"snapshot": ArgSpec("bool"), "hold_reason": ArgSpec("str", max_chars=16),
                 "over_skipped": ArgSpec("bool"), "dry_run": ArgSpec("bool"),
                 "confirmations": ArgSpec("int", min_value=1, max_value=64),
                 "reanchor": ArgSpec("bool")}),
    OpSpec("attach", "worker", "a kint-server session over this store (keepalive too)",
           30_000, needs_space=True, args={"session": ArgSpec("str", required=True,
                                                              max_chars=64),
                                           "watcher": ArgSpec("bool")}),
    OpSpec("detach", "worker", "a kint-server session closing", 30_000, needs_space=True,
           args={"session": ArgSpec("str", required=True, max_chars=64)}),
    OpSpec("note_write", "worker", "a write a session's tool path made (its row's leaf)",
           30_000, needs_space=True, args={
               "tier": ArgSpec("str", required=True, max_chars=16),
               "category": ArgSpec("str", max_chars=1024),
               "key": ArgSpec("str", required=True, max_chars=1024),
               "leaf": ArgSpec("str", max_chars=64)}),
    OpSpec("exit_push", "worker", "one push, under the hold, for a closing kint-server",
           900_000, needs_space=True, args={"session": ArgSpec("str", max_chars=64)}),
    OpSpec("pull", "worker", "restore the chain's epochs into the store", 1_800_000,
           needs_space=True, args={"full": ArgSpec("bool"), "discard_local": ArgSpec("bool"),
                                   "unread": ArgSpec("bool")}),
    OpSpec("rekey", "worker", "a new data key wrapped under the keys supplied, anchored in a "
           "snapshot, then a new recovery code", 900_000, needs_space=True, args={
               "signature": ArgSpec("str", max_chars=200),
               "salt_passphrase": ArgSpec("str", max_chars=4096),
               "passphrase": ArgSpec("str", max_chars=4096),
               "extra_passphrase": ArgSpec("str", max_chars=4096),
               "drop_missing": ArgSpec("bool"),
               "confirmations": ArgSpec("int", min_value=1, max_value=64),
               "over_skipped": ArgSpec("bool"),
           }),
    OpSpec("recovery_code", "worker", "write RECOVERY-<space16>.txt again from the cached "
           "data key", 300_000, needs_space=True),
    OpSpec("doctor", "worker", "the space's checks: store, chain, keys", 60_000,
           needs_space=True),
    OpSpec("config", "worker", "every setting this space and this call run with, and where "
           "each value comes from", 30_000, needs_space=True),
    OpSpec("history", "worker", "every anchored version of one row, from the epoch cache",
           60_000, needs_space=True, args={
               "tier": ArgSpec("str", required=True, max_chars=16),
               "key": ArgSpec("str", required=True, max_chars=1024),
               "category": ArgSpec("str", max_chars=1024),
               "block": ArgSpec("int", min_value=0, max_value=2**63 - 1),
           }),
)

# Ops the supervisor sends to a worker on the back socket; never accepted from a client.
WORKER_CONTROL_OPS = frozenset({"worker.stop"})
