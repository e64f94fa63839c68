"""The rows of `kint supervisor status`: one per space, with what its worker is doing.

Built from what the supervisor already holds (the last heartbeat of each worker), so a
status call never waits on a worker, hung or not.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kint.supervisor.workers import WorkerHandle

if TYPE_CHECKING:
    from kint.supervisor.daemon import Supervisor

STATUS_SCHEMA_VERSION = 1
# A space in one of these states makes `kint supervisor status` exit 1.
DEGRADED_STATES = frozenset({"hung", "restarting", "quarantined"})


def space_row(handle: WorkerHandle, now: float) -> dict[str, Any]:
    beat = handle.beat
    op = None
    if beat.get("op"):
        age = float(beat.get("op_age_s") or 0.0)
        if handle.last_beat_at is not None:
            age += now - handle.last_beat_at
        op = {"name": beat["op"], "age_s": round(age, 3)}
    retry_in = None
    if handle.state == "quarantined" and handle.quarantined_until is not None:
        retry_in = round(max(0.0, handle.quarantined_until - now), 3)
    return {
        "space": handle.space16,
        "space_id": handle.space_id,
        "label": handle.label,
        "tenant": handle.tenant,
        "store": handle.db,
        "pid": handle.pid,
        "state": handle.state,
        "op": op,
        "rpc": beat.get("rpc"),
        "head": beat.get("head"),
        "unanchored": beat.get("unanchored"),
        "held": beat.get("held"),
        "progress": beat.get("progress"),
        "memory_mib": beat.get("own_mib") if handle.alive else None,
        "restarts": handle.restarts,
        "last_exit": handle.last_exit,
        "last_beat_age_s": (round(now - handle.last_beat_at, 3)
                            if handle.last_beat_at is not None and handle.alive else None),
        # When the last beat said the next would come: 1 s at work, longer once idle.
        "beat_every_s": handle.beat.get("every_s") if handle.alive else None,
        "uptime_s": (round(now - handle.spawned_at, 3)
                     if handle.spawned_at is not None and handle.alive else None),
        "waiting": handle.waiting(),
        "retry_in_s": retry_in,
    }


def supervisor_status(sup: "Supervisor") -> dict[str, Any]:
    import os

    now = time.monotonic()
    rows = [space_row(h, now) for h in sorted(sup.handles.values(), key=lambda h: h.label)]
    return {
        "schema_version": STATUS_SCHEMA_VERSION,
        "supervisor": {"pid": os.getpid(), "uptime_s": round(now - sup.started_at, 3),
                       "kint_home": str(sup.home), "socket": sup.front_address,
                       # Replies waiting for a client's pipe to drain; replies dropped for
                       # a client that reads none (the outbox's bound) or that went away.
                       "replies_waiting": sup.outbox.waiting(),
                       "replies_dropped": sup.outbox.dropped,
                       "replies_to_gone_clients": sup.outbox.gone},
        "spaces": rows,
        "degraded": any(row["state"] in DEGRADED_STATES for row in rows),
    }
