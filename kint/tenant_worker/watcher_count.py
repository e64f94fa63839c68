"""The store watcher's count of the unanchored rows, and whether it could be made.

Why a module of its own: a count that fails (the store locked past the read's busy wait,
unreadable, corrupt; the mirror unreadable: unanchored.CountFailed) is a third answer
beside "rows to push" and "cannot push" (not connected, no data key: None), and the
watcher (watcher.py), its beat and the status each read it. Taken as "cannot push", a
store locked for a moment at a worker's start read as clean, and a store that could never
be counted stayed dirty, work that held the worker past every idle period and recycle.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from kint.tenant_worker.unanchored import CountFailed

log = logging.getLogger("kint.worker")


class WatcherCount:
    """The count the watcher makes (`count`: (changed, deleted), None when the space cannot
    push, CountFailed when the store or the mirror did not read), and while the last one
    failed, what it said and since when. The watcher's thread counts; the main thread
    reads `uncounted` for its beats (one attribute, replaced whole)."""

    def __init__(self, count: Callable[[], tuple[int, int] | None]) -> None:
        self._count = count
        # While the last count failed: what it said, naming the file, and since when
        # (monotonic).
        self.uncounted: tuple[str, float] | None = None

    def __call__(self) -> tuple[int, int] | None:
        """The count, None when it failed too: `uncounted` says why, and the first failure
        of a spell says, once, what that leaves (the count's own line named the file and
        the error: sessions._changes_to_push)."""
        try:
            counts = self._count()
        except CountFailed as err:
            said = self.uncounted
            # The latest reason (a lock may give way to a damaged file), since the first.
            self.uncounted = (str(err), said[1] if said is not None else time.monotonic())
            if said is None:
                log.warning("watcher: the store cannot be counted; it stays dirty, and until "
                            "it can be counted it keeps the worker from neither its idle "
                            "exit nor a recycle (a later watcher counts it again)")
            return None
        self.uncounted = None
        return counts

    def for_beat(self, now: float) -> dict[str, Any] | None:
        """Why the store cannot be counted, and for how long: the beat's
        `watcher_uncounted` (`kint supervisor status`, `kint status`, memory_status)."""
        uncounted = self.uncounted
        if uncounted is None:
            return None
        return {"message": uncounted[0], "age_s": round(max(0.0, now - uncounted[1]), 3)}
