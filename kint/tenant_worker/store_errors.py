"""What a read of the space's Sibyl store fails with, and which of SQLite's errors says what
of the store: locked by another process for now, damaged or no database, or not this
user's to open. Kept apart from the reads (kint/tenant_worker/store.py), as the ops, the
doctor and the commands that word a refusal classify an error without reading the store.
"""

from __future__ import annotations

import sqlite3

from kint.store_denied import DENIED_HINT, denied_message, denied_reason


class StoreUnreadable(Exception):
    """The store exists but cannot be read as a SQLite database. `error` is SQLite's error
    when one said so (None: kint's own look at the file did, `spaces.store_problem`): a
    caller that answers a damaged file otherwise than a read that failed outside it (a
    server-side push holds over the first only: push_refusals.read_refusal) tells them
    apart by it, as it tells the store's other reads."""

    def __init__(self, message: str, error: sqlite3.Error | None = None) -> None:
        super().__init__(message)
        self.error = error


class StoreDenied(StoreUnreadable):
    """The store is there, but this user may not open it (kint.store_denied): nothing says
    it is damaged, so it is never moved aside nor restored over; `hint` says what to fix."""

    hint = DENIED_HINT


class StoreLocked(StoreUnreadable):
    """The store is fine, but another process holds its lock past the read's busy wait
    (`is_locked`): what needed it is tried again once the lock is let go. A kind of
    StoreUnreadable, so that a caller that only wants the rows if it can have them (the
    tenant count before a discard, doctor's diff) takes it as before."""


class StoreNotCounted(Exception):
    """The store changed since its rows were last counted, and the caller asked for the
    counts as cached only: a count reads the store, which waits up to store.READ_BUSY_WAIT_S on
    another process's lock. The worker's main thread, which beats, asks so, and hands
    the status to its count thread when this is raised (kint.tenant_worker.process)."""


# SQLite's primary result codes for a lock another connection holds that a read needs.
_LOCK_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


def is_locked(err: sqlite3.Error) -> bool:
    """Whether `err` says another process holds the store's lock past the busy wait: the
    store is fine, only taken for now (a writer in exclusive mode, a long migration), so
    what failed is tried again later, never refused as unreadable or held for a human."""
    return (getattr(err, "sqlite_errorcode", 0) or 0) & 0xFF in _LOCK_CODES


# SQLite's primary result codes that say the store's file cannot be read as a database:
# damaged (CORRUPT, FORMAT), not a database (NOTADB), or not to be opened or read from disk
# (CANTOPEN, PERM, IOERR: a short read, an I/O error). A human has to look at the file.
# Anything else (a lock, a full disk, SQLITE_ERROR's "no such table", out of memory, an
# interrupted statement) says nothing of the file's health.
_NO_DATABASE_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_FORMAT,
                                sqlite3.SQLITE_NOTADB})
_UNREADABLE_CODES = _NO_DATABASE_CODES | {sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM,
                                          sqlite3.SQLITE_IOERR}


def is_no_database(err: sqlite3.Error) -> bool:
    """Whether `err` says the store's file is damaged or no database at all
    (`_NO_DATABASE_CODES`): what stays so until someone mends or replaces the file, where
    an open or an I/O error (the rest of `_UNREADABLE_CODES`) may pass by itself."""
    return (getattr(err, "sqlite_errorcode", 0) or 0) & 0xFF in _NO_DATABASE_CODES


def is_damaged(err: sqlite3.Error) -> bool:
    """Whether `err` says the store's file itself cannot be read (`_UNREADABLE_CODES`),
    as opposed to a read that failed for a reason outside the file."""
    return (getattr(err, "sqlite_errorcode", 0) or 0) & 0xFF in _UNREADABLE_CODES


def sqlite_code(err: BaseException) -> str:
    """` (SQLITE_READONLY_ROLLBACK, code 776)`: SQLite's name and extended code for `err`,
    which its message leaves out. Six causes share "attempt to write a readonly database"
    (a hot journal, a WAL to recover, a store moved under the connection, a read-only
    folder...), each with its own fix, and a start that failed once said only the message.
    Empty for an error that carries no code."""
    name = getattr(err, "sqlite_errorname", None)
    code = getattr(err, "sqlite_errorcode", None)
    if name is None and code is None:
        return ""
    return f" ({name or 'SQLITE_?'}, code {code})"


def unreadable(db: str, err: sqlite3.DatabaseError) -> StoreUnreadable:
    """The error for a read of the store that failed: StoreLocked when another process
    holds it, StoreDenied when this user may not open it, else StoreUnreadable."""
    if is_locked(err):
        return StoreLocked(f"the store {db} is locked by another process ({err})", err)
    return cannot_open(db, err, "cannot be read")


def cannot_open(db: str, err: sqlite3.Error, failed: str) -> StoreUnreadable:
    """StoreDenied when SQLite could not open the store for want of this user's permission
    (kint.store_denied), else StoreUnreadable saying SQLite's words."""
    reason = denied_reason(db, err)
    if reason is not None:
        return StoreDenied(denied_message(db, reason), err)
    return StoreUnreadable(unreadable_text(db, err, failed), err)


def unreadable_text(db: str, err: sqlite3.Error, failed: str = "cannot be read") -> str:
    """The words for a store SQLite failed to read, `err` being neither a lock nor a denial:
    what StoreUnreadable says, for a caller that has told those apart already (a second
    look at the store's permissions could say otherwise than its first)."""
    return f"store {db} {failed}: {err}{sqlite_code(err)}"
