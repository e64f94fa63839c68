"""What the supervisor's loop does besides reading messages, each on its own schedule.

- An exit held for its worker's reason (exit_hold.py), at its deadline: handled without.
- Deadlines, at every turn: a request whose deadline passed is answered TIMEOUT (the
  deadline heap's head is one comparison when none is due), unless its reply is found
  waiting on the back socket, read first at such a turn (`_expire`). So are the requests
  an exited worker's last replies are waited for (last_words.py), at their own deadline
  or the grace's end, whichever is first (`_replies_due`): a dict that is empty but for
  the second after a clean exit.
- Forwards a worker's pipe refused (it was full), at every turn while any wait, and only
  for those spaces (`_stalled`), so a request never waits for the sweep.
- The sweep over every space's handle (hung judgement, kills after a grace, commanded
  stops past their grace, quarantine retries, idle exits, backoff resets) and the
  supervisor's own housekeeping, once per `tick_s` on the monotonic clock. A turn of the
  loop comes with each request, each reply and each of the workers' beats (64 spaces beat
  64 times a second): walking every handle at each of them cost tens of µs a turn and
  told nothing new, since a worker's silence is judged in seconds. A sweep that finds a
  worker silent past its limit reads the back socket first, as `_expire` does: a beat
  waiting there speaks for its worker.

`poll_timeout_ms` is how long the loop may wait for a message before one of these is due.
A mixin of `Supervisor` (kint/supervisor/daemon.py), which owns the handles, the back
socket and the heap.
"""

from __future__ import annotations

import heapq
import logging
import math
from typing import Any, Callable

import zmq

from kint.open_files import ROOM_HINT, no_room_yet_message
from kint.paths import worker_lock_path
from kint.protocol import ErrorCode, worker_wire
from kint.protocol.envelope import error_reply
from kint.zmq_frames import send_frames
from kint.supervisor.workers import SERVING_STATES, Pending, WorkerHandle
from kint.tenant_worker.worker_lock import held_at, waited_for, waiting_words

log = logging.getLogger("kint.supervisor")

# While replies wait for a client's pipe, or requests for a worker's, the loop looks
# again this soon.
RETRY_S = 0.02


class TimedWork:
    home: Any
    settings: Any
    back: Any
    handles: dict[str, WorkerHandle]
    outbox: Any
    shutting_down: bool
    # Every request's (deadline, space id, internal id), a heap.
    _deadlines: list[tuple[float, str, str]]
    # Spaces whose requests wait for room to start their worker (WorkerRoom's queue).
    _room_wanted: list[str]
    # Spaces whose workers are being stopped to make that room.
    _evicting: set[str]
    # Spaces with a request their worker's pipe refused: retried at every turn.
    _stalled: set[str]
    # When the sweep over every handle is next due (monotonic).
    _sweep_at: float
    # Spaces whose worker's exit waits for its reason, each until its `held_until`
    # (ExitHold, exit_hold.py).
    _held_exits: dict[str, WorkerHandle]
    # The front socket's door to new clients (front_door), and where the socket is bound.
    door: Any
    front_path: Any
    # ClientRouting's, WorkerMessages', WorkerLifecycle's, Housekeeping's and the loop's
    # own methods, declared for the type checker.
    _answer: Callable[[WorkerHandle, Any, Any], None]
    _drain: Callable[[Any, Callable[[Any], None]], None]
    _on_back: Callable[[Any], None]
    _check_alive: Callable[[WorkerHandle, float], None]
    silent_past_limit: Callable[[WorkerHandle, float], float | None]
    _housekeeping: Callable[[float], None]
    # LastWords' (last_words.py): requests waiting for an exited worker's last replies.
    _unreplied: dict[bytes, Any]
    _replies_due: Callable[[float], None]
    _replies_next_due: Callable[[], float]
    _room_sweep: Callable[[], None]
    spawn: Callable[[WorkerHandle], None]
    held_due: Callable[[], float | None]
    _release_due: Callable[[float], None]

    def poll_timeout_ms(self, now: float) -> int:
        """Whole milliseconds the loop may wait for a message before timed work is due,
        rounded up: the poll takes whole milliseconds, and a wait of 0.4 ms truncated to
        0 made the loop spin, polling without waiting, until the work came due (952
        empty turns beside 6,011 with a message, in one run of 3,000 calls)."""
        due = self._sweep_at
        if self._held_exits:  # an exit waiting for its worker's reason (exit_hold.py)
            due = min(due, self.held_due() or due)
        deadlines = self._deadlines
        if deadlines and deadlines[0][0] < due:
            # Only a deadline before the sweep can shorten the wait: the answered ones
            # at the head are dropped first, so the loop never wakes for them. Nearly
            # every head is further off (a call's deadline is seconds away, the sweep
            # under a second), and then the heap is not walked at each turn but at
            # each sweep (`_sweep`).
            self._drop_answered()
            if deadlines and deadlines[0][0] < due:
                due = deadlines[0][0]
        if self._unreplied:  # requests waiting for an exited worker's last replies
            due = min(due, self._replies_next_due())
        timeout = min(max(0.0, due - now), self.settings.tick_s)
        if self._stalled or self.outbox.backlogged():
            timeout = min(timeout, RETRY_S)
        return math.ceil(timeout * 1000 - 1e-6)  # a float's last bits add no millisecond

    def tick(self, now: float) -> None:
        """One turn's timed work: held exits, deadlines (the requests waiting for an exited
        worker's last replies too) and refused forwards now, the sweep when due. A held
        exit first: what it answers (a QUARANTINED, a WORKER_DOWN) is said before a
        deadline due at the same turn would say only TIMEOUT."""
        if self._held_exits:
            self._release_due(now)
        deadlines = self._deadlines
        if deadlines and deadlines[0][0] <= now:
            self._expire(now)
        if self._unreplied:
            self._replies_due(now)
        if self._stalled:
            self._retry_stalled()
        if now >= self._sweep_at:
            self._sweep_at = now + self.settings.tick_s
            self._sweep(now)

    def _drop_answered(self) -> None:
        """Pop the deadlines of requests already answered off the heap's head. Nearly
        every request is answered long before its deadline; left in the heap, each would
        wake the loop at its deadline for nothing, and the heap would hold every request
        of the last timeout's span (tens of thousands under load) instead of the ones
        still waiting."""
        deadlines = self._deadlines
        while deadlines:
            _, sid, internal_id = deadlines[0]
            handle = self.handles.get(sid)
            if handle is not None and internal_id in handle.pending:
                return
            heapq.heappop(deadlines)

    def _expire(self, now: float) -> None:
        """Answer TIMEOUT each request whose deadline passed by `now`, once what the
        workers sent is read: `now` was read after the turn's poll, and a supervisor
        preempted between the two finds deadlines passed whose replies came meanwhile,
        unread on the back socket (the poll had not seen them). The reply wins: it is
        passed on, and no TIMEOUT is given for its request. Read here, once per turn that
        times a request out, not at every turn: a normal turn pays no look for it."""
        read_back = False
        looked: dict[str, Any] = {}  # each space's lock looked at once a call (`_late_reply`)
        while self._deadlines and self._deadlines[0][0] <= now:
            _, sid, internal_id = heapq.heappop(self._deadlines)
            handle = self.handles.get(sid)
            pending = handle.pending.get(internal_id) if handle else None
            if handle is None or pending is None:
                continue
            if not read_back:
                read_back = True
                self._drain(self.back, self._on_back)
                if internal_id not in handle.pending:  # its reply was waiting
                    continue
            late = (f"{pending.op} on space {handle.space16} did not finish within "
                    f"{pending.timeout_ms} ms")
            if handle.space_id in self._room_wanted:
                # No worker yet: an idle one is being stopped to free open files for it,
                # or one still settling is waited for. Said as such, with what frees
                # room, not as a worker that sat idle.
                reply = error_reply(None, ErrorCode.TIMEOUT,
                                    no_room_yet_message(late, bool(self._evicting)),
                                    ROOM_HINT)
            else:
                reply = self._late_reply(handle, late, now, looked)
            self._answer(handle, pending, reply)

    def _late_reply(self, handle: WorkerHandle, late: str, now: float,
                    looked: dict[str, Any]) -> Any:
        """The TIMEOUT of a request its space's worker did not answer in time, saying what
        the worker is doing. One still starting may be waiting for the space's worker
        lock, held by an old worker a supervisor that died left (worker_lock.py): its
        start is refused naming that holder only after up to WAIT_S, and a request whose
        deadline came first was told only "starting". The lock is looked at then, as
        `held_at` does, once per space in `looked` (a burst of requests timed out
        together costs one look, not one each), and its holder named with the way out
        for the time the worker has waited so far."""
        if handle.state == "starting" and handle.pid is not None:
            if handle.space_id not in looked:
                path = worker_lock_path(self.home, handle.space16)
                holder = waited_for(path, handle.pid)
                waited = now - (handle.spawned_at if handle.spawned_at is not None else now)
                looked[handle.space_id] = (None if holder is None
                                           else waiting_words(path, holder, waited))
            words = looked[handle.space_id]
            if words is not None:
                return error_reply(None, ErrorCode.TIMEOUT, f"{late}: {words[0]}", words[1])
        return error_reply(None, ErrorCode.TIMEOUT, f"{late}: the worker is {handle.doing(now)}")

    def _forward(self, handle: WorkerHandle, pending: Pending) -> bool:
        """Send one request to the worker. False when its pipe cannot take it now: the
        request stays queued, and the space is retried at every turn until it leaves. It
        goes with its deadline, the one `_expire` answers it TIMEOUT at: the worker bounds
        what it starts for it by that (worker_wire.req_deadline), where a bound of its own
        began when it ran the request, late by however long the request had waited."""
        if handle.route is None:
            return False
        try:
            send_frames(self.back, (handle.route, *worker_wire.encode(
                {"kind": "req", "id": pending.internal_id, "deadline": pending.deadline},
                pending.body)))
            pending.forwarded = True
            handle.sent += 1
            return True
        except zmq.ZMQError as err:
            if handle.space_id not in self._stalled:  # said once per stall, not per retry
                self._stalled.add(handle.space_id)
                log.info("space %s: worker not reachable yet (%s); request stays queued",
                         handle.space16, err)
            return False

    def _retry_stalled(self) -> None:
        """Forward what a full pipe refused, in order, for the spaces that have any. A
        space whose worker no longer serves leaves the set: its next worker's hello
        forwards the queue."""
        for sid in list(self._stalled):
            handle = self.handles.get(sid)
            if handle is None or handle.state not in SERVING_STATES:
                self._stalled.discard(sid)
                continue
            if all(self._forward(handle, pending) for pending in handle.queued()):
                self._stalled.discard(sid)

    def _sweep(self, now: float) -> None:
        """Every handle, once per tick interval: is its worker alive, hung, past a grace;
        is a quarantine over; has a retried worker been up long enough to forget its
        backoff. Then the supervisor's own housekeeping. First the deadlines of requests
        already answered leave the heap's head, so it holds at most a tick's worth of
        them (`poll_timeout_ms` walks it only when its head is due before this sweep)."""
        self._drop_answered()
        if any(h.alive and self.silent_past_limit(h, now) is not None
               for h in self.handles.values()):
            # As at `_expire`: `now` was read after the turn's poll, and a supervisor
            # preempted between the two (for less than the pause slack, so no pause was
            # told) finds a worker silent whose beat came meanwhile, unread. What waits
            # on the back socket is read before any worker is judged hung on its silence.
            self._drain(self.back, self._on_back)
        stable_after_s = self.settings.stable_after_s
        for handle in self.handles.values():
            if handle.alive:
                self._check_alive(handle, now)
            elif (handle.state == "quarantined" and handle.quarantined_until is not None
                  and now >= handle.quarantined_until and not self.shutting_down):
                log.info("space %s: quarantine retry", handle.space16)
                handle.retry_started_at = now
                self.spawn(handle)
            elif (handle.start_refused is not None
                  and handle.start_refused.code == ErrorCode.WORKER_DOWN.value
                  and held_at(worker_lock_path(self.home, handle.space16)) is False):
                # The worker that held the space is gone: its refusal no longer stands
                # (status showed the space degraded, naming a pid that may be another
                # process's by now); the last exit keeps the story. A start short of open
                # files (BUSY) never held the lock: room.py's sweep forgets it once there
                # is room.
                log.info("space %s: the worker lock is free again", handle.space16)
                handle.start_refused = None
            if (handle.backoff_s is not None and handle.state in SERVING_STATES
                    and handle.retry_started_at is not None and handle.hello_at is not None
                    and now - handle.hello_at >= stable_after_s):
                handle.backoff_s = None
                handle.retry_started_at = None
        self._room_sweep()
        if self.door.closed is not None:  # a client's disconnect is told before its close
            self.door.look(self.front_path)
        self._housekeeping(now)
