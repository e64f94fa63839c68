"""The worker's ops: one function per op name, each taking the space's context and the
request's validated arguments and returning the reply's result.

A handler raises `ProtocolError` to refuse with a code; anything else it raises is a bug
and becomes INTERNAL (logged with its traceback, never sent to the client).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable

from sibyl_memory_client.exceptions import SibylMemoryError

from kint import settings
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.errors import hint_with_notices
from kint.protocol.hints import STORE_LOCKED_HINT
from kint.rows.canon import VERSIONED_TIERS
from kint.settings.wire import apply as apply_settings, refusal_notices
from kint.sibyl_client import store_file_id
from kint.tenant_worker import history as history_mod
from kint.tenant_worker.chain_head import HeadReading, read_head
from kint.tenant_worker.disk_space import full_disks
from kint.tenant_worker.enrolment import Enrolment
from kint.tenant_worker.push_settings import differing, kept_value, watcher_value
from kint.tenant_worker.rpc_hint import name_the_endpoint, timeout_named
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.state_health import guarded
from kint.tenant_worker.statefiles import CorruptStateFile
from kint.tenant_worker.store_errors import StoreDenied, StoreLocked, StoreUnreadable
from kint.tenant_worker.store_sharers import still_sharing
from kint.tenant_worker.verify import store_absent, verify as run_verify

log = logging.getLogger("kint.worker")


Handler = Callable[[SpaceContext, dict[str, Any]], dict[str, Any]]


def status(ctx: SpaceContext, args: dict[str, Any], read: bool = True) -> dict[str, Any]:
    """The space's tenant, label, id, store, row counts per tier, its KINT_HOME files, the
    store watcher's last failed push while it waits to try again and the push settings it
    takes from a kint-server session, and another KINT_HOME's workers on the store as this
    worker last looked (at its start, or doctor's).
    `read=False` (`status_if_counted`) raises StoreNotCounted rather than read the store."""
    cfg = ctx.config
    try:
        facts = ctx.store.facts(read)
    except StoreLocked as err:  # the store is fine, only taken: not a file to check
        raise ProtocolError(ErrorCode.BUSY, str(err), STORE_LOCKED_HINT) from None
    except StoreDenied as err:  # fine as far as anyone knows, only closed to this user
        raise ProtocolError(ErrorCode.SIBYL_ERROR, str(err), err.hint) from None
    except StoreUnreadable as err:
        raise ProtocolError(ErrorCode.INTERNAL, str(err),
                            "check the store file; kint only reads it") from None
    presence = ctx.state.presence
    files, home_device = presence.reading()  # as they are now (file_presence.py)
    same_disk = facts.device is not None and facts.device == home_device
    extra = {**_chain_status(ctx), "cap": _cap(ctx)} if args.get("chain") else {}
    if args.get("chain") or args.get("keys"):
        extra.update(_key_status(ctx))
    return {
        **extra,
        "disk_problems": full_disks(cfg.db, cfg.kint_home, same_disk=same_disk),
        "tenant": cfg.tenant,
        "space": cfg.space16,
        "space_id": cfg.space_id,
        "label": cfg.label,
        "store": {"path": cfg.db, "exists": facts.exists, "size_bytes": facts.size_bytes},
        "rows": facts.rows,
        "kint_home": cfg.kint_home,
        "files": files,
        "worker": {"pid": ctx.pid,
                   "uptime_s": round(time.monotonic() - ctx.started_monotonic, 3)},
        "watcher_failure": (ctx.watcher.backoff.report(time.monotonic())
                            if ctx.watcher is not None else None),
        # What the watcher's pushes take from a kint-server session, where it is not the
        # worker's own: what `kint supervisor status` shows from the beat.
        "watcher_settings": differing(ctx) or None,
        "watcher_uncounted": (ctx.watcher.counting.for_beat(time.monotonic())
                              if ctx.watcher is not None else None),
        "store_shared": still_sharing(cfg.db, cfg.kint_home),
    }


def status_if_counted(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    """The plain status as the worker's main thread answers it, from the row counts as
    cached: StoreNotCounted when the store changed since, and the status goes to the
    worker's count thread.
    A count may wait seconds on another process's lock of the store, and the main thread
    makes the beats: held that long, they stopped, and the supervisor could take the
    worker for hung."""
    return status(ctx, args, read=False)


def _chain_status(ctx: SpaceContext) -> dict[str, Any]:
    """The mirror's head, the chain's (read within verify's head budget), and whether they
    are the same (`in_step`)."""
    try:
        enrolment = ctx.enrolment()
        mirror = ctx.state.mirror()
    except CorruptStateFile as err:
        return {"connected": None, "owner": None, "head": None, "chain_head": None,
                "in_step": False, "unanchored": None, "state_error": str(err),
                "state_problems": [f"{err.path} {err.why}"]}
    head = mirror.head.to_json() if mirror is not None else None
    try:
        # Read whatever KINT_OFFLINE says: v0.3.0's switch keeps only verify's head read and
        # the header reads of connect, rekey and recovery-code off the chain
        # (10-configuration.md), and its status reads the head whenever it is connected.
        reading = ctx.head_source().read(ctx.verify_head_seconds)
    except ProtocolError as err:  # a chain setting refused: status still answers
        reading = HeadReading(None, err.message)
    chain_head = reading.head.to_json() if reading.head is not None else None
    in_step = (chain_head is not None and head is not None
               and (chain_head["seq"], chain_head["digest"]) == (head["seq"], head["digest"]))
    unanchored = half = split = None
    if mirror is not None and os.path.exists(ctx.config.db):
        from kint.tenant_worker.unanchored import count_unanchored

        counted = count_unanchored(ctx, mirror)  # now, and the heartbeat's figure
        half, local = counted.half_done, counted.unanchored
        unanchored = len(local)
        split = {"changed": len(local.rows), "deleted": len(local.deleted)}
    held = None
    if enrolment is not None and mirror is not None and os.path.exists(ctx.config.db):
        with ctx.reading() as conn:
            hold = ctx.drift.evaluate(conn, ctx.config.tenant, mirror, "status")
        held = hold.to_json() if hold is not None else None
    from kint.tenant_worker import settled_notice
    from kint.tenant_worker.lost_restore import in_progress
    from kint.tenant_worker.state_health import problems

    restoring = in_progress(ctx.state)
    broken = problems(ctx)
    if broken:
        in_step = False
    out = {"connected": enrolment is not None, "held": held, "state_problems": broken,
           "owner": enrolment.owner if enrolment else None,
           "session": _session_now(ctx, enrolment),
           "contract": enrolment.contract if enrolment else None,
           "head": head, "mirror_rows": len(mirror.rows) if mirror is not None else None,
           "chain_head": chain_head, "chain_head_unavailable": reading.unavailable,
           "in_step": in_step, "unanchored": unanchored, "unanchored_changes": split,
           "interrupted_pull": half.message if half is not None else None,
           "restore_in_progress": restoring.message if restoring is not None else None,
           "settled_notice": settled_notice.waiting(ctx)}
    if enrolment is not None and chain_head is not None:
        from kint.tenant_worker.session_facts import session_key_facts

        out["session_key"] = session_key_facts(ctx, enrolment.owner)
    return out


def _session_now(ctx: SpaceContext, enrolment: Enrolment | None) -> str | None:
    """This machine's session key as `status` names it: the keystore's address now, read
    without unlocking (a `kint session-key rotate` since the connect made another key, and
    the balance and authorization status prints are that key's), else the one the connect
    recorded (no keystore, or one that does not read: status says so beside it)."""
    from kint.custody.errors import CustodyError
    from kint.custody.session_key import session_address

    if enrolment is None:
        return None
    try:
        return session_address(ctx.config.home)
    except CustodyError:
        return enrolment.session_address


def _key_status(ctx: SpaceContext) -> dict[str, Any]:
    """The owner this space is enrolled under and whether its data key is cached."""
    from kint.custody.errors import CustodyError
    from kint.custody.vault_cache import CachedKey, read_cached_key

    try:
        enrolment = ctx.enrolment()
    except CorruptStateFile as err:
        return {"owner": None, "data_key_cached": False, "key_error": str(err)}
    try:
        cached = isinstance(read_cached_key(ctx.config.home, ctx.config.space_id), CachedKey)
    except CustodyError as err:
        return {"owner": enrolment.owner if enrolment else None, "data_key_cached": False,
                "key_error": str(err)}
    return {"owner": enrolment.owner if enrolment else None, "data_key_cached": cached}


def _cap(ctx: SpaceContext) -> dict[str, Any]:
    """Sibyl's own measurement, kint's footprint, and their sum against the cap (the cap
    gate enforces the sum)."""
    from sibyl_memory_client import FREE_TIER_CAP_BYTES

    from kint.sibyl_client import cap_sizes

    sibyl, kint = cap_sizes(ctx.config.db, ctx.config.home)
    return {"sibyl_bytes": sibyl, "kint_bytes": kint, "volunteered_total": sibyl + kint,
            "cap_bytes": FREE_TIER_CAP_BYTES, "db_path": ctx.config.db}


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
            return run_verify(client=ctx.client(store), conn=conn, tenant=ctx.config.tenant,
                              state=ctx.state, query=args["query"],
                              limit=args.get("limit") or 5, head=head,
                              write_refusal=args.get("write", True) is not False)


def _store_absent(ctx: SpaceContext, query: str) -> dict[str, Any] | None:
    """Verify's answer when the store does not exist (yet, or any more), else None."""
    if os.path.exists(ctx.config.db):
        return None
    mirror = ctx.state.mirror()
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
