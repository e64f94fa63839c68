"""The watcher (docs/how-it-works.md, "When the watcher pushes, and when a push is held"):
one per space, in the space's worker, however many agent sessions use the store.

Its timings are read at every tick (watcher_timings.py), so a change takes effect without
a restart: the newest kint-server session's (sent on attach, from the harness's MCP
configuration), else the space's settings (config.toml, the supervisor's environment, the
defaults). A session's attach or detach wakes the wait between ticks (`retime`), so a
shorter poll applies at once.

Every KINT_POLL_SECONDS it reads the modification time of the store and its -wal; a change
marks the store dirty. It pushes (through the hold) once the store has stayed unchanged
for KINT_QUIET_SECONDS, or, checked at most once a minute while dirty, when the estimated
unanchored change (400 bytes a row) is more than KINT_SIZE_TRIGGER_BYTES. When that diff finds
nothing unanchored, the dirty mark is cleared. It pushes nothing while the machine is not
connected or the data key is not cached, and after a held push it waits for the next store
change instead of retrying (one held within 2 s of the store's last write is looked at
once more once that write is 2 s old: below). After a push that failed otherwise it waits
out a backoff (push_backoff.py) before it tries again, however the store changes meanwhile;
any push of the space that goes through, its own included, ends that wait
(`push.went_through`, the one place every successful push passes). An op of the space this
worker runs (pull, push, connect, rekey, settlement) is no failure but a turn to wait for
(`_op_runs`); a BUSY from the head lock's file (another kint process) is a failure. Nor is
the worker's stop, which no push outlives: the worker stops its watcher as the stop begins
(`stop`, beside HeadTurn.stop in process.py), so no push comes due in the grace and the
watcher ticks no more; a store with rows it has not pushed is said, once, to be left for the
worker's next start if that start can push them (by `start` as its count ends, if the stop
met that count; by `tick` as it ends, if the stop met a tick, which may have marked the store
dirty or found nothing left since). Of a push of its own under way only its end is logged
(refused by the stop's gate, head_lock.TurnStopped, as no failure, if not yet at the
space's turn, or still waiting for another process's head lock).

The dirty mark is cleared (and a held push's signature kept) only for a signature read two
seconds or more after the store's files last changed (store.SettledRule, the rule the
status counts keep to): a commit within one tick of the files' clock, inside the size a
restarted WAL had, leaves their times and sizes as they were, so a push (or the start's
count) that read its rows just before it was taken for the whole change, and that commit
was never pushed until the next write. Such a store stays dirty, and is looked at once more
when its signature tells every later commit: counted (clean if nothing is left), or a held
push tried again by the usual rules (past the quiet period, or past the size trigger),
once, not at every tick till then. A signature ahead of the clock tells once it has stood
two seconds (the monotonic clock); once the clock comes within two seconds of its times it
no longer does, and a store clean (or a push held) at it is looked at once more in the same
way (as the status counts are counted again). The wait between ticks ends for that look as
the signature tells (`_run`), not at the next poll: meanwhile the store shows dirty, at
most two seconds and a beat after a worker's start or a push.

A count that fails (the store locked past the read's busy wait, unreadable, corrupt; the
mirror unreadable: unanchored.CountFailed) is not a clean store. The start's is owed and
made again, further apart while it fails for the same reason (watcher_count.py), where a
store locked for a moment was read as clean and the rows an earlier session left waited
for the next write; a dirty store that cannot be counted is named in the log and the beat.
One that cannot be counted for good (no database, damaged, denied) keeps no idle exit
waiting, nor a recycle while no session is attached (`work_left`), where it held the
worker for good; one that may be counted later (a lock) is work the worker keeps; one the
space cannot push from (no cached data key) is none once no session is attached.

Here the ticks, the counts that mark the store dirty or clean, and the start; the push and
the stop in watcher_push.py, the owed look in watcher_look.py, the count's answer in
watcher_count.py, the timings in watcher_timings.py.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from kint.store_denied import DENIED_HINT, denied_message, denied_reason
from kint.tenant_worker.changes import ESTIMATED_BYTES_PER_ROW
from kint.tenant_worker.push_backoff import PushBackoff
from kint.tenant_worker.store import SettledRule, settled, store_signature
from kint.tenant_worker.watcher_count import RETRY_CAP_TICKS, WatcherCount
from kint.tenant_worker.watcher_look import OwedLook
from kint.tenant_worker.watcher_push import WatcherPush
from kint.tenant_worker.watcher_timings import WatcherTimings, config_generation

log = logging.getLogger("kint.worker")

SIZE_CHECK_INTERVAL_S = 60.0


class Watcher(OwedLook, WatcherPush):
    """The store watcher of one space (the module's docstring); its owed look and its push
    and stop are the two mixins', which read and set the marks this class owns."""

    def __init__(self, db: str, count_unanchored: Callable[[], tuple[int, int] | None],
                 push: Callable[[str], Any], timing: Callable[[str], Any] | None = None,
                 generation: Callable[[], int] = config_generation,
                 settled: Callable[[], None] = lambda: None,
                 own_op: Callable[[], tuple[str, float] | None] = lambda: None,
                 can_push: Callable[[], bool] = lambda: False) -> None:
        self.db = db
        self.timings = WatcherTimings(timing)  # read at each use (watcher_timings.py)
        # A changed configuration may have mended what made a push fail: it ends the wait.
        self._generation = generation
        self._seen_generation = generation()
        self.backoff = PushBackoff()
        # (changed, deleted), or None when it cannot push, the count failed (its
        # `uncounted` then says why) or a failed count's next try is not due yet
        # (watcher_count.py).
        self.counting = WatcherCount(count_unanchored, can_push)
        self._push = push  # raises when the push did not go through
        # Told when the store is clean again (pushed, or nothing left to push): the worker
        # beats at once, since no request or answer marks that its work is done.
        self._settled = settled
        # The head-moving op this worker runs for the space (ctx.head_op_began: its name,
        # when it began) and the last one a tick waited for: one line per op, told by when.
        self._own_op = own_op
        self._waited_for: tuple[str, float] | None = None
        self._stop = threading.Event()
        # Read under it: a push of its own begun (`_fire`), a tick running (`tick`), the
        # stop's reason till it is said.
        self._push_lock = threading.Lock()
        self._pushing = self._ticking = False
        self._stopped_why: str | None = None
        # Set when the timings may have changed: the wait is measured again (`retime`).
        self._retimed = threading.Event()
        self.dirty = False
        self._last_change = time.monotonic()
        self._last_size_check = float("-inf")  # none yet: due at once, whenever the box booted
        self._held_at_signature: tuple[int, ...] | None = None
        # A signature at which a count found nothing left, a push went through or was
        # held, before it told every later commit (`_rule`): the store stays dirty, looked
        # at once more when that signature tells (`_look_again`), not at every tick.
        self._untold: tuple[int, ...] | None = None
        self._rule = SettledRule()
        # The last signature that told every later commit (`_rule`), while it is the store's.
        self._told_at: tuple[int, ...] | None = None
        # The `_untold` signature the wait last ended early for (`_run`): one wake for each.
        self._woke_for: tuple[int, ...] | None = None
        # The start's count of what an earlier session left failed: made again until it
        # can be (`_start_count`, WatcherCount), unless a change starts a dirty spell first.
        self._start_owed = False
        # While the store cannot be reached by this user, what the OS said (`_read_signature`).
        self.closed: str | None = None
        self._signature: tuple[int, ...] | None = None
        self._signature = self._read_signature()
        self._thread = threading.Thread(target=self._run, name="kint-watcher", daemon=True)

    def _read_signature(self) -> tuple[int, ...] | None:
        """The store's files as the heartbeat's count reads them (`store_signature`): an
        empty WAL, which kint's own read-only connection leaves, is no change. A store this
        user may not open (a folder on its path it may not search, or the store, its -wal
        or -shm it may not read: kint.store_denied) is a lasting condition, not a failed
        tick: one warning when it begins, one when it ends, and meanwhile the store reads
        as unchanged (nothing can be pushed from it). A file it may not read still stats,
        so the OS is asked at every tick: a few stats, once a poll."""
        try:
            signature = store_signature(self.db)
            closed = denied_reason(self.db) if signature is not None else None
        except PermissionError as err:
            signature, closed = None, denied_reason(self.db) or err.strerror
        if closed is not None:
            if self.closed is None:
                self.closed = closed
                log.warning("watcher: %s; no change to it is seen until it can be read (%s)",
                            denied_message(self.db, closed), DENIED_HINT)
            return self._signature
        if self.closed is not None:
            self.closed = None
            log.warning("watcher: the store %s can be read by this user again; its changes "
                        "are watched from now on", self.db)
        return signature

    def work_left(self, sessions: int) -> bool:
        """Whether the store holds work this worker must finish before a stop (the beat's
        `has_work`, which keeps it from an idle stop and a recycle): dirty, unless no
        session (of `sessions` attached) is left and this worker may never push it (the
        module's docstring: WatcherCount.lasting, or `cannot_push` till `recheck` finds the
        key back). Kept as work, it held the worker past every idle period and recycle;
        stopped idle it loses nothing, the next session's watcher counts it again. With a
        session attached the stop could only be a recycle, whose successor's start refuses
        a store that is no database (a crash after crash, then quarantine), or marks
        nothing it cannot push (its rows then wait for a write once the key is back): the
        worker goes on serving the session."""
        counting = self.counting
        return self.dirty and (sessions > 0 or not (counting.lasting or counting.cannot_push))

    def start(self) -> None:
        """Count what an earlier session left unanchored (`_start_count`), unless the
        worker's stop stopped this watcher first (sessions.attach): no count, no thread. A
        stop the count met is said as the count ends (`_say_rows_left`), and no thread."""
        if self._stop.is_set():
            return
        self.timings.log()
        seen = time.monotonic()
        sig = self._signature = self._read_signature()
        self._start_count(sig, self._rule.tells(sig, settled(sig), seen))
        with self._push_lock:  # a stop the count met (it saw no dirty store) is said now
            self._say_rows_left()
            if not self._stop.is_set():
                self._thread.start()

    def _start_count(self, sig: tuple[int, ...] | None,
                     told: bool) -> tuple[int, int] | None:
        """The start's count, or a tick's when the start's failed. Rows left: dirty, pushed at
        the next quiet period (from the start). A count that failed leaves the store dirty and
        the count owed (the module's docstring). Nothing left: clean, but only at a signature
        that told every later commit, else dirty and looked at once more when it tells. None
        (the space cannot push: not connected, no data key): no mark, which with a session
        attached would be work no count clears while the key stays away, keeping the worker
        from a recycle. Returns the count (a tick's push uses it, not a second diff)."""
        counts = self.counting()
        if self.counting.uncounted is not None:
            if not self._start_owed:
                log.info("watcher: what an earlier session left unanchored could not be "
                         "counted; it is counted again, at most %d ticks apart, until it "
                         "can be", RETRY_CAP_TICKS)
            self.dirty = self._start_owed = True
            return None
        owed, self._start_owed = self._start_owed, False
        if counts and (counts[0] or counts[1]):
            self.dirty = True
            log.info("watcher: %d changed and %d deleted row(s) were left unanchored by an "
                     "earlier session%s", *counts, "" if self._stop.is_set() else
                     "; they are pushed at the next quiet period")  # else the stop's line
        elif counts is None:
            if owed:
                self.dirty = False
                self._settled()
        elif not told:
            self.dirty, self._untold = True, sig
        elif owed:
            self._nothing_left(sig, told)
        return counts

    def retime(self) -> None:
        """A session attached or left: a shorter poll applies now, not at the end of the
        longer wait in progress (up to 15 s by default, or a session's); else it ends as due."""
        self._retimed.set()

    def _run(self) -> None:
        """A tick every poll, and one more as a signature the store was found clean (or a
        push held) at tells every later commit (`_look_due`; the module's docstring)."""
        ticked = time.monotonic()
        while not self._stop.is_set():
            self._retimed.clear()  # before the poll is read: a later retime() wakes the wait
            now = time.monotonic()
            due = self._look_due(now)
            left = min(ticked + self.timings.poll_s, due) - now
            if left > 0:
                self._retimed.wait(left)
                continue
            if due <= now:
                self._woke_for = self._untold
            try:
                self.tick(time.monotonic())
            except Exception:  # noqa: BLE001 - the watcher must outlive one bad tick
                log.exception("watcher tick failed")
            ticked = time.monotonic()

    def tick(self, now: float) -> None:
        """One tick (`_tick`). A stop that meets it leaves its line to the tick's end: begun
        after the tick read a changed store and before it marked it dirty, the stop saw a
        clean store and the line went unsaid; begun as its count ran, the stop said it of
        a store the count then found clean. Said at the end, it is said of what is left."""
        with self._push_lock:
            self._ticking = True
        try:
            self._tick(now)
        finally:
            with self._push_lock:
                self._ticking = False
                self._say_rows_left()

    def _tick(self, now: float) -> None:
        self.counting.ticked()  # a failed count's next try may be due (watcher_count.py)
        self.timings.log()
        generation = self._generation()
        if generation != self._seen_generation:
            self._seen_generation = generation
            self.backoff.forget("the configuration changed, so the push is tried again "
                                "without waiting")
        sig = self._read_signature()
        keep = settled(sig)
        told = self._rule.tells(sig, keep, now)  # as it was read
        if sig != self._signature:
            self._signature = sig
            if not self.dirty:  # one line per dirty spell, not one per poll of a busy store
                log.info("watcher: store changed")
            self.dirty = True
            self._last_change = now
            self._untold = None
            self._start_owed = False  # this change's spell counts by the usual rules
        elif keep is False and sig == self._told_at:
            self._doubted(sig, now)
        if told:
            self._told_at = sig
        if self.dirty:
            self.counting.recheck()  # the data key back: work again at once (`work_left`)
        counted = None  # the owed start's count, made in this tick: not made again
        if self._start_owed:
            counted = self._start_count(sig, told)
            if self._start_owed:
                return
        looked = self.dirty and sig == self._untold  # a store found clean or held: one look
        if looked and not self._look_again(told):
            return
        if not self.dirty or sig == self._held_at_signature:
            return
        if now - self._last_change >= self.timings.quiet_s:
            self._fire("quiet trigger", sig, told, now, counted)
            return
        # A check is used up only by a count made (`due`): one a failed count's wait put
        # off came a minute later, past the RETRY_CAP_TICKS the wait promises.
        if counted or ((looked or now - self._last_size_check >= SIZE_CHECK_INTERVAL_S)
                       and self.counting.due):
            if counted is None and self._op_runs():
                self._turn_taken("size trigger")  # not used up, nor a look's count
                return
            self._last_size_check = now
            counts = counted or self.counting()
            if counts is None:
                return
            if counts == (0, 0):
                self._nothing_left(sig, told)
            elif (counts[0] + counts[1]) * ESTIMATED_BYTES_PER_ROW > self.timings.size_trigger:
                # The count just made, not a second diff of the whole store: nothing since
                # changes what it counted against (a write since is the next tick's change,
                # and the push reads the store itself).
                self._fire("size trigger", sig, told, now, counts)

    def _settle(self, sig: tuple[int, ...] | None, told: bool) -> None:
        """Clear the dirty mark only if the store has not changed since `sig` was read: a
        write that lands while the diff or the push runs must not be lost. Only a
        signature that `told` every commit after it says so (the module's docstring)."""
        self._signature = sig
        if not told:
            self._untold = sig  # looked at once more when it tells (`_look_again`)
        elif self._read_signature() == sig:
            was_dirty, self.dirty = self.dirty, False
            if was_dirty:
                self._settled()

    def _nothing_left(self, sig: tuple[int, ...] | None, told: bool) -> None:
        """The store holds nothing unanchored (another machine's pull replayed, the rows
        were put back): no failed push is left to try again."""
        self.backoff.forget("nothing is left to push, so the failed push is dropped")
        self._settle(sig, told)
