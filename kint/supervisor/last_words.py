"""What a worker says after the supervisor has handled its exit: its last words.

A worker that cannot start sends its reason (`fatal`) on the back socket, then exits. The
loop reads what waits on the socket before it handles an exit (daemon.py), but the message
can still reach the supervisor's socket after the exit it precedes: the kernel told of the
exit while ZeroMQ's I/O thread had not yet taken the message in. The exit is then recorded
as bare (`exited with code 3`, or a refusal naming no holder: `_refused_unheard`), and the
route retired. So the retired route keeps the token and pid of the worker it was, and what
its exit recorded without its word; a `fatal` that comes later, with that token and pid,
puts the worker's reason where the bare one was: the last exit that `kint supervisor
status` shows, the quarantine's message a client gets from then on, and the refusal (with
its holder) of a start refused. Only while the space has not moved on: once a newer worker
started (a restart), the last exit is that worker's story, and the late words are only
logged. A message whose token is not the retired worker's is an impostor's and changes
nothing.

A mixin of `Supervisor`, a base of `WorkerLifecycle`; `WorkerMessages` reads the back
socket and hands a retired route's messages here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from kint.supervisor.workers import StartRefusal, WorkerHandle

log = logging.getLogger("kint.supervisor")

# Routes of workers gone (or declared down) remembered, so that their last messages are
# read as such rather than refused as an impostor's. Each keeps its handle, a token, a pid
# and a line of text, so the bound holds the memory too.
MAX_RETIRED_ROUTES = 256


@dataclass(slots=True)
class RetiredRoute:
    """A worker's route after it was declared down or exited."""

    handle: WorkerHandle
    token: bytes = field(repr=False)
    pid: int | None
    # The spawn this worker was (`WorkerHandle.spawned_at`): a different one on the handle
    # is a newer worker, and the space has moved on.
    spawned_at: float | None
    # The last exit its exit recorded without the worker's word (`record_unheard`): what a
    # late `fatal` may still replace. None when there is nothing to replace (its reason was
    # read in time, it was hung, or it was stopped on command).
    unheard: str | None = None


class LastWords:
    _by_route: dict[bytes, WorkerHandle]
    _retired_routes: dict[bytes, RetiredRoute]
    # WorkerMessages' own method, declared for the type checker.
    _refuse_peer: Callable[[bytes, str], None]

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
        record = retired[route] = RetiredRoute(handle, token, handle.pid, handle.spawned_at)
        while len(retired) > MAX_RETIRED_ROUTES:
            del retired[next(iter(retired))]
        return record

    @staticmethod
    def record_unheard(record: RetiredRoute | None, handle: WorkerHandle) -> None:
        """After `_on_exit`: whether the exit recorded a last exit without the worker's
        word (its `fatal` unread, no hang, no commanded stop), which a late `fatal` may
        mend. A crash that restarted the space at once is recorded too: the new spawn is
        what tells the late words they came too late."""
        if (record is not None and handle.fatal_reason is None and handle.hung_reason is None
                and handle.stop_reason is None and handle.last_exit is not None):
            record.unheard = handle.last_exit

    def _heard_after(self, route: bytes, record: RetiredRoute, msg: dict[str, Any]) -> None:
        """A message with the retired worker's token, read after it was declared down or
        exited. A `fatal` from that worker's pid replaces what its exit recorded, if the
        space is still where that exit left it; anything else (a late reply, beat or
        hello) is dropped: its clients were answered already (WORKER_DOWN), or its
        requests wait for the next worker."""
        handle = record.handle
        if msg["kind"] != "fatal":
            log.info("space %s: a %s from a worker that is no longer the space's (declared "
                     "down or exited) dropped", handle.space16, msg["kind"])
            return
        if msg["pid"] != record.pid:
            self._refuse_peer(route, f"a fatal on the route of space {handle.space16}'s "
                              f"worker {record.pid} from pid {msg['pid']}")
            return
        reason = msg["reason"]
        if (record.unheard is None or handle.alive or handle.spawned_at != record.spawned_at
                or handle.last_exit != record.unheard):
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
