"""The store watcher's count of the unanchored rows, and whether it could be made.

Why a module of its own: a count that fails (the store locked past the read's busy wait,
unreadable, corrupt; the mirror unreadable: unanchored.CountFailed) is a third answer
beside "rows to push" and "cannot push" (not connected, no data key: None), and the
watcher (watcher.py), its beat and the status each read it. Taken as "cannot push", a
store locked for a moment at a worker's start read as clean, and a store that could never
be counted stayed dirty, work that held the worker past every idle period and recycle.
Which of the two a failure is (`lasting`) decides whether the worker keeps the store: one
that may pass by itself (a lock) is still work, one that lasts until someone mends a file
is not.

A count that failed is not made again at every tick while it keeps failing for the same
reason: each try may hold the watcher's thread in the read's busy wait (2 s:
store.READ_BUSY_WAIT_S) while another process keeps the store locked, tick after tick. The
next try comes 1, 2, 4 ticks on, then every RETRY_CAP_TICKS ticks (counted in ticks, not
seconds, so a poll changed meanwhile still bounds it): a lock let go is counted, and the
rows pushed, at most RETRY_CAP_TICKS ticks later (a minute at the default 15 s poll, the
size check's own interval), where a signature change could not be waited for (the lock
leaves the store's files as they were). A new reason tries again at the next tick.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, NamedTuple

from kint.tenant_worker.unanchored import CountFailed

log = logging.getLogger("kint.worker")

# The most ticks between two tries of a count that keeps failing for the same reason.
RETRY_CAP_TICKS = 4


class Uncounted(NamedTuple):
    """Why the last count failed (naming the file), since when (monotonic: the spell's
    first failure), and whether it lasts until someone mends a file (CountFailed.lasting)."""

    message: str
    since: float
    lasting: bool


class WatcherCount:
    """The count the watcher makes (`count`: (changed, deleted), None when the space cannot
    push, CountFailed when the store or the mirror did not read), and while the last one
    failed, what it said and since when. The watcher's thread counts; the main thread
    reads `uncounted` for its beats (one attribute, replaced whole)."""

    def __init__(self, count: Callable[[], tuple[int, int] | None],
                 can_push: Callable[[], bool] = lambda: False) -> None:
        self._count = count
        # The cheap half of `count`: whether it would get past "cannot push" (`recheck`).
        self._can_push = can_push
        # While the last count failed: what it said, since when, whether for good.
        self.uncounted: Uncounted | None = None
        # The last count answered None, and no tick since found the key back (`recheck`):
        # the space cannot push (not connected, no cached data key), so a dirty store is no
        # work this worker can finish (Watcher.work_left).
        self.cannot_push = False
        self._failures = 0  # failed in a row for the same reason
        self._wait_ticks = 0  # ticks to begin before the next try (the module's docstring)

    def ticked(self) -> None:
        """A watcher tick began: one fewer to wait before a failed count is tried again."""
        if self._wait_ticks:
            self._wait_ticks -= 1

    def recheck(self) -> None:
        """A dirty store's tick while the last count answered None: whether the space can
        push now asked again, by what the count asks before its diff (the enrolment, the
        cached data key, the mirror: a few small files), so that the key's return makes
        the store the worker's work at this tick. Left to the next count, made before the
        quiet period only by the size check, `cannot_push` stayed stale up to a minute, in
        which the idle stop could take rows the worker could now push."""
        if self.cannot_push and self._can_push():
            self.cannot_push = False

    @property
    def due(self) -> bool:
        """Whether a call now makes the count (no failed count's wait runs): the watcher's
        size check is used up only by a count made, else a lock let go during the wait
        left the store unchecked for SIZE_CHECK_INTERVAL_S, past RETRY_CAP_TICKS."""
        return not self._wait_ticks

    def __call__(self) -> tuple[int, int] | None:
        """The count, None when it failed too, or when the last one failed and its next
        try is not due (the module's docstring): `uncounted` says why, and the first
        failure of a spell says, once, what that leaves (the count's own line named the
        file and the error: sessions._changes_to_push)."""
        if self._wait_ticks:
            return None
        try:
            counts = self._count()
        except CountFailed as err:
            said = self.uncounted
            again = said is not None and (said.message, said.lasting) == (str(err), err.lasting)
            self._failures = self._failures + 1 if again else 1
            self._wait_ticks = min(2 ** (self._failures - 1), RETRY_CAP_TICKS)
            self.cannot_push = False  # a failure, not a key absent: sessions._changes_to_push
            # The latest reason (a lock may give way to a damaged file), since the first.
            self.uncounted = Uncounted(str(err), said.since if said else time.monotonic(),
                                       err.lasting)
            if said is None or said.lasting != err.lasting:
                log.warning("watcher: the store cannot be counted; it stays dirty, and %s",
                            "until it can be it no longer holds the worker from its idle "
                            "exit, nor from a recycle while no session is attached (a "
                            "later watcher counts it again)" if err.lasting else "the "
                            "worker keeps it (no idle exit, no recycle) until it is counted "
                            "and pushed")
            return None
        self.uncounted, self._failures, self.cannot_push = None, 0, counts is None
        return counts

    @property
    def lasting(self) -> bool:
        """Whether the last count failed for good (until someone mends a file)."""
        uncounted = self.uncounted
        return uncounted is not None and uncounted.lasting

    def for_beat(self, now: float) -> dict[str, Any] | None:
        """Why the store cannot be counted, for how long, and whether for good: the beat's
        `watcher_uncounted` (`kint supervisor status`, `kint status`, memory_status)."""
        uncounted = self.uncounted
        if uncounted is None:
            return None
        return {"message": uncounted.message,
                "age_s": round(max(0.0, now - uncounted.since), 3),
                "lasting": uncounted.lasting}
