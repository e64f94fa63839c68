"""Read-only access to the space's Sibyl store.

kint never writes Sibyl's file behind Sibyl's back: every read here goes through a
`mode=ro` SQLite connection. Row counts are cached against the store's and its WAL's
size and modification time, so a status call on an unchanged store costs a few stats; a
count read within two seconds of the files' last change is not kept (`settled`).

One exception, SQLite's own crash recovery: a writer killed mid-transaction (an agent, a
restore cut short) leaves a hot rollback journal, which no read-only connection may undo,
so every read-only read fails with "attempt to write a readonly database" until a
read-write connection opens the store and SQLite rolls the cut-short transaction back, as
Sibyl's next open would. A worker that started there failed its start check every time
and its space was quarantined; it now opens the store read-write once to let SQLite do
that, at its start (`check_openable`, which `kint doctor`'s store check calls too) and when
its row counts meet it, changing nothing SQLite would not.

What a failed read raises, and what SQLite's error says of the store, is in
store_errors.py.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
import urllib.parse
from contextlib import closing
from dataclasses import dataclass

from kint.spaces import store_problem
from kint.store_denied import denied_message, denied_reason
from kint.tenant_worker.store_errors import (StoreDenied, StoreLocked, StoreNotCounted,
                                            StoreUnreadable, cannot_open, sqlite_code,
                                            unreadable)

# The four tiers the SDK writes, and the table behind each.
TIER_TABLES: dict[str, str] = {
    "entity": "entities",
    "state": "state_documents",
    "reference": "reference_documents",
    "journal": "journal_events",
}

log = logging.getLogger("kint.worker")

# SQLite's extended codes for a read-only connection that found a transaction cut short by
# a killed writer: a hot rollback journal, or a WAL whose index must be rebuilt. Only a
# read-write connection can recover it (the module's docstring).
_CUT_SHORT_CODES = frozenset({sqlite3.SQLITE_READONLY_ROLLBACK,
                              sqlite3.SQLITE_READONLY_RECOVERY})


@dataclass(frozen=True)
class StoreFacts:
    exists: bool
    rows: dict[str, int] | None
    size_bytes: int | None
    # The store's st_dev: `status` asks a disk's free room once when KINT_HOME is on it too.
    device: int | None = None


def check_openable(db: str) -> "StoreLocked | None":
    """Fail fast at worker start when the store path can never work.

    A missing store is fine (Sibyl creates it on the first write), and so is one another
    process holds locked for now (returned, for doctor to say so); a folder, a special
    file or a file that is not SQLite is not, and no restart will fix it. One this user
    may not open is StoreDenied, before anything else: a folder on its path that this user
    may not search would otherwise read as no store at all.
    """
    reason = denied_reason(db)
    if reason is not None:
        raise StoreDenied(denied_message(db, reason))
    problem = store_problem(db, header=False)  # SQLite's open below reads the header
    if problem is not None:
        raise StoreUnreadable(f"store {db} {problem}")
    if not os.path.exists(db):
        return None
    try:
        _read_schema_version(db)
    except sqlite3.DatabaseError as err:
        if not (_cut_short(err) and _recovered(db)):
            return _start_refusal(db, err)
        try:
            _read_schema_version(db)
        except sqlite3.DatabaseError as again:
            return _start_refusal(db, again)
    return None


def _read_schema_version(db: str) -> None:
    with closing(_connect_ro(db)) as conn:
        conn.execute("PRAGMA schema_version").fetchone()


def _start_refusal(db: str, err: sqlite3.DatabaseError) -> "StoreLocked":
    """check_openable's answer to a failed read: StoreLocked returned (a restart would not
    help: ops wait their turn), anything else raised."""
    found = unreadable(db, err)
    if isinstance(found, StoreLocked):
        return found
    raise cannot_open(db, err, "cannot be opened") from None


def _cut_short(err: sqlite3.Error) -> bool:
    """Whether a read-only read failed on a transaction a killed writer cut short."""
    return getattr(err, "sqlite_errorcode", None) in _CUT_SHORT_CODES


def _recovered(db: str) -> bool:
    """Open `db` read-write (never creating it) for SQLite to roll back the transaction a
    killed writer cut short, as Sibyl's next open would; True when the read went through.
    Said in the log: something was killed mid-write to the store."""
    uri = "file:" + urllib.parse.quote(db) + "?mode=rw"
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=READ_BUSY_WAIT_S)) as conn:
            conn.execute("PRAGMA schema_version").fetchone()
    except sqlite3.Error as err:
        log.warning("the store %s holds a transaction a killed writer cut short, and "
                    "SQLite could not roll it back (%s%s)", db, err, sqlite_code(err))
        return False
    log.warning("the store %s held a transaction a killed writer cut short (a hot journal); "
                "SQLite rolled it back, as Sibyl's next open would have", db)
    return True


# How long a count or check of the store waits on another process's lock (SQLite's busy
# timeout) before it fails as StoreLocked: a Sibyl write is over well within it, and a
# status call answers BUSY in seconds rather than waiting on a writer that keeps the lock.
READ_BUSY_WAIT_S = 2.0
# How long a count waits within READ_BUSY_WAIT_S of one the lock refused
# (`StoreReader.facts`): long enough for a Sibyl write's commit, not for a writer that
# keeps the lock.
REFUSED_AGAIN_WAIT_S = 0.05


def _connect_ro(db: str, wait_s: float | None = None) -> sqlite3.Connection:
    """A read-only connection waiting `wait_s` (READ_BUSY_WAIT_S when None, read at
    the call) on another process's lock."""
    uri = "file:" + urllib.parse.quote(db) + "?mode=ro"
    try:
        return sqlite3.connect(uri, uri=True, check_same_thread=False,
                               timeout=READ_BUSY_WAIT_S if wait_s is None else wait_s)
    except sqlite3.Error as err:
        raise cannot_open(db, err, "cannot be opened") from None


# How long after the store's files last changed a signature read tells every later commit:
# a file's mtime moves in the kernel's clock ticks (milliseconds; two seconds on FAT), and
# a WAL SQLite restarted after a checkpoint is written again inside the size it had, so a
# commit in the tick of the one before it can leave both files' times and sizes as they
# were. Read later than this, any later commit lands in a later tick and moves an mtime.
SETTLED_AFTER_NS = 2_000_000_000


def settled(signature: tuple[int, ...] | None) -> bool | None:
    """Whether `signature`, read just now (before the rows a count reads), changes with
    every commit after it: its files' newest mtime is SETTLED_AFTER_NS or more in the past
    (the wall clock, which the files' times are on; no system call). A count made after an
    unsettled one is used once, not kept: the next status counts again, until one settles.
    None: that mtime is SETTLED_AFTER_NS or more ahead of the clock (the clock stepped
    back; a store copied with its times), which a commit now, stamping the present, moves
    too; false until the clock caught up (hours maybe), every status counted again till
    then, so such a signature tells once it has stood steady (`SettledRule`). No store
    (None) is settled: the first commit creates it."""
    if signature is None:
        return True
    age = time.time_ns() - max(signature[0], signature[2])
    return True if age >= SETTLED_AFTER_NS else None if age <= -SETTLED_AFTER_NS else False


class SettledRule:
    """The two-second rule for what keys on the store's signature (the counts here, the
    heartbeat's unanchored figure, the watcher's clean mark): whether a signature changes
    with every commit after it was read, so that an unchanged signature later means no
    commit since. Its one memory is for a store dated ahead of the clock. Not
    thread-safe: each user calls it under its own lock, or from one thread."""

    def __init__(self) -> None:
        # A signature ahead of the clock, and when it was first seen (monotonic).
        self._ahead: tuple[tuple[int, ...], float] | None = None

    def tells(self, sig: tuple[int, ...] | None, keep: bool | None, seen: float) -> bool:
        """Whether `sig`, read at `seen` (the monotonic clock) and found `keep` then
        (`settled(sig)`, looked at as it was read), changes with every later commit. One
        ahead of the clock tells once it has stood unchanged SETTLED_AFTER_NS or more
        before `seen`: not at the first sight, so a store whose times were set ahead by
        hand (as a test of a commit inside one tick does, `os.utime`) is read again at
        least once."""
        if keep is not None:
            return keep
        assert sig is not None  # settled(None) is True
        first = self._ahead
        if first is None or first[0] != sig:
            self._ahead = (sig, seen)
            return False
        return (seen - first[1]) * 1e9 >= SETTLED_AFTER_NS

    def tells_at(self, sig: tuple[int, ...] | None, now: float) -> float:
        """When (the monotonic clock, from `now`) `sig`, standing unchanged, will tell
        every later commit as `tells` answers: its files' newest time two seconds in the
        past (the wall clock), or, for one ahead of the clock, two seconds after `tells`
        first saw it. For a wait that ends as it tells, rather than at the next poll. The
        moment, past or to come, never `now` for one that told: a waiter that adds a margin
        to it finds it due, where `now` plus the margin moved on at every look and the wait
        ended only at the poll (each look a short wait of its own). No store: `now`."""
        if sig is None:
            return now
        keep = settled(sig)
        if keep is not None:
            age = time.time_ns() - max(sig[0], sig[2])
            return now + (SETTLED_AFTER_NS - age) / 1e9
        first = self._ahead
        since = first[1] if first is not None and first[0] == sig else now
        return since + SETTLED_AFTER_NS / 1e9


def store_signature(db: str) -> tuple[int, ...] | None:
    """(the store's mtime and size, its WAL's, the store's device), or None: no store. Any
    write through SQLite changes it, so a figure read from the store holds while it holds
    (the row counts here, the heartbeat's unanchored count: unanchored.py). An empty WAL
    counts as none: kint's own read-only connection creates one on a store in WAL mode,
    and that read must not look like a change. Not paths.file_signature: the store is two
    files, and an empty WAL must read as none."""
    try:
        st = os.stat(db)
    except FileNotFoundError:
        return None
    try:
        wal = os.stat(db + "-wal")
    except FileNotFoundError:
        wal = None
    if wal is None or wal.st_size == 0:
        return (st.st_mtime_ns, st.st_size, 0, 0, st.st_dev)
    return (st.st_mtime_ns, st.st_size, wal.st_mtime_ns, wal.st_size, st.st_dev)


class StoreReader:
    """Counts of this tenant's rows per tier, re-read only when the files change."""

    def __init__(self, db: str, tenant: str) -> None:
        self.db = db
        self.tenant = tenant
        self._lock = threading.Lock()
        # The signature the counts were read after, and the counts, kept only when that
        # signature had settled (`settled`).
        self._cached: tuple[tuple[int, ...], StoreFacts] | None = None
        # The store's signature when a count was last refused by another process's lock,
        # and when (monotonic). See `facts`.
        self._refused: tuple[tuple[int, ...], float] | None = None
        # Whether a count's signature tells every later commit (`SettledRule`).
        self._rule = SettledRule()

    def facts(self, read: bool = True) -> StoreFacts:
        """The store's facts, its rows counted again when its files changed; with
        `read=False`, StoreNotCounted rather than that count (only stats are made).
        Within READ_BUSY_WAIT_S of a count the store's lock refused (StoreLocked, after
        that wait), a count of the same unchanged store waits REFUSED_AGAIN_WAIT_S only:
        each status queued behind the refused one waited the whole busy wait again, five of
        them answered BUSY 2, 4, 6, 8 and 10 s on. A lock let go meanwhile is still seen
        at once, and the next count past that window waits the whole busy wait again."""
        try:
            sig = store_signature(self.db)
        except PermissionError as err:  # a folder on its path this user may not search
            raise StoreDenied(denied_message(self.db, denied_reason(self.db) or str(err))) \
                from None
        if sig is None:
            return StoreFacts(exists=False, rows=None, size_bytes=None)
        keep = settled(sig)  # looked at before the rows are read, as `settled` says
        # A count kept is used while its signature is settled still: one kept ahead of the
        # clock is not once the clock comes near it (a commit then may stamp its tick).
        cached = self._cached  # one reference, replaced whole: read without the lock
        if cached is not None and cached[0] == sig and keep is not False:
            return cached[1]
        if not read:
            raise StoreNotCounted(self.db)
        with self._lock:
            cached = self._cached
            if cached is not None and cached[0] == sig and keep is not False:
                return cached[1]
            seen = time.monotonic()  # as `keep`: before the rows are read
            refused = self._refused
            again = (refused is not None and refused[0] == sig
                     and seen - refused[1] < READ_BUSY_WAIT_S)
            try:
                rows = self._count_rows(wait_s=REFUSED_AGAIN_WAIT_S if again else None)
            except StoreLocked:
                if not again:  # the window counts from the whole wait's end
                    self._refused = (sig, time.monotonic())
                raise
            facts = StoreFacts(exists=True, rows=rows, size_bytes=sig[1] + sig[3],
                               device=sig[4])
            # Read within a tick of the files' last change, a commit after it may not move
            # them: these counts answer this status only.
            self._cached = (sig, facts) if self._rule.tells(sig, keep, seen) else None
            self._refused = None
            return facts

    def _count_rows(self, recover: bool = True,
                    wait_s: float | None = None) -> dict[str, int]:
        """The counts, waiting up to `wait_s` on another process's lock (`_connect_ro`); a
        transaction a writer killed while this worker runs cut short is rolled back once
        (`_recovered`), as at the worker's start, and counted again."""
        with closing(_connect_ro(self.db, wait_s)) as conn:
            try:
                present = {row[0] for row in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'")}
                counts: dict[str, int] = {}
                for tier, table in TIER_TABLES.items():
                    if table not in present:
                        counts[tier] = 0
                        continue
                    (n,) = conn.execute(
                        f"SELECT count(*) FROM {table} WHERE tenant_id = ?", (self.tenant,)
                    ).fetchone()
                    counts[tier] = int(n)
                return counts
            except sqlite3.DatabaseError as err:
                failed = err
        if recover and _cut_short(failed) and _recovered(self.db):
            return self._count_rows(recover=False, wait_s=wait_s)
        raise unreadable(self.db, failed) from None


def rows_by_tenant(db: str, recover: bool = True) -> dict[str, int]:
    """Every tenant's row count in the store, over every table of Sibyl's with a tenant_id
    (the anchored tiers and Sibyl's own: relations, archives, events...): one Sibyl store
    holds many tenants (Hermes profiles aside, every harness on the default store), and
    `pull --discard-local` moves the whole file, so what it would take away from each is
    all of these. {} when the store does not exist; StoreDenied when this user may not open
    it (a folder it may not search would otherwise read as no store); StoreUnreadable, with
    no SQLite error, for a store SQLite reads whose tables none have a tenant_id (another
    tool's file, or a Sibyl whose schema this kint does not know): counted as {}, it was
    taken for a store nobody's rows are in, and moved aside. A transaction a killed writer
    cut short is rolled back once (`_recovered`) and counted again, as `_count_rows` does:
    the read-only count cannot undo it, and the discard refused Sibyl's own store for it."""
    reason = denied_reason(db)
    if reason is not None:
        raise StoreDenied(denied_message(db, reason))
    if not os.path.exists(db):
        return {}
    with closing(_connect_ro(db)) as conn:
        try:
            tables, counts = _tenant_counts(conn)
        except sqlite3.DatabaseError as err:
            failed = err
        else:
            failed = None
    if failed is not None:
        if recover and _cut_short(failed) and _recovered(db):
            return rows_by_tenant(db, recover=False)
        raise unreadable(db, failed) from None
    if tables and counts is None:
        named = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5
                                         else "")
        raise StoreUnreadable(f"the store {db} holds tables but none with Sibyl's tenant_id "
                              f"({named})")
    return counts or {}


def _tenant_counts(conn: sqlite3.Connection) -> tuple[list[str], dict[str, int] | None]:
    """The store's tables and every tenant's rows over those with a tenant_id column (any
    case: SQLite's names know none; None when none has one), for rows_by_tenant; SQLite's
    errors raised as they come."""
    tables = [name for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
        "'sqlite_%' AND sql NOT LIKE 'CREATE VIRTUAL%'")]
    counts: dict[str, int] | None = None
    for table in tables:
        quoted = '"' + table.replace('"', '""') + '"'
        columns = {row[1].lower() for row in conn.execute(f"PRAGMA table_info({quoted})")}
        if "tenant_id" not in columns:
            continue
        counts = counts if counts is not None else {}
        for tenant, n in conn.execute(
                f"SELECT tenant_id, count(*) FROM {quoted} GROUP BY tenant_id"):
            counts[str(tenant)] = counts.get(str(tenant), 0) + int(n)
    return tables, counts


def archived_entities(conn: sqlite3.Connection, tenant: str, db: str) -> set[tuple[str, str]]:
    """The (category, name) of every entity of `tenant` in Sibyl's archive (memory_forget
    moves an entity there): what tells a store whose rows were forgotten from a store that
    lost them (changes.store_lost). Empty only when the store has no archive table (one
    Sibyl has not set up). Any other failure raises what the store's other reads raise
    (`unreadable`: StoreLocked for a lock another process holds, else StoreUnreadable):
    read as an empty archive, a store whose rows were forgotten was taken for one that lost
    them, and a pull restored the rows its user forgot on purpose. The table is looked up in
    the schema, as export_rows looks up a tier's, not told from SQLite's wording of an error."""
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = "
                            "'archived_entities'").fetchone():
            return set()
        return {(str(c), str(n)) for c, n in conn.execute(
            "SELECT category, name FROM archived_entities WHERE tenant_id = ?", (tenant,))}
    except sqlite3.DatabaseError as err:
        raise unreadable(db, err) from None
