"""The worker's ops: one function per op name, each taking the space's context and the
request's validated arguments and returning the reply's result (the `status` op, which
gathers every part of the space, in kint.tenant_worker.status).

A handler raises `ProtocolError` to refuse with a code; anything else it raises is a bug
and becomes INTERNAL (logged with its traceback, never sent to the client).
"""

from __future__ import annotations

import logging
import os
import sqlite3
from typing import Any, Callable

from sibyl_memory_client.exceptions import SibylMemoryError

from kint import settings
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.errors import hint_with_notices
from kint.rows.canon import VERSIONED_TIERS
from kint.settings.wire import apply as apply_settings, refusal_notices
from kint.sibyl_client import store_file_id
from kint.tenant_worker import history as history_mod
from kint.tenant_worker.chain_head import read_head
from kint.tenant_worker.push_settings import kept_value, watcher_value
from kint.tenant_worker.rpc_hint import name_the_endpoint, timeout_named
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.state_health import guarded
from kint.tenant_worker.statefiles import CorruptStateFile, Mirror
from kint.tenant_worker.status import status, status_if_counted
from kint.tenant_worker.verify import store_absent, verify as run_verify
from kint.tenant_worker.verify_empty import no_rows_why

log = logging.getLogger("kint.worker")


Handler = Callable[[SpaceContext, dict[str, Any]], dict[str, Any]]


def verify(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    """Verify (docs/how-it-works.md): proceed, or refuse with the evidence."""
    absent = _store_absent(ctx, args["query"])
    if absent is not None:
        return absent
    head = read_head(ctx.head_source(), ctx.verify_head_seconds)
    if head.unavailable and head.unavailable != ctx.last_head_unavailable:
        # Once per change of reason: the log lives under KINT_HOME and counts against the cap.
        log.info("verify: chain head unavailable (%s); verifying against the local mirror only",
                 head.unavailable)
    ctx.last_head_unavailable = head.unavailable
    # The client held from here to the answer: a discard waits for it, and one under way
    # is waited for, after which the store may be gone (shared_client.py).
    with ctx.using_client():
        absent = _store_absent(ctx, args["query"])
        if absent is not None:
            return absent
        # The store file as it is after the head's read (which may wait on the RPC) and
        # any discard, looked at once for both: the client and the connection are each
        # checked against it.
        store = store_file_id(ctx.config.db)
        with ctx.reading(store) as conn:
            answer = run_verify(client=ctx.client(store), conn=conn, tenant=ctx.config.tenant,
                                state=ctx.state, query=args["query"],
                                limit=args.get("limit") or 5, head=head,
                                write_refusal=args.get("write", True) is not False)
            # Counted under the same hold, through the same connection: a discard cannot
            # move the store between Sibyl's search and the count, so both read the one
            # file. A pull's restore (its replay holds the client per block too) has either
            # written this tenant's rows by then, and nothing is added, or not, and "`kint
            # pull` restores them" is what it is doing.
            return _empty_for_tenant(ctx, conn, answer)


def _empty_for_tenant(ctx: SpaceContext, conn: sqlite3.Connection,
                      answer: dict[str, Any]) -> dict[str, Any]:
    """`answer`, its `empty_store` reason followed by why when the store exists but holds
    none of this tenant's rows (verify_empty.py): a mistyped tenant read as an empty store."""
    if answer["verdict"].get("code") != "empty_store" or answer["hits"]:
        return answer
    why = no_rows_why(conn, ctx.config.db, ctx.config.tenant, lambda: _readable_mirror(ctx))
    if why is not None:
        answer["reason"] = f"{answer['reason']}: {why}"
    return answer


def _readable_mirror(ctx: SpaceContext) -> Mirror | None:
    """The rows this machine saw anchored for the space, None when its mirror is garbled:
    the why's tail is dropped then, and the refusal stays a refusal (decide() answers a
    garbled mirror with one; raising here would turn it into CORRUPT_STATE, exit 2, where
    `--json` and memory_verify promise a `decision`). The mirror is named by the next op
    that relies on it (push, pull, status)."""
    try:
        return ctx.state.mirror()
    except CorruptStateFile:
        return None


def _store_absent(ctx: SpaceContext, query: str) -> dict[str, Any] | None:
    """Verify's answer when the store does not exist (yet, or any more), else None."""
    if os.path.exists(ctx.config.db):
        return None
    try:
        mirror = ctx.state.mirror()
    except CorruptStateFile as err:  # a refusal all the same, as _readable_mirror says why
        answer = store_absent(query, (
            f"the store {ctx.config.db} does not exist (check --db or SIBYL_MEMORY_DB); "
            f"kint's state file {err.path} {err.why}, so whether rows anchored from the "
            f"store are on chain is not known here"))
        answer["corrupt_file"] = str(err.path)  # named as decide() names it (README)
        return answer
    if mirror is not None and mirror.rows:
        return store_absent(query, (
            f"the store {ctx.config.db} does not exist, and {len(mirror.rows)} row(s) "
            f"anchored from it are on chain (check --db or SIBYL_MEMORY_DB; `kint pull` "
            f"restores the anchored rows into a new store)"))
    return store_absent(query, (
        f"the store {ctx.config.db} does not exist yet (Sibyl creates it on the first "
        f"write, the agent's memory_remember through kint-server; if it should exist, "
        f"check --db or SIBYL_MEMORY_DB)"))


def _cache_reader(ctx: SpaceContext) -> Any:
    """The epoch cache, each epoch checked against what was anchored before it is shown;
    the data key opens it again when it is cached (history works without it too)."""
    from kint.tenant_worker.cache_check import checked_reader
    from kint.tenant_worker.data_key import held_keys

    enrolment = ctx.enrolment()
    try:
        keys = held_keys(ctx) if enrolment is not None else {}
    except ProtocolError:
        keys = {}
    return checked_reader(ctx.state, enrolment.owner if enrolment else None, keys)


def history(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    """Every anchored version of one row, or the one live at `block`."""
    tier = args["tier"]
    if tier not in VERSIONED_TIERS:
        raise ProtocolError(ErrorCode.BAD_REQUEST,
                            f"tier must be one of {', '.join(VERSIONED_TIERS)}, not {tier!r}")
    try:
        entries = history_mod.versions(ctx.state, tier, args["key"], args.get("category"),
                                       _cache_reader(ctx))
    except CorruptStateFile as err:
        raise ProtocolError(ErrorCode.CORRUPT_STATE,
                            f"kint's state file {err.path} {err.why}; nothing was shown",
                            "move the file aside and run `kint pull --full` to fetch the epoch "
                            "again") from None
    if args.get("block") is not None:
        return {"at_block": args["block"], "version": history_mod.at_block(entries, args["block"])}
    return {"versions": entries, "count": len(entries)}


def connect(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    from kint.tenant_worker.connect import connect as run

    return run(ctx, args)


def push(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    from kint.tenant_worker.push import push as run

    return run(ctx, args)


def pull(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    from kint.tenant_worker.pull import pull as run

    return run(ctx, args)


def join_chain(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    from kint.tenant_worker.join_chain import join_chain as run

    return run(ctx, args)


def space_chain(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    from kint.tenant_worker.space_chain import space_chain as run

    return run(ctx, args)


def rekey(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    from kint.tenant_worker.rekey import rekey as run

    return run(ctx, args)


def recovery_code(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    from kint.tenant_worker.rekey import recovery_code as run

    return run(ctx, args)


def _session_op(name: str) -> Handler:
    def run(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
        from kint.tenant_worker import sessions

        return getattr(sessions, name)(ctx, args)

    run.__name__ = name
    return run


def doctor(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    from kint.tenant_worker.doctor import doctor as run

    return run(ctx, args)


def config(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    """Every setting the daemon reads, as this space and this call run with it (the
    chain's endpoints and contract as the chain config resolves them, the watcher's timings
    as it runs, the space's own while none runs), and the config file in force. A push
    setting's row also carries the value the watcher's pushes take from a kint-server
    session, where it is not the row's; a watcher timing's or push setting's, with no
    watcher running, the value a KINT_NO_WATCHER=1 session gave, which no watcher takes
    (`kept_for_watcher`)."""
    from kint.settings import report
    from kint.settings.schema import SETTINGS

    cfg, error = settings.config()
    entries = []
    for s in (s for s in SETTINGS if s.sent):
        row = ctx.effective_setting(s.name, settings.lookup(s.name))
        entries.append({**report.entry(row), "watcher": watcher_value(ctx, row),
                        "kept_for_watcher": kept_value(ctx, row)})
    return {"config_file": str(cfg.path), "config_exists": cfg.exists,
            "config_error": str(error) if error else None, "settings": entries,
            "space": ctx.config.space16, "label": ctx.config.label}


def sibyl_refusal(op: str, err: SibylMemoryError) -> ProtocolError:
    """Sibyl's refusal of what `op` asked of it (its account gate, its cap, a store it
    cannot read), in its words and with its own next step as the hint."""
    lines = str(err).strip().splitlines() or [type(err).__name__]
    hint = getattr(err, "recovery", None) or getattr(err, "next", None)
    return ProtocolError(ErrorCode.SIBYL_ERROR, f"Sibyl refused {op}: {lines[0]}",
                         hint if isinstance(hint, str) and hint else None)


def with_settings(op: str, handler: Handler) -> Handler:
    """`handler` under this request's settings: the caller's call-scope values applied
    for it, and a line in `notices` for each value it sent that is not used (and for a
    config file that was refused). A refusal carries those lines in its hint, Sibyl's own
    (SIBYL_ERROR) as well as kint's; one of the chain names the endpoint in force and,
    timed out, the KINT_RPC_TIMEOUT it waited and whose it was (rpc_hint)."""

    def run(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
        sent = args.pop("settings", None) or {}
        values, notices = apply_settings(op, sent, label=ctx.config.label,
                                         effective=ctx.compared_setting)
        try:
            try:
                with settings.overlay(values):
                    try:
                        result = handler(ctx, args)
                    except ProtocolError as err:
                        name_the_endpoint(ctx, err)
                        timeout_named(err)
                        raise
            except SibylMemoryError as err:
                raise sibyl_refusal(op, err) from err
        except ProtocolError as err:
            err.hint = hint_with_notices(err.hint,
                                         refusal_notices(notices, sent, values, err.message))
            raise
        notices += result.pop("notices", None) or []
        return {**result, "notices": notices} if notices else result

    run.__name__ = getattr(handler, "__name__", op)
    run.__doc__ = handler.__doc__
    return run


HANDLERS: dict[str, Handler] = {name: with_settings(name, guarded(name, fn)) for name, fn in {
    "doctor": doctor,
    "config": config,
    "attach": _session_op("attach"),
    "detach": _session_op("detach"),
    "note_write": _session_op("note_write"),
    "exit_push": _session_op("exit_push"),
    "rekey": rekey,
    "recovery_code": recovery_code,
    "status": status,
    "verify": verify,
    "history": history,
    "connect": connect,
    "join_chain": join_chain,
    "space_chain": space_chain,
    "push": push,
    "pull": pull,
}.items()}

# The ops the worker's main thread runs itself (op_replies.runs_inline), the plain status
# from the counts as cached only.
INLINE_HANDLERS: dict[str, Handler] = {
    "status": with_settings("status", guarded("status", status_if_counted)),
    "note_write": HANDLERS["note_write"],
}
