"""What a worker says after the supervisor has handled its exit: its last words.

A worker that cannot start sends its reason (`fatal`) on the back socket, then exits. The
loop reads what waits on the socket before it handles an exit (daemon.py), but the message
can still reach the supervisor's socket after the exit it precedes: the kernel told of the
exit while ZeroMQ's I/O thread had not yet taken the message in. Such an exit waits for the
reason a while (exit_hold.py); one later still, past that hold, finds the exit recorded
as bare (`exited with code 3`, or a refusal naming no holder: `_refused_unheard`), and the
route retired. So the retired route keeps the token and pid of the worker it was, and what
its exit recorded without its word; a `fatal` that comes later, with that token and pid,
puts the worker's reason where the bare one was: the last exit that `kint supervisor
status` shows, the quarantine's message a client gets from then on, and the refusal (with
its holder) of a start refused. Only while the space has not moved on: once a newer worker
started (a restart), the last exit is that worker's story, and the late words are only
logged. A message whose token is not the retired worker's is an impostor's and changes
nothing.

The same holds for a worker's last replies. Stopped on command with requests in flight
(`kint supervisor stop`, a restart), a worker finishes the ops it runs, sends their
answers, and exits 0; those answers too can reach the supervisor after the exit is handled,
where the requests were answered WORKER_DOWN (`... exited with code 0 while running push`,
the worker said not to have finished) and the real reply, a push that landed, dropped. So
after such a clean exit the requests it was sent wait on its retired route's record
(`Unreplied`) for `LAST_REPLY_GRACE_S`: a reply with its token passes on to its client as a
live worker's does, and what is left when the grace is over is answered WORKER_DOWN as
before, once what waits on the back socket is read. A request's own deadline still holds
while it waits: one that passes first is answered TIMEOUT then, as `_expire` answers a live
worker's, not at the grace's end (a client whose call was bound tighter than that gave up
on the supervisor first). Both at the turn they come (timed.py's `tick`, and the loop's
poll wakes for them), never a sweep later. A worker that exits 0 with no command (a user's
`kill -TERM`) took the same way out: its stop finished its ops and sent their answers, so
its requests wait the same. A crash, a kill or a hang answers at once: such a worker sent
no answer after what was read. The stops the supervisor chooses for a worker (an idle
stop, a recycle) never come here with a request: each is decided only while the space has
none queued or in flight (its `pending`: lifecycle.py's `_check_alive`, room.py's
`_idlest_worker`), and a stopping worker is sent none (a request meanwhile waits for the
next worker: tests/test_parked_requests.py); an upgrade stops the workers only once none
is queued or in flight (housekeeping.py). Requests parked here hold none of these back:
their worker has exited already. The supervisor's own stop waits for them, at most the
grace (daemon.py). Meanwhile they are still the space's: `kint supervisor status` names
them (status.py's `parked`), and they count in its `waiting` and its bound,
MAX_WAITING_PER_SPACE (the handle's `parked`, which `Unreplied` keeps), as queued requests
do.

A mixin of `Supervisor`, a base of `WorkerLifecycle`; `WorkerMessages` reads the back
socket and hands a retired route's messages here.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Callable

from kint.protocol import ErrorCode
from kint.protocol.envelope import Reply, error_reply
from kint.supervisor.workers import Pending, StartRefusal, WorkerHandle

log = logging.getLogger("kint.supervisor")

# Routes of workers gone (or declared down) remembered, so that their last messages are
# read as such rather than refused as an impostor's. Each keeps its handle, a token, a pid
# and a line of text, so the bound holds the memory too.
MAX_RETIRED_ROUTES = 256
# How long (seconds, on the monotonic clock) the requests a worker that exited cleanly had
# not answered at its exit wait after it for its replies. What races the exit was sent
# before it: microseconds behind, milliseconds on a loaded box; a second is that many times
# over, and a request its worker never answered (one cut at the worker's stop grace) is
# told WORKER_DOWN a second later than before.
LAST_REPLY_GRACE_S = 1.0


def worker_down_reply(space16: str, reason: str, op: str, hint: str | None) -> Reply:
    """What a request its worker was running gets when the worker exited without its
    answer: at the exit (`_on_exit`), or once the grace for its last replies is over."""
    return error_reply(None, ErrorCode.WORKER_DOWN,
                       f"the worker of space {space16} {reason} while running {op}", hint)


@dataclass(slots=True)
class Unreplied:
    """The requests a worker was sent and had not answered when its clean exit was
    handled, waiting for its replies on the back socket."""

    requests: dict[str, Pending]
    # time.monotonic() past which what is left is answered WORKER_DOWN (`_replies_due`).
    reply_by: float
    # Its exit, as the WORKER_DOWN says it, and that answer's hint.
    reason: str
    hint: str | None
    # The space's handle, whose `parked` counts these (its bound, MAX_WAITING_PER_SPACE,
    # holds them too): kept here, where every request leaves (`take`, `take_all`).
    handle: WorkerHandle = field(repr=False)
    # When the first of these is owed an answer: the grace's end, or a request's own
    # deadline before it. Kept as requests leave (`take`), so that a turn reads it at once
    # and does not walk every waiting request (`_replies_next_due`, twice a turn).
    due: float = field(init=False)

    def __post_init__(self) -> None:
        self.handle.parked += len(self.requests)
        self._find_due()

    def _find_due(self) -> None:
        self.due = min([self.reply_by, *(p.deadline for p in self.requests.values())])

    def take(self, internal_id: str) -> Pending | None:
        """The request `internal_id`, no longer waiting (replied to, or answered TIMEOUT);
        None when it is not among these."""
        pending = self.requests.pop(internal_id, None)
        if pending is None:
            return None
        self.handle.parked -= 1
        if pending.deadline <= self.due:
            self._find_due()  # it may have been the first
        return pending

    def take_all(self) -> list[Pending]:
        """Every request still waiting, none waiting from here on (the grace is over)."""
        left = list(self.requests.values())
        self.requests.clear()
        self.handle.parked -= len(left)
        return left

    def shown(self, now: float) -> list[dict[str, Any]]:
        """These requests as `kint supervisor status` shows them: each `op`, and `left_s`,
        how long until it is answered without its reply (its deadline, or the grace's
        end)."""
        return [{"op": p.op, "left_s": round(max(0.0, min(p.deadline, self.reply_by) - now), 3)}
                for p in self.requests.values()]


def parked_timeout(space16: str, reason: str, pending: Pending, hint: str | None) -> Reply:
    """The TIMEOUT of a request whose deadline passed while it waited for its exited
    worker's last reply: said as such, with the exit's hint (it may have run to the end)."""
    return error_reply(None, ErrorCode.TIMEOUT,
                       f"{pending.op} on space {space16} did not finish within "
                       f"{pending.timeout_ms} ms: its worker {reason}, its reply not read",
                       hint)


@dataclass(slots=True)
class RetiredRoute:
    """A worker's route after it was declared down or exited."""

    handle: WorkerHandle
    route: bytes = field(repr=False)
    token: bytes = field(repr=False)
    pid: int | None
    # The spawn this worker was (`WorkerHandle.spawned_at`): a different one on the handle
    # is a newer worker, and the space has moved on.
    spawned_at: float | None
    # The last exit its exit recorded without the worker's word (`record_unheard`): what a
    # late `fatal` may still replace. None when that exit wrote no last exit of its own (it
    # was stopped, or hung: a hung worker's route is retired before its exit, which then
    # records nothing here) or had its reason in time.
    unheard: str | None = None
    # The requests it was sent and had not answered at its clean exit, waiting for its
    # last replies.
    unreplied: Unreplied | None = None


class LastWords:
    back: Any
    _by_route: dict[bytes, WorkerHandle]
    _retired_routes: dict[bytes, RetiredRoute]
    # The retired routes whose records have requests waiting (`Unreplied`): a record is
    # here exactly while its `unreplied` is set (`_await_replies`, `_all_replied`), so the
    # loop's turns read these, not every route remembered.
    _unreplied: dict[bytes, RetiredRoute]
    # WorkerMessages', ClientRouting's and the loop's own methods, declared for the type
    # checker.
    _refuse_peer: Callable[[bytes, str], None]
    _deliver: Callable[[WorkerHandle, Pending, Any], None]
    _answer: Callable[[WorkerHandle, Pending, Any], None]
    _drain: Callable[[Any, Callable[[Any], None]], None]
    _on_back: Callable[[Any], None]

    def _retire_route(self, handle: WorkerHandle) -> RetiredRoute | None:
        """Forget the worker's route as the space's: what comes on it from here on is its
        worker's last words, never believed as a serving worker's (`worker_messages`). The
        token and pid are kept with it, so those words are still told from an impostor's.
        A bounded memory: past `MAX_RETIRED_ROUTES` the oldest route is forgotten for good.
        Returns the route's record, None when it was retired already (a hung worker's)."""
        route, token = handle.route, handle.token
        handle.route = None
        handle.token = None
        if route is None or token is None:
            return None
        self._by_route.pop(route, None)
        retired = self._retired_routes
        record = retired[route] = RetiredRoute(handle, route, token, handle.pid,
                                                handle.spawned_at)
        while len(retired) > MAX_RETIRED_ROUTES:
            gone = retired.pop(next(iter(retired)))
            if gone.unreplied is not None:  # its replies would be refused as a stranger's
                self._give_up(gone)
        return record

    def _await_replies(self, record: RetiredRoute, handle: WorkerHandle, reason: str,
                       hint: str | None, now: float) -> None:
        """At a clean exit: the requests the worker was sent leave its handle (the next
        worker's exit, or its hello, is nothing of theirs) for its route's record, to wait
        there for its last replies until the grace is over."""
        forwarded = {i: p for i, p in handle.pending.items() if p.forwarded}
        if not forwarded:
            return
        for internal_id in forwarded:
            del handle.pending[internal_id]
        record.unreplied = Unreplied(forwarded, now + LAST_REPLY_GRACE_S, reason, hint,
                                     handle)
        self._unreplied[record.route] = record
        log.info("space %s: worker %s exited with %d request(s) it was sent unanswered; "
                 "its replies are waited for %gs", handle.space16, record.pid,
                 len(forwarded), LAST_REPLY_GRACE_S)

    def _last_reply(self, record: RetiredRoute, msg: dict[str, Any], body: Any) -> None:
        """A reply on a retired route, with its token: passed on when its request waits
        for it (`Unreplied`), else dropped, its client answered already."""
        handle, waiting = record.handle, record.unreplied
        pending = waiting.take(msg["id"]) if waiting is not None else None
        if pending is None:
            log.info("space %s: a reply from worker %s, no longer the space's (declared "
                     "down or exited), to a request already answered dropped",
                     handle.space16, record.pid)
            return
        if waiting is not None and not waiting.requests:
            self._all_replied(record)
        log.info("space %s: worker %s's reply to %s, read after its exit, passed on",
                 handle.space16, record.pid, pending.op)
        self._deliver(handle, pending, body)

    def _all_replied(self, record: RetiredRoute) -> None:
        """Nothing waits on the record any more (its last request answered, or given up):
        the turns and the supervisor's own stop (daemon.py) no longer wait for it."""
        record.unreplied = None
        self._unreplied.pop(record.route, None)

    def parked_routes(self) -> Iterable[RetiredRoute]:
        """The retired routes whose requests wait for their worker's last replies: what
        `kint supervisor status` names as parked (status.py)."""
        return self._unreplied.values()

    def _replies_next_due(self) -> float:
        """When the first waiting request is owed an answer (`Unreplied.due`); infinity
        when none waits. Only while one waits: a second at most, after a clean exit."""
        return min((r.unreplied.due for r in self._unreplied.values()),
                   default=math.inf)

    def _replies_due(self, now: float) -> None:
        """At a turn of the loop (timed.py's `tick`): a waiting request whose own deadline
        passed by `now`, before the grace for its worker's last replies, is answered
        TIMEOUT, and what is still waiting when the grace is over is answered WORKER_DOWN,
        as the exit would have answered it; each once what waits on the back socket is
        read: a reply found there wins, as at `_expire`."""
        if self._replies_next_due() > now:
            return
        self._drain(self.back, self._on_back)
        for record in list(self._unreplied.values()):
            waiting = record.unreplied
            # Whichever came first, also when both passed by `now` (a paused loop).
            late = [p for p in waiting.requests.values()
                    if p.deadline <= now and p.deadline < waiting.reply_by]
            for pending in late:
                waiting.take(pending.internal_id)
                log.info("space %s: %s's deadline passed while worker %s's reply to it "
                         "was waited for; answered TIMEOUT", record.handle.space16,
                         pending.op, record.pid)
                self._answer(record.handle, pending, parked_timeout(
                    record.handle.space16, waiting.reason, pending, waiting.hint))
            if waiting.reply_by <= now or not waiting.requests:
                self._give_up(record)

    def _give_up(self, record: RetiredRoute) -> None:
        """Answer WORKER_DOWN what still waits for the worker's last replies."""
        waiting = record.unreplied
        self._all_replied(record)
        if waiting is None:
            return
        handle = record.handle
        for pending in waiting.take_all():
            log.info("space %s: no reply to %s from worker %s within %gs of its exit; "
                     "answered WORKER_DOWN", handle.space16, pending.op, record.pid,
                     LAST_REPLY_GRACE_S)
            self._answer(handle, pending, worker_down_reply(handle.space16, waiting.reason,
                                                            pending.op, waiting.hint))

    @staticmethod
    def record_unheard(record: RetiredRoute | None, last_exit: str) -> None:
        """`_exited` wrote `last_exit` for this exit (a crash, or a start refused) without
        the worker's word: a late `fatal` may mend it. Called only where that exit wrote
        it, with what it wrote: a crash that restarted the space at once is recorded too,
        and the new spawn is what tells the late words they came too late."""
        if record is not None:
            record.unheard = last_exit

    def _heard_after(self, route: bytes, record: RetiredRoute, msg: dict[str, Any],
                     body: Any) -> None:
        """A message with the retired worker's token, read after it was declared down or
        exited; `body` is its second frame, read only for a reply (its answer, as encoded).
        A `fatal` from that worker's pid replaces what its exit recorded, if the space is
        still where that exit left it; a reply goes to its client while its request waits
        for it (`_last_reply`); anything else (a beat, a hello) is dropped: its requests
        wait for the next worker."""
        handle = record.handle
        if msg["kind"] == "reply":
            self._last_reply(record, msg, body)
            return
        if msg["kind"] != "fatal":
            log.info("space %s: a %s from a worker that is no longer the space's (declared "
                     "down or exited) dropped", handle.space16, msg["kind"])
            return
        if msg["pid"] != record.pid:
            self._refuse_peer(route, f"a fatal on the route of space {handle.space16}'s "
                              f"worker {record.pid} from pid {msg['pid']}")
            return
        reason = msg["reason"]
        # A newer spawn is the space moved on: every later exit (so every later last exit)
        # and every live worker is a later spawn's.
        if record.unheard is None or handle.spawned_at != record.spawned_at:
            log.info("space %s: worker %s's reason, read after the space moved on (or told "
                     "already): %s", handle.space16, record.pid, reason)
            return
        record.unheard = None  # once: a second copy is only noise
        handle.last_exit = reason
        if msg.get("code") is not None and handle.start_refused is not None:
            handle.start_refused = StartRefusal(msg["code"], msg["hint"],
                                                msg.get("holder_pid"))
        log.warning("space %s: worker %s's reason, read after its exit: %s",
                    handle.space16, record.pid, reason)
