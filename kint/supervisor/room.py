"""Room for a worker when the supervisor's open files run short (kint/open_files.py).

A space whose worker cannot start for want of descriptors does not wait for some worker's
idle exit (KINT_WORKER_IDLE_SECONDS, 15 minutes by default): the worker that has been
quiet longest and that nobody needs (ready, no request waiting, no work left, no agent
session attached, judged on a beat read after its last work, as the idle exit is) is
stopped as idle, and the space's requests wait, queued under their own deadlines, until
the sweep after its exit starts the space's worker. One such stop at a time, so a burst
of requests for new spaces never empties the box of workers. With no such worker, the
requests are refused BUSY, naming the limit, and the space is not counted as crashed;
but a worker already stopping as idle (or recycled with no session) makes room within its
grace, and is waited for as one stopped for room is (`_stopping_worker`); and while a
worker with no session known is only still starting, answering (a request or an op in
flight: its beats say `has_work` every second meanwhile), or owes the beat that follows
its work (`_settling_workers`), the space waits at the queue's head, looked at again at
each sweep, for the beat that says whether that worker can be spared. It used to be
refused at once: a space queued behind another, whose turn came as the worker started
for the other was still starting, was refused BUSY, though that worker, its one request
answered, was idle a moment later. That wait has a bound of its own (SETTLE_S from the
first look that counted the worker, or from its hello when it started since): a worker
serving steady traffic answers forever, and every space waiting on it ran out its
deadline (TIMEOUT) where it was refused BUSY at once, and so did those behind it. A
push or a dirty store left with no op in flight is not waited for: it ends on a receipt,
a retry's backoff or a held push, not on an answer.

The spaces waiting for room are served in the order they asked, and the room a stop made
is theirs: while any waits, a request that needs a new worker for another space waits
behind them (`_room_for`), the space whose worker was stopped for room included, when a
request came for it during the stop (worker_exit's `_on_exit`). Started at once, that space
took the room back from the one it was stopped for, which was then refused BUSY or
stopped yet another worker: with two spaces asked in turn at the limit, the space asked
first could be refused at every turn while the other's worker was stopped and started
for each of its requests. In order, every stop for room serves the request at the head
of the queue, and a space comes back into the queue only with a request of its own, so
the stops and starts are bounded by the requests that find no worker (at a limit with
room for one worker, two spaces asked in turn pay a worker start a turn), and end when
the requests do.

A mixin of `Supervisor` (kint/supervisor/daemon.py) through `WorkerLifecycle`, whose
`spawn` asks `_room_for` first.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from kint.protocol import ErrorCode
from kint.protocol.envelope import error_reply
from kint.protocol.worker_wire import BEAT_SECONDS
from kint.open_files import (ROOM_HINT, SYSTEM_FILES_HINT, WORKER_ROOM_HINT, no_room_message,
                             open_files, system_table_room)
from kint.supervisor.workers import WorkerHandle, live_sessions

log = logging.getLogger("kint.supervisor")

# How long a space waits for a worker answering (or owing its beat after work) before it
# is refused BUSY: a beat a second while it works, so a few beats; counted per worker from
# the first look that counted it, or from its hello when it started since.
SETTLE_S = 3 * BEAT_SECONDS


class WorkerRoom:
    handles: dict[str, WorkerHandle]
    shutting_down: bool
    # Spaces whose requests wait for a worker to leave (in the order they asked), and the
    # spaces whose workers are being stopped to make that room.
    _room_wanted: list[str]
    _evicting: set[str]
    # When each worker was first counted as settling while spaces wait for room
    # (`_settling_workers`); forgotten once none waits.
    _settle_seen: dict[str, float]
    # The space `_serve_room_wanted` is starting the worker of now (its turn in the queue).
    _room_turn: str | None
    # ClientRouting's and WorkerLifecycle's own methods, declared for the type checker.
    _answer: Callable[[WorkerHandle, Any, Any], None]
    spawn: Callable[[WorkerHandle], None]
    stop_worker: Callable[[WorkerHandle, str, float], None]

    def _room_for(self, handle: WorkerHandle) -> bool:
        """Whether `handle`'s worker may start now. When not, its requests either wait for
        an idle worker stopped to make room, or are refused (`_no_room`). Requests for a
        space whose turn it is not wait behind the spaces already waiting for room."""
        if self._room_wanted and self._room_turn != handle.space_id and handle.pending:
            self._queue_for_room(handle)
            return False
        files = open_files()
        if files is None or files.room_for_worker():
            return True
        if not self._wait_for_room(handle):
            self._no_room(handle, no_room_message(handle.space16, files))
        return False

    def _wait_for_room(self, handle: WorkerHandle) -> bool:
        """Queue `handle` for the room an idle worker's stop makes, stopping one if none is
        being stopped already (or waiting for one already stopping, or for one that may
        be spared once it has answered). False when nothing waits (a quarantine's retry
        with no request) or no worker can be spared."""
        if not handle.pending or self.shutting_down:
            return False
        if handle.space_id in self._room_wanted:
            return True
        if not self._evicting:
            now = time.monotonic()
            spare = self._idlest_worker()
            leaving = None if spare is not None else self._stopping_worker(handle)
            if spare is not None:
                log.info("space %s: out of open files for a worker; stopping the idle "
                         "worker of space %s to make room", handle.space16, spare.space16)
                self._evicting.add(spare.space_id)
                self.stop_worker(spare, "idle", now)
            elif leaving is not None:
                # Already on its way out with nothing to hand on: its exit is the room.
                self._evicting.add(leaving.space_id)
            elif not self._settling_workers(handle, now):
                return False
            # else one may be spared once it has answered: the space waits its turn at the
            # queue's head, looked at again at each sweep (`_serve_room_wanted`).
        handle.state = "idle"
        if self._room_turn == handle.space_id:  # still first: the room made is its own
            self._room_wanted.insert(0, handle.space_id)
        else:
            self._room_wanted.append(handle.space_id)
        return True

    def _queue_for_room(self, handle: WorkerHandle) -> None:
        """`handle`'s requests wait for a worker behind the spaces waiting for room (once
        in the queue, at its end)."""
        handle.state = "idle"
        if handle.space_id not in self._room_wanted:
            self._room_wanted.append(handle.space_id)

    def _idlest_worker(self) -> WorkerHandle | None:
        """The running worker quiet longest that nobody needs now, or None."""
        spare = [h for h in self.handles.values()
                 if h.alive and h.state == "ready" and not h.pending
                 and not h.beat.get("has_work") and not live_sessions(h.beat)
                 and h.beat_tells_after_work()]
        return min(spare, key=lambda h: h.last_activity, default=None)

    def _stopping_worker(self, handle: WorkerHandle) -> WorkerHandle | None:
        """A worker other than `handle`'s already stopping as idle, or recycled with no
        session to hand to a successor: its exit frees its room within its stop grace,
        and nothing starts in its place unless a request for it comes meanwhile (which
        then waits in the queue, as for a worker stopped for room: worker_exit's
        `_on_exit`). A space refused BUSY while it left was refused for nothing."""
        return next((h for h in self.handles.values()
                     if h.alive and h.space_id != handle.space_id and h.state == "stopping"
                     and h.kill_at is None and (h.stop_reason == "idle" or (
                         h.stop_reason == "recycle" and not live_sessions(h.beat)))),
                    None)

    def _settling_workers(self, handle: WorkerHandle, now: float) -> bool:
        """Whether a running worker other than `handle`'s may be spared soon (any
        `_settling` one). Asked once `_idlest_worker` found none to stop now."""
        settling = False
        for h in self.handles.values():
            if h.alive and h.space_id != handle.space_id and self._settling(h, now):
                settling = True  # every one looked at, so that each one's clock starts
        return settling

    def _settling(self, h: WorkerHandle, now: float) -> bool:
        """Whether the worker of `h` has no agent session known and is still starting,
        answering (a request sent to it, an op in flight), or owes the beat after its
        last work, within SETTLE_S of the first look that counted it (or of its hello).
        That beat says whether it can be spared: no session, and it is stopped for room
        at a sweep; one attached, and the spaces waiting are refused. Work with no op in
        flight (a push, a dirty store) is not waited for."""
        if live_sessions(h.beat):
            return False
        if h.state == "starting" or h.hello_at is None:
            return h.state == "starting"  # bounded by the start timeout
        if h.state not in ("ready", "busy"):
            return False
        beat = h.beat
        answering = (bool(h.pending) or bool(beat.get("inflight"))
                     or not h.beat_tells_after_work())
        if not answering and beat.get("has_work"):
            return False
        seen = self._settle_seen.setdefault(h.space_id, now)
        return now - max(seen, h.hello_at) < SETTLE_S

    def _room_sweep(self) -> None:
        """From the sweep: the spaces waiting for room first, then a refusal made for want
        of room forgotten once there is room again because workers exited or the limit
        rose (not because a client's connection closed: the refusal came at the edge, and
        that descriptor or two is the next client's), so that status no longer calls that
        space degraded: its next request starts its worker."""
        self._serve_room_wanted()
        self._files_refusals_sweep()
        refused = [h for h in self.handles.values() if h.no_room is not None and not h.alive]
        if refused:
            files = open_files()
            alive = self._alive_workers()
            for handle in refused:
                seen = handle.no_room_seen
                changed = (seen is None or files is None or alive < seen[0]
                           or files.limit > seen[1])
                if changed and (files is None or files.room_for_worker()):
                    handle.no_room = None
                    handle.no_room_seen = None

    def _files_refusals_sweep(self) -> None:
        """A worker's start refused for want of open files (worker_exit.py: EXIT_NO_FILES,
        EXIT_NO_SYSTEM_FILES) is forgotten once its cause is gone: the supervisor's limit,
        which a worker inherits, rose above the one it began under, or the system's table
        has room again (ENFILE is often brief). Kept until the next request, it left a
        space nobody asked for again degraded, and `kint supervisor status` at exit 1, for
        the supervisor's life. The last exit keeps the story."""
        for handle in self.handles.values():
            refusal = handle.start_refused
            if handle.alive or refusal is None or refusal.code != ErrorCode.BUSY.value:
                continue
            if refusal.hint == SYSTEM_FILES_HINT:
                gone = system_table_room() is True
            elif refusal.hint == WORKER_ROOM_HINT:
                files = open_files()
                gone = files is None or (refusal.limit is not None
                                         and files.limit > refusal.limit)
            else:
                continue
            if gone:
                log.info("space %s: room for open files again", handle.space16)
                handle.start_refused = None

    def _alive_workers(self) -> int:
        return sum(1 for h in self.handles.values() if h.alive)

    def _serve_room_wanted(self) -> None:
        """Once the workers stopped for room have exited (their connection on the back
        socket is closed by then too): start the waiting spaces' workers in order. A space
        whose requests all timed out meanwhile is dropped from the queue."""
        if self.shutting_down:  # their requests were answered; no worker starts now
            self._room_wanted.clear()
        while self._room_wanted and not self._evicting:
            handle = self.handles.get(self._room_wanted.pop(0))
            if handle is None or handle.alive or not handle.pending:
                continue
            self._room_turn = handle.space_id
            try:
                self.spawn(handle)
            finally:
                self._room_turn = None
            if handle.space_id in self._room_wanted and not self._evicting:
                break  # back at the head, waiting for a worker still settling: next sweep
        if not self._room_wanted:
            self._settle_seen.clear()  # the next space to wait gives each worker its bound

    def _no_room(self, handle: WorkerHandle, message: str) -> None:
        """No worker for `handle` now, and none can be spared: its requests are refused BUSY
        with the limit and what frees room. Not a crash (a quarantine would shut the space
        out long after room is made): the next request tries again. Said in the log once
        until a spawn succeeds."""
        if handle.no_room is None:
            log.warning("%s", message)
        handle.no_room = message
        files = open_files()
        handle.no_room_seen = (self._alive_workers(), files.limit if files else 0)
        handle.state = "idle"
        for pending in list(handle.pending.values()):
            self._answer(handle, pending, error_reply(None, ErrorCode.BUSY, message, ROOM_HINT))
