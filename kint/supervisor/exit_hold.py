"""A worker's exit that waits for the reason the worker sent just before it.

A worker that cannot start sends its reason (`fatal`) on the back socket, then exits
(EXIT_FATAL, or EXIT_REFUSED naming the holder of its worker lock). The loop reads what
waits on the socket before it handles an exit (daemon.py), but the message can still reach
the supervisor's socket after the exit it precedes: the kernel told of the exit while
ZeroMQ's I/O thread had not yet taken the message in. Handled then, the exit was bare
(`exited with code 3`, or a refusal naming no holder), and so was all it answered at once:
the QUARANTINED refusal of the requests waiting, the WORKER_DOWN of those in flight. A
reason read later can mend the status (last_words.py), never an answer already sent.

So an exit whose code says a reason was sent, none read, is held (`_hold_exit`): its
handling waits, up to REASON_GRACE_S, for the worker's `fatal` on its route, still open,
and goes on the moment it comes (`_reason_heard`), or at the deadline without it
(`_release_due`, at the loop's timed work: timed.py, which wakes for it). Nothing else
waits: the loop serves every other space meanwhile, and the held worker's own requests wait
as they would for a worker still starting. A reason later still (a box loaded past the
grace) is last_words.py's: it mends the status from then on.

A stop or restart commanded during the hold makes the exit, once handled, the command's
(`_exited`), as it would have been handled at once: a stop's leaves the space stopped, a
restart's starts the next worker with the requests waiting. Neither writes a last exit nor
counts a crash: the restart cleared the space's crash history, its reason is in the log
line, and the next worker's own exit says what it meets.

A mixin of `Supervisor`, a base of `WorkerExit` (worker_exit.py); `WorkerMessages` hands it
the reason.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from kint.protocol import worker_wire
from kint.supervisor.workers import WorkerHandle

log = logging.getLogger("kint.supervisor")

# How long (seconds, monotonic) an exit whose code says the worker sent its reason waits
# for it. The worker sent it just before it exited (its socket lingers up to 2 s to deliver
# it), so it is normally a few milliseconds behind the exit; the hold delays only that
# space's exit, never the loop.
REASON_GRACE_S = 0.5
# The exit codes of a worker that sent its `fatal` before it exited (worker_start.py).
SAYS_WHY = frozenset({worker_wire.EXIT_FATAL, worker_wire.EXIT_REFUSED})


class ExitHold:
    back: Any
    # The spaces whose worker's exit is held for its reason, each until its `held_until`.
    _held_exits: dict[str, WorkerHandle]
    # WorkerLifecycle's, WorkerMessages' and the loop's own methods, declared for the type
    # checker.
    _exited: Callable[[WorkerHandle], None]
    _on_back: Callable[[Any], None]
    _drain: Callable[[Any, Callable[[Any], None]], None]

    def _hold_exit(self, handle: WorkerHandle, exitcode: int | None, now: float) -> bool:
        """Whether the exit just noticed waits for the worker's reason: its code says the
        worker sent one (SAYS_WHY), none was read, and its route is still open to read it
        on (a hung worker's was retired when it was declared down). Held until
        REASON_GRACE_S from `now`: the worker stays the space's meanwhile, its process
        reaped but not closed (`_exited` reads its exit code), and no signal goes to its
        pid (`WorkerHandle.signal`), which may be another process's by now."""
        if exitcode not in SAYS_WHY or handle.fatal_reason is not None or handle.route is None:
            return False
        handle.held_until = now + REASON_GRACE_S
        self._held_exits[handle.space_id] = handle
        return True

    def _reason_heard(self, handle: WorkerHandle) -> None:
        """The worker's `fatal` was read: an exit held for it is handled now, with it."""
        if handle.held_until is not None:
            self._release(handle)

    def held_due(self) -> float | None:
        """When the next held exit is to be handled without its reason (monotonic)."""
        return min((h.held_until for h in self._held_exits.values()
                    if h.held_until is not None), default=None)

    def _release_due(self, now: float) -> None:
        """Handle the held exits whose grace is over by `now`, without their reason, once
        what waits on the back socket is read: `now` was read after the turn's poll, and a
        reason that came meanwhile has its exit handled with it (as a reply found there
        wins at `_expire`). One that comes later still mends the status on the retired
        route (last_words.py)."""
        if not any(h.held_until is not None and h.held_until <= now
                   for h in self._held_exits.values()):
            return
        self._drain(self.back, self._on_back)
        for handle in [h for h in self._held_exits.values()
                       if h.held_until is not None and h.held_until <= now]:
            log.info("space %s: worker %s's reason did not come within %.1fs of its exit",
                     handle.space16, handle.pid, REASON_GRACE_S)
            self._release(handle)

    def _release(self, handle: WorkerHandle) -> None:
        handle.held_until = None
        self._held_exits.pop(handle.space_id, None)
        self._exited(handle)
