"""The unanchored count the heartbeat carries (`kint supervisor status`'s UNANCHORED column):
the space's changed and deleted rows since its last anchored epoch, as `kint status` counts
them (`apply_journal.store_changes`: a pull left half-done is not a change).

Counting means exporting every row of the store and diffing it against the mirror: ~0.2 s
for 10,000 rows, far too much for the main thread, which beats and must beat on time. So
the worker remembers the last figure any of its ops made (`kint status`'s, the watcher's,
0 after a push) and the key it holds at: the store's signature (its and its WAL's mtime and
size, read *before* the rows were) and the mirror's head. A beat compares that key with the
one it reads now (two stats, and the mirror's head as cached); the figure is *fresh* while
they match. Otherwise the beat reports the last figure marked stale (`unanchored_stale`,
`~N` in the table: the count before the last change, still the best figure there is, which
reads better than a `-` that flickers with every write) and starts one recount on the op
pool: at most one at a time, only while no op or watcher push runs (it then takes the
thread the last op left idle), and no sooner than RECOUNT_MIN_INTERVAL_S after the last
one ended, or RECOUNT_SPACING times its duration when that is longer.

A recount is not work: it is never counted in flight, never makes the worker beat faster,
and never keeps an idle worker alive (`Worker._has_work` does not look here), so a space
whose agent writes now and then still goes idle and exits, and a worker that only counts
is recycled as any other. Its memory is measured again after it, as after an op.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kint.tenant_worker.statefiles import Mirror
from kint.tenant_worker.store import store_signature

if TYPE_CHECKING:
    from kint.tenant_worker.space import SpaceContext

log = logging.getLogger("kint.worker")

# No recount sooner than this after the last one: a beat comes every 1-3 s, and an agent
# writing continuously would otherwise have its store diffed at every beat; one figure a
# few beats old is as good to a person reading the table.
RECOUNT_MIN_INTERVAL_S = 5.0
# ...nor sooner than this many times the last recount's duration after it: a large store
# (10,000 rows: ~0.2 s here) then costs at most a twentieth of a core however often it
# changes, on a box whose many spaces share few cores.
RECOUNT_SPACING = 20.0

# What a count holds at: the store's signature (None: no store) and the mirror's head.
Key = tuple[tuple[int, ...] | None, int, str]
# The beat's fields before any count, and with no mirror to count against.
_NO_FIGURE: dict[str, Any] = {"unanchored": None, "unanchored_stale": None,
                              "unanchored_age_s": None}


def key_of(signature: tuple[int, ...] | None, mirror: Mirror) -> Key:
    return (signature, mirror.head.seq, mirror.head.digest)


@dataclass(frozen=True)
class Figure:
    """A count (None: no store to count), the key it holds at, and when the signature in
    that key was read (monotonic)."""

    count: int | None
    key: Key
    taken: float


class UnanchoredTally:
    """The last figure and the recount in flight. Ops record from pool threads; the main
    thread reads at each beat; every change is under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._figure: Figure | None = None
        self._recounting = False
        self._next_recount = 0.0
        self._problem: str | None = None

    def counted(self, count: int | None, key: Key, taken: float) -> None:
        """Remember a count made from rows read after `taken`, when the key was read. The
        figure read last wins: a slow recount that ends after a push must not replace the
        push's 0 with what the store held before it."""
        with self._lock:
            if self._figure is None or taken >= self._figure.taken:
                self._figure = Figure(count, key, taken)

    def at_beat(self, now: float, db: str, mirror: Mirror | None,
                may_start: bool) -> tuple[dict[str, Any], bool]:
        """The beat's fields, and whether the caller should start a recount now (it is then
        marked started: the caller must run `recount`). `may_start` is false while the
        worker is busy (an op, or a watcher push, would change what is counted, and the
        recount would take a thread of its own). No mirror (never connected, pulled or
        pushed): nothing to count against, all three fields null."""
        if mirror is None:
            return dict(_NO_FIGURE), False
        key = key_of(store_signature(db), mirror)
        with self._lock:
            figure = self._figure
            fresh = figure is not None and figure.key == key
            start = (may_start and not fresh and not self._recounting
                     and now >= self._next_recount)
            if start:
                self._recounting = True
        if figure is None:
            return dict(_NO_FIGURE), start
        return {"unanchored": figure.count, "unanchored_stale": not fresh,
                "unanchored_age_s": round(max(0.0, now - figure.taken), 3)}, start

    def recount(self, ctx: "SpaceContext") -> None:
        """Count on a pool thread (`at_beat` said to). A failure (a store that does not
        read, a corrupt mirror) leaves the last figure, stale, and is logged once per
        change of what it says: the ops report such trouble by name."""
        from kint.tenant_worker.apply_journal import store_changes

        started = time.monotonic()
        try:
            mirror = ctx.state.mirror()
            if mirror is not None:
                signature = store_signature(ctx.config.db)
                count = None
                if signature is not None:
                    _, local = store_changes(ctx.state, mirror, ctx.ro_connection(),
                                             ctx.config.tenant)
                    count = len(local)
                self.counted(count, key_of(signature, mirror), started)
            self._problem = None
        except Exception as err:  # noqa: BLE001 - the beat carries the last figure, stale
            problem = f"{type(err).__name__}: {err}"
            if problem != self._problem:
                log.info("space %s: cannot count unanchored rows for the heartbeat (%s)",
                         ctx.config.space16, problem)
            self._problem = problem
        finally:
            ended = time.monotonic()
            with self._lock:
                self._recounting = False
                self._next_recount = ended + max(RECOUNT_MIN_INTERVAL_S,
                                                 RECOUNT_SPACING * (ended - started))


def counting_from(db: str) -> tuple[tuple[int, ...] | None, float]:
    """The store's signature and the time, read before an op reads the rows it counts."""
    return store_signature(db), time.monotonic()


def note_count(ctx: "SpaceContext", before: tuple[tuple[int, ...] | None, float],
               mirror: Mirror | None, count: int) -> None:
    """An op counted `count` unanchored changes against `mirror`, from rows it read after
    `before` (`counting_from`): the heartbeat reports it until the store or the head moves."""
    if mirror is not None:
        ctx.unanchored.counted(count, key_of(before[0], mirror), before[1])
