"""A Sibyl store this user may not open, told apart from a damaged one.

SQLite answers SQLITE_CANTOPEN or SQLITE_PERM both for a file it cannot make sense of and
for one the OS will not let this process open: the store file at mode 000, a folder on its
path without search permission, its -wal or -shm closed to this user. The second is a store
that may be perfectly fine, only unreadable to the user kint runs as (another user's
store, a `sudo` that left root's files behind). Called damaged, it was offered
`kint pull --discard-local`, which would move a good store aside and restore only what was
anchored over it. So when SQLite says it cannot open the store, the OS is asked the same
question of each file SQLite reads (a stat, and whether this user may read it), and a
permission it lacks is said as what it is, with how to fix it, never with a discard or a
restore. No descriptor of the store is opened here: closing one drops every POSIX lock the
process holds on the file, SQLite's own included (kint.spaces `store_problem`).

Kept apart from the worker's store module: the Sibyl client (kint.sibyl_client) and the
worker both ask it, and neither imports the other.
"""

from __future__ import annotations

import errno
import os
import sqlite3

# SQLite's primary result codes for "could not open" (the OS's answer is then asked).
_OPEN_CODES = frozenset({sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM})
_DENIED_ERRNOS = frozenset({errno.EACCES, errno.EPERM})

DENIED_HINT = ("give the user kint runs as read and write permission on the store, its "
               "folder and any -wal and -shm beside it (`ls -l` shows their owner and mode), "
               "then run the command again; do not move the store aside or restore over it: "
               "nothing says its contents are damaged")


def denied_reason(db: str, err: sqlite3.Error | None = None) -> str | None:
    """The OS's words when this user may not open the store at `db` (or its -wal or
    -shm), else None: the words alone for the store itself (`denied_message` names it
    already), the file first for a -wal or -shm. With `err`, asked only when SQLite's code
    is one of "could not open": any other failure is not about permission."""
    if err is not None and \
            (getattr(err, "sqlite_errorcode", 0) or 0) & 0xFF not in _OPEN_CODES:
        return None
    for path in (db, db + "-wal", db + "-shm"):
        why = _denied_by_os(path)
        if why is not None:
            return why if path == db else f"{path}: {why}"
    return None


def _denied_by_os(path: str) -> str | None:
    """The OS's words when this user may not reach or read `path`, else None (a file that
    is not there is not denied: Sibyl creates the store, SQLite its -wal and -shm)."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as err:  # a folder on the path this user may not search
        return err.strerror if err.errno in _DENIED_ERRNOS else None
    if not os.access(path, os.R_OK, effective_ids=os.access in os.supports_effective_ids):
        return os.strerror(errno.EACCES)
    return None


def denied_message(db: str, reason: str) -> str:
    """One line: which store, that this user may not open it, and the OS's words."""
    return f"the store {db} cannot be opened by this user (uid {os.geteuid()}): {reason}"
