"""The space's unanchored rows: the one place they are counted, the figure the heartbeat
carries, and the one record of why they could not be counted.

Unanchored rows are the rows the store holds otherwise than the mirror (the last anchored
epoch) that a pull left half-done does not explain (`apply_journal.half_done`: those are
that pull's, not changes to push). `count_unanchored` reads them now, on the caller's
thread and its read-only connection, and every count it makes is the heartbeat's figure
from then on. Its three readers need different things of it:

- `kint status` and `kint doctor`: exact at the time of the call, so they count; a store or
  a mirror that does not read is raised to them, and they report it by name.
- the store watcher (sessions.py): the whole diff, a half-done pull's rows included, to
  decide whether to push; trouble means "do not push", said once per reason.
- the heartbeat (`kint supervisor status`'s UNANCHORED column), below.

Counting means exporting every row of the store and diffing it against the mirror: ~0.2 s
for 10,000 rows, far too much for the main thread, which beats and must beat on time. So
the worker remembers the last figure any of its ops made (`kint status`'s, the watcher's,
0 after a push) and the key it holds at: the store's signature (its and its WAL's mtime and
size, read *before* the rows were) and the mirror's head. A beat compares that key with the
one it reads now (two stats, and the mirror's head as cached); the figure is *fresh* while
they match, if its signature was read two seconds or more after the store's files last
changed (store.SettledRule, the rule the status counts keep to: a commit within a tick of
the files' clock may leave their times and sizes as they were, so a figure counted then
could be shown fresh after a change it never saw; such a figure is recounted), and while
that signature still tells every commit after it (one ahead of the clock, which told by
standing steady, no longer does once the clock comes within two seconds of its times:
recounted, as the status counts are). Otherwise the beat reports the last figure marked
stale (`unanchored_stale`, `~N` in the table: the count before the last change, still the
best figure there is, which reads better than a `-` that flickers with every write) and
starts one recount on the op pool: at most one at a time, only while no op or watcher push
runs (it then takes the thread the last op left idle), and no sooner than
RECOUNT_MIN_INTERVAL_S after the last one ended, or RECOUNT_SPACING times its duration when
that is longer.

A recount is not work: it is never counted in flight, never makes the worker beat faster,
and never keeps an idle worker alive (`Worker._has_work` does not look here), so a space
whose agent writes now and then still goes idle and exits, and a worker that only counts
is recycled as any other. Its memory is measured again after it, as after an op.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kint.store_denied import denied_reason
from kint.tenant_worker.state_format import CorruptStateFile
from kint.tenant_worker.statefiles import Mirror
from kint.tenant_worker.store import SettledRule, settled, store_signature
from kint.tenant_worker.store_errors import is_no_database, unreadable

if TYPE_CHECKING:
    from kint.tenant_worker.apply_journal import HalfDone
    from kint.tenant_worker.changes import Changes
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

# The counters that log why they could not count, each its own line, once per change of
# what the trouble says (the log lives under KINT_HOME and counts against Sibyl's cap),
# and what each says when it counts again (None: nothing). Each keeps its own last reason:
# the watcher's (no data key) is not the heartbeat's, and one shared reason would be said
# again at every turn between the two.
WATCHER = "watcher"
HEARTBEAT = "heartbeat"
_CANNOT = {WATCHER: "watcher: cannot count unanchored rows ({problem})",
           HEARTBEAT: "space {space}: cannot count unanchored rows for the heartbeat "
                      "({problem})"}
_AGAIN = {WATCHER: "watcher: counting unanchored rows again", HEARTBEAT: None}


class CountFailed(Exception):
    """The watcher's count could not be made: the store, the mirror or the pull journal did
    not read, or the enrolment or the key cache did not for a moment (no open files left).
    Its text names the file and says why (`named`). Not "cannot push" (not connected, no
    data key), which the count answers with None: a store that may hold rows to push, but
    cannot be counted, is not clean. `lasting`: it cannot be counted until
    someone mends the file (`count_fails_for_good`), so it is no work the worker can finish;
    otherwise (a lock held past the busy wait) it is, and the worker keeps it."""

    def __init__(self, message: str, lasting: bool) -> None:
        super().__init__(message)
        self.lasting = lasting


def count_fails_for_good(err: Exception, db: str) -> bool:
    """Whether a count that failed with `err` fails until someone acts on a file: the store
    no database or damaged, this user not allowed to read it (kint.store_denied), a state
    file the count reads corrupt. Anything else may pass by itself: another process's lock
    held past the busy wait, the process out of file descriptors for a moment, a reader
    that did not open, an I/O error. Taken as lasting, such a failure let the idle stop
    take a dirty store whose rows were never pushed; nothing pushed them until the next
    session. The lasting ones are told by the file, not by an errno: SQLite's errors (a
    lock, "unable to open database file") carry none. A read of the enrolment or the key
    cache is asked the other way round (sessions._key_read_may_pass: may it pass, by its
    errno; if not, the key is taken as not there)."""
    if isinstance(err, CorruptStateFile):
        return True
    if isinstance(err, sqlite3.DatabaseError) and is_no_database(err):
        return True
    return denied_reason(db) is not None


def named(err: Exception, db: str) -> Exception:
    """`err` as one that names what failed: SQLite's own errors say neither the store nor
    their code ("file is not a database"), so they become store_errors.unreadable's (StoreLocked,
    StoreDenied, StoreUnreadable, each naming the store); a state file's already names
    itself (CorruptStateFile)."""
    if isinstance(err, sqlite3.DatabaseError):
        return unreadable(db, err)
    return err


def key_of(signature: tuple[int, ...] | None, mirror: Mirror) -> Key:
    return (signature, mirror.head.seq, mirror.head.digest)


@dataclass(frozen=True)
class StoreCount:
    """The store against the mirror: every row change (`diff`, what a push would anchor),
    the pull left half-done, if any, and the changes it does not explain (`unanchored`)."""

    diff: "Changes"
    half_done: "HalfDone | None"
    unanchored: "Changes"


def count_unanchored(ctx: "SpaceContext", mirror: Mirror | None) -> StoreCount:
    """Count now, on this thread's read-only connection (the caller has seen the store
    exist), and make it the heartbeat's figure. No mirror (doctor, before any epoch): every
    row is a change, and the heartbeat has nothing to count against. Raises what reading
    the store or the journal raises."""
    from kint.rows.export import export_rows
    from kint.tenant_worker.apply_journal import half_done
    from kint.tenant_worker.changes import diff

    before = counting_from(ctx.config.db)
    with ctx.reading() as conn:
        changes = diff(mirror, export_rows(conn, ctx.config.tenant))
    half, local = half_done(ctx.state, mirror, changes)
    note_count(ctx, before, mirror, len(local))
    return StoreCount(changes, half, local)


# The store's signature, when it was read (monotonic) and whether it had settled then
# (store.settled), read before an op reads the rows it counts.
Before = tuple[tuple[int, ...] | None, float, bool | None]


def counting_from(db: str) -> Before:
    """The store's signature, the time, and whether the signature had settled, read
    before an op reads the rows it counts."""
    signature = store_signature(db)
    return signature, time.monotonic(), settled(signature)


def note_count(ctx: "SpaceContext", before: Before, mirror: Mirror | None,
               unanchored: int) -> None:
    """An op counted `unanchored` changes against `mirror` (a push: 0), from rows it read
    after `before` (`counting_from`): the heartbeat reports it until the store or the head
    moves."""
    if mirror is not None:
        ctx.unanchored.counted(unanchored, key_of(before[0], mirror), before[1], before[2])


@dataclass(frozen=True)
class Figure:
    """A count (None: no store to count), the key it holds at, when the signature in
    that key was read (monotonic), and whether that signature tells every commit after it
    (store.SettledRule): a figure that does not is never fresh."""

    count: int | None
    key: Key
    taken: float
    told: bool


class UnanchoredTally:
    """The last figure, the recount in flight, and the reason each counter last gave for
    not counting. Ops record from pool threads, the watcher from its own; the main thread
    reads at each beat; every change is under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._figure: Figure | None = None
        self._recounting = False
        self._next_recount = 0.0
        self._troubles: dict[str, str] = {}
        self._rule = SettledRule()

    def counted(self, count: int | None, key: Key, taken: float, keep: bool | None) -> None:
        """Remember a count made from rows read after `taken`, when the key was read and
        found `keep` (store.settled). The figure read last wins: a slow recount that ends
        after a push must not replace the push's 0 with what the store held before it."""
        with self._lock:
            told = self._rule.tells(key[0], keep, taken)
            if self._figure is None or taken >= self._figure.taken:
                self._figure = Figure(count, key, taken, told)

    def cannot_count(self, counter: str, err: Exception, space16: str) -> None:
        """`counter` (WATCHER, HEARTBEAT) could not count: logged unless it said the same
        last time."""
        problem = f"{type(err).__name__}: {err}"
        with self._lock:
            said, self._troubles[counter] = self._troubles.get(counter), problem
        if problem != said:
            log.info("%s", _CANNOT[counter].format(space=space16, problem=problem))

    def counts_again(self, counter: str) -> None:
        """`counter` counted: its next trouble is said again, whatever it says."""
        with self._lock:
            said = self._troubles.pop(counter, None)
        again = _AGAIN[counter]
        if said is not None and again is not None:
            log.info("%s", again)

    def at_beat(self, now: float, db: str, mirror: Mirror | None,
                may_start: bool) -> tuple[dict[str, Any], bool]:
        """The beat's fields, and whether the caller should start a recount now (it is then
        marked started: the caller must run `recount`). `may_start` is false while the
        worker is busy (an op, or a watcher push, would change what is counted, and the
        recount would take a thread of its own). No mirror (never connected, pulled or
        pushed): nothing to count against, all three fields null."""
        if mirror is None:
            return dict(_NO_FIGURE), False
        # A store closed to this user (a folder on its path it may not search, or a file
        # it may not read, which still stats: kint.store_denied) has no key: the last
        # figure, stale, and no recount that could only fail. The watcher says it, once.
        try:
            signature = store_signature(db)
            closed = signature is not None and denied_reason(db) is not None
        except PermissionError:
            signature, closed = None, True
        key: Key | None = None if closed else key_of(signature, mirror)
        with self._lock:
            figure = self._figure
            # The figure's signature told every later commit when counted; one that did so
            # by standing steady ahead of the clock stops once the clock nears its times
            # (StoreReader's `keep is not False`). Asked only of a figure that would be
            # kept; no system call: the wall clock's vDSO read.
            fresh = (figure is not None and figure.told and figure.key == key
                     and settled(signature) is not False)
            start = (key is not None and may_start and not fresh and not self._recounting
                     and now >= self._next_recount)
            if start:
                self._recounting = True
        if figure is None:
            return dict(_NO_FIGURE), start
        return {"unanchored": figure.count, "unanchored_stale": not fresh,
                "unanchored_age_s": round(max(0.0, now - figure.taken), 3)}, start

    def recount(self, ctx: "SpaceContext") -> None:
        """Count on a pool thread (`at_beat` said to). A failure (a store that does not
        read, a corrupt mirror) leaves the last figure, stale, and is said once per reason:
        the ops report such trouble by name."""
        started = time.monotonic()
        try:
            mirror = ctx.state.mirror()
            if mirror is not None:
                if store_signature(ctx.config.db) is None:
                    self.counted(None, key_of(None, mirror), started, True)  # no store
                else:
                    count_unanchored(ctx, mirror)
            self.counts_again(HEARTBEAT)
        except Exception as err:  # noqa: BLE001 - the beat carries the last figure, stale
            self.cannot_count(HEARTBEAT, err, ctx.config.space16)
        finally:
            ended = time.monotonic()
            with self._lock:
                self._recounting = False
                self._next_recount = ended + max(RECOUNT_MIN_INTERVAL_S,
                                                 RECOUNT_SPACING * (ended - started))
