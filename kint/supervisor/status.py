"""The rows of `kint supervisor status`: one per space, with what its worker is doing.

Built from what the supervisor already holds (the last heartbeat of each worker), so a
status call never waits on a worker, hung or not.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kint.open_files import OpenFiles, open_files
from kint.paths import worker_lock_path
from kint.settings.started_with import started_with
from kint.supervisor.workers import WorkerHandle, ops_in_flight
from kint.tenant_worker.worker_lock import waited_for

if TYPE_CHECKING:
    from kint.supervisor.daemon import Supervisor
    from kint.supervisor.last_words import RetiredRoute

STATUS_SCHEMA_VERSION = 1
# A space in one of these states makes `kint supervisor status` exit 1.
DEGRADED_STATES = frozenset({"hung", "restarting", "quarantined"})


def _unanchored(handle: WorkerHandle, since: float) -> dict[str, Any]:
    """The last beat's count of unanchored row changes: `unanchored_stale` when the store
    or the head moved since it was made, or it was made within two seconds of the store's
    last write (the worker recounts), or when no worker runs to see them move; its age as
    of now. All null before any count (not connected)."""
    beat = handle.beat
    count = beat.get("unanchored")
    if count is None:
        return {"unanchored": None, "unanchored_stale": None, "unanchored_age_s": None}
    return {"unanchored": count,
            "unanchored_stale": bool(beat.get("unanchored_stale")) or not handle.alive,
            "unanchored_age_s": round(float(beat.get("unanchored_age_s") or 0.0) + since, 3)}


def _aged_now(handle: WorkerHandle, key: str, since: float) -> dict[str, Any] | None:
    """The beat's fact `key` (a dict with an `age_s` as of the beat) with its `age_s` moved
    to now, `since` seconds after the beat. Null when the beat has none, or no worker runs:
    a gone worker's watcher fails or counts nothing."""
    fact = handle.beat.get(key)
    if not fact or not handle.alive:
        return None
    return {**fact, "age_s": round(float(fact.get("age_s") or 0.0) + since, 3)}


def _watcher_failure(handle: WorkerHandle, since: float) -> dict[str, Any] | None:
    """The store watcher's failed push, as of now: code, message, attempts, age_s and
    retry_in_s (0: at its next tick). Null when none, or no worker runs."""
    failure = _aged_now(handle, "watcher_failure", since)
    if failure is None:
        return None
    return {**failure,
            "retry_in_s": round(max(0.0, float(failure.get("retry_in_s") or 0.0) - since), 3)}


def _progress_origin(beat: dict[str, Any], since: float) -> dict[str, Any]:
    """The op the progress line is of and how long ago it began, as of now: a client
    shows the line only for its own call's op (the line stays until the next beat)."""
    age = beat.get("progress_age_s")
    return {"progress_op": beat.get("progress_op"),
            "progress_age_s": round(float(age) + since, 3) if age is not None else None}


def _waits_for(home: Path, handle: WorkerHandle) -> dict[str, Any] | None:
    """The holder of the space's worker lock that its starting worker waits for (`pid`,
    `supervisor_pid`, each null when nobody can name it: the supervisor's pid is the lock
    file's only when the file names the pid the kernel gives), or None. A worker that
    finds the lock held waits up to WAIT_S before its refusal names the holder, and the
    row said only `starting` meanwhile. Looked at only for a row in `starting` with a pid,
    which no other row pays: an open, a flock try and a read of the file, which names the
    starting worker once it has the lock (the common case); else the holder's own open
    files or, where they do not name it, the kernel's table of every lock
    (worker_lock.waited_for)."""
    if handle.state != "starting" or handle.pid is None:
        return None
    holder = waited_for(worker_lock_path(home, handle.space16), handle.pid)
    return holder._asdict() if holder is not None else None


def space_row(handle: WorkerHandle, now: float, home: Path,
              parked: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One space's row; `parked`, its requests waiting for an exited worker's last
    replies (`parked_requests`)."""
    beat = handle.beat
    # How long ago the last beat was made: its ages are as of then.
    since = now - handle.last_beat_at if handle.last_beat_at is not None else 0.0
    op = None
    if beat.get("op"):
        op = {"name": beat["op"], "age_s": round(float(beat.get("op_age_s") or 0.0) + since, 3)}
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
        # Every op in flight (the oldest is `op`), and how many run: more than are named
        # when past MAX_OPS_NAMED.
        "ops": ops_in_flight(beat, since) if handle.alive else [],
        "ops_running": (beat.get("inflight") or 0) if handle.alive else 0,
        "rpc": beat.get("rpc"),
        "head": beat.get("head"),
        **_unanchored(handle, since),
        "held": beat.get("held"),
        "watcher_failure": _watcher_failure(handle, since),
        # Why the watcher cannot count the store (`message` naming the file), and for how
        # long as of now (`age_s`); null when it can, or no worker runs.
        "watcher_uncounted": _aged_now(handle, "watcher_uncounted", since),
        # The push settings the watcher's pushes take from a kint-server session where
        # they are not the supervisor's own (null when none, no watcher or no worker runs).
        "watcher_settings": beat.get("watcher_settings") if handle.alive else None,
        "progress": beat.get("progress"),
        **_progress_origin(beat, since),
        "memory_mib": beat.get("own_mib") if handle.alive else None,
        # Agent sessions attached (they keep a worker from its idle exit, not from a
        # recycle), and whether it has work to finish first (ops, a push, a dirty store).
        "sessions": beat.get("sessions") if handle.alive else None,
        "work_left": beat.get("has_work") if handle.alive else None,
        # Another KINT_HOME's kint workers serving the same store, as the worker's last
        # look found them (`message`, `hint`), as `kint status` and doctor say it.
        "store_shared": beat.get("store_shared") if handle.alive else None,
        "restarts": handle.restarts,
        "last_exit": handle.last_exit,
        "last_beat_age_s": (round(now - handle.last_beat_at, 3)
                            if handle.last_beat_at is not None and handle.alive else None),
        # When the last beat said the next would come: 1 s at work, longer once idle.
        "beat_every_s": handle.beat.get("every_s") if handle.alive else None,
        "uptime_s": (round(now - handle.spawned_at, 3)
                     if handle.spawned_at is not None and handle.alive else None),
        # Its requests not answered yet, those in `parked` among them.
        "waiting": handle.waiting(),
        # Requests an exited worker of the space was sent and had not answered at its
        # clean exit, waiting for its last replies (last_words.py): each `op`, the `pid`
        # of that worker, and `left_s` until it is answered without one.
        "parked": parked or [],
        # The worker lock's holder a starting worker waits for (another worker of the
        # space, an old supervisor's): null when it waits for nothing.
        "waits_for": _waits_for(home, handle),
        "retry_in_s": retry_in,
        # Why no worker was started for the last request: no file descriptors to spare.
        "no_room": handle.no_room if not handle.alive else None,
        # Why the last worker started refused to serve: another worker of the space holds
        # its worker lock (its pid when known), or it began short of open files; and what
        # to do about it.
        # (The limit a refusal was made under is the sweep's, not the row's.)
        "start_refused": ({"code": handle.start_refused.code,
                           "hint": handle.start_refused.hint,
                           "holder_pid": handle.start_refused.holder_pid}
                          if handle.start_refused is not None and not handle.alive else None),
    }


def parked_requests(records: Iterable[RetiredRoute],
                    now: float) -> dict[str, list[dict[str, Any]]]:
    """The requests waiting for exited workers' last replies, by space id: a walk of the
    retired routes that have any (`Supervisor.parked_routes`, none but for the second
    after a clean exit), made only for a status."""
    by_space: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record.unreplied is not None:
            by_space.setdefault(record.handle.space_id, []).extend(
                {**shown, "pid": record.pid} for shown in record.unreplied.shown(now))
    return by_space


# How long a count of the supervisor's open files serves status calls: a count lists
# /proc/self/fd (~30 us with tens of workers), and a loop of status calls (a --watch, an
# agent's) would pay it at each.
FILES_EVERY_S = 0.25
_files_seen: list[Any] = [float("-inf"), None]


def _open_files(now: float) -> OpenFiles | None:
    """The supervisor's open files as counted at most FILES_EVERY_S ago."""
    if now - _files_seen[0] >= FILES_EVERY_S:
        _files_seen[:] = [now, open_files()]
    return _files_seen[1]


def label_order(label: str) -> tuple[Any, ...]:
    """A space's place in `kint supervisor status` and `sup.spaces`: by label, its numbers
    compared as numbers, so a box's profiles read p1, p2, ..., p10 rather than p1, p10,
    p11, p2 (64 of them made the order hard to scan). The label itself breaks ties. A part
    is a number when it is decimal digits, the ones `\\d` splits on and `int` reads: a
    superscript or circled digit (`str.isdigit`, not `isdecimal`) that `int` refuses, in a
    tenant's name, would fail every status call of the box."""
    parts = re.split(r"(\d+)", label)
    return (tuple((0, int(p), "") if p.isdecimal() else (1, 0, p) for p in parts if p), label)


def supervisor_status(sup: "Supervisor", passphrase: str | None = None) -> dict[str, Any]:
    """The status; `passphrase`, the caller's proof of its KINT_SESSION_PASSPHRASE when it
    has one (kint.settings.secret_proof), is checked against this process's, which its
    workers unseal the keys with: `passphrase_differs`, and the line that says so."""
    import os

    now = time.monotonic()
    parked = parked_requests(sup.parked_routes(), now)
    rows = [space_row(h, now, sup.home, parked.get(h.space_id))
            for h in sorted(sup.handles.values(), key=lambda h: label_order(h.label))]
    files = _open_files(now)
    notice = _passphrase_notice(passphrase) if passphrase else None
    return {
        "schema_version": STATUS_SCHEMA_VERSION,
        "supervisor": {"pid": os.getpid(), "uptime_s": round(now - sup.started_at, 3),
                       "kint_home": str(sup.home), "socket": sup.front_address,
                       # Replies waiting for a client's pipe to drain; replies dropped for
                       # a client that reads none (the outbox's bound) or that went away.
                       "replies_waiting": sup.outbox.waiting(),
                       "replies_dropped": sup.outbox.dropped,
                       "replies_to_gone_clients": sup.outbox.gone,
                       # Its descriptors in use, its limit (ulimit -n) and the part of it
                       # no worker may take (kint/open_files.py); null where
                       # they cannot be counted.
                       "open_files": files.as_json() if files is not None else None,
                       # Its socket closed to new clients for want of open files (the
                       # count and limit then, and since when), and how often it was.
                       "front": sup.door.as_json(),
                       # Whether workers can start yet (the forkserver's preload runs in
                       # the background), and any preload module it could not import.
                       "forkserver": {"ready": sup.spawner.ready,
                                      "missing_preload": sup.spawner.missing_preload},
                       # The settings it took from the environment it was started with
                       # (an on-demand start's is the starting command's), for its life.
                       "started_with": started_with(),
                       # Whether the caller's KINT_SESSION_PASSPHRASE is not this one (or
                       # this one is unset); null when the caller sent none.
                       "passphrase_differs": notice is not None if passphrase else None},
        "spaces": rows,
        # A space refused a worker for want of open files, or whose worker refused its
        # start, is degraded too: it serves nothing.
        "degraded": sup.door.closed is not None or any(
            row["state"] in DEGRADED_STATES or row["no_room"] or row["start_refused"]
            for row in rows),
        **({"notices": [notice]} if notice is not None else {}),
    }


def _passphrase_notice(proof: str) -> str | None:
    """The line for a caller whose passphrase (its proof) is not this process's."""
    from kint.settings import secret_proof
    from kint.settings.environ import environ_value

    name = "KINT_SESSION_PASSPHRASE"
    return secret_proof.notice(name, proof, environ_value(name))
