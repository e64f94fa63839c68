"""The `status` op: what `kint status` and `kint supervisor status` show of one space, as its
worker sees it now: the store and its row counts, the space's KINT_HOME files, the store
watcher's failed push and the push settings it took from a session, and, asked for, the
chain's head beside the mirror's, the session key, the unanchored rows and the cap.

A module of its own because it gathers every part of the space, and alone has a form the
worker's main thread answers from the row counts as cached (`status_if_counted`: the
beats must not wait on a count); the other ops are in kint.tenant_worker.handlers, which
routes `status` here.
"""

from __future__ import annotations

import os
import time
from typing import Any

from kint.protocol import ProtocolError
from kint.tenant_worker.chain_head import HeadReading
from kint.tenant_worker.disk_space import full_disks
from kint.tenant_worker.enrolment import Enrolment
from kint.tenant_worker.push_settings import differing
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.state_health import store_refusal
from kint.tenant_worker.statefiles import CorruptStateFile
from kint.tenant_worker.store_errors import StoreUnreadable
from kint.tenant_worker.store_sharers import still_sharing


def status(ctx: SpaceContext, args: dict[str, Any], read: bool = True) -> dict[str, Any]:
    """The space's tenant, label, id, store, row counts per tier, its KINT_HOME files, the
    store watcher's last failed push while it waits to try again and the push settings it
    takes from a kint-server session, and another KINT_HOME's workers on the store as this
    worker last looked (at its start, or doctor's).
    `read=False` (`status_if_counted`) raises StoreNotCounted rather than read the store."""
    cfg = ctx.config
    try:
        facts = ctx.store.facts(read)
    except StoreUnreadable as err:  # a lock BUSY, a closed store SIBYL_ERROR, else INTERNAL
        raise store_refusal(err, "status") from None
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
        try:
            with ctx.reading() as conn:
                hold = ctx.drift.evaluate(conn, ctx.config.tenant, mirror, "status",
                                          db=ctx.config.db)
        except StoreUnreadable as err:  # the archive's read: a damaged one is the push's hold
            hold = ctx.drift.damaged_archive(err, ctx.config.db, "status")
            if hold is None:
                raise  # a lock BUSY, a closed store SIBYL_ERROR (state_health.guarded)
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
