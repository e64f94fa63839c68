"""How much memory this worker holds, for the supervisor's recycling.

A worker shares most of its pages with the forkserver it was forked from, but the pages its
code writes become its own: connecting, signing a push and reading through web3 leave a
worker holding ~22 MiB of its own (22.3 MiB median after one connect and one push,
bench/RESULTS.md "Session 38"; ~26 after 180 verifies besides) where one that only verified
holds ~9-19, and nothing in Python can give those pages back (they are live interpreter
state, not garbage). So, as Celery's `worker_max_memory_per_child` does, a worker over
`KINT_WORKER_RECYCLE_MIB` is replaced: the supervisor stops it once it has been idle a while
and the next request starts a fresh one (kint.supervisor.lifecycle).

The figure is the worker's own memory, its unique set size (USS: the private pages, which
no other process maps and which its exit would give back), not its PSS: PSS adds a share of
every page the worker still shares with the forkserver, which is ~25 MiB with one worker
and ~1 with sixty, so a limit on it would recycle a lone fresh worker for nothing. Reading
it walks every mapping of the process (`/proc/self/smaps_rollup`, ~1.7 ms once web3 is
loaded), too dear for every beat: it is read once per quiet spell after work, when the
number can matter. Where /proc is missing (macOS) it is never read and no worker is
recycled.
"""

from __future__ import annotations

import time

# Idle this long after its last op before a worker reads its memory; the supervisor waits
# as long before recycling, so a burst of calls is never cut by a restart.
QUIET_SECONDS = 5.0
_ROLLUP = "/proc/self/smaps_rollup"


def own_mib(path: str = _ROLLUP) -> float | None:
    """This process's private memory (Private_Clean + Private_Dirty) in MiB, or None
    where the kernel does not say."""
    kib = 0
    seen = False
    try:
        with open(path, "rb") as fh:
            for line in fh:
                if line.startswith(b"Private_"):
                    kib += int(line.split()[1])
                    seen = True
    except (OSError, ValueError, IndexError):
        return None
    return kib / 1024.0 if seen else None


class MemoryReading:
    """The worker's own memory as last read, and when to read it again: after work, once
    the worker has been quiet for QUIET_SECONDS. Ops mark work from pool threads; the main
    thread reads, at a beat."""

    def __init__(self) -> None:
        self.own_mib: float | None = None
        self._worked = False
        self._last_work = time.monotonic()

    def worked(self) -> None:
        self._last_work = time.monotonic()
        self._worked = True

    def at_beat(self, now: float, inflight: int) -> float | None:
        """The figure for this beat, read first if the worker has been quiet long enough
        since it last worked."""
        if self._worked and not inflight and now - self._last_work >= QUIET_SECONDS:
            self._worked = False
            read = own_mib()
            self.own_mib = round(read, 1) if read is not None else None
        return self.own_mib
