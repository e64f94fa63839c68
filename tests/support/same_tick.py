"""A commit to a Sibyl store that leaves its files' times and sizes as they were: what a
second commit within one tick of the file system's clock leaves when SQLite writes it
inside the size a restarted WAL already had (kint/tenant_worker/store.py, SETTLED_AFTER_NS).

The sizes are SQLite's own doing (`restarted_wal`); the tick is the one thing done by hand
(`same_tick_commit` sets the times back with `os.utime`): it cannot be timed from here. For
the tests of everything that keys on the store's signature: the status counts, the
heartbeat's unanchored figure, the watcher's clean mark.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

Times = dict[str, tuple[int, int, int]]


def file_times(db: str | Path) -> Times:
    """The store's and its WAL's (atime, mtime, size), in nanoseconds and bytes."""
    out = {}
    for suffix in ("", "-wal"):
        st = os.stat(f"{db}{suffix}")
        out[suffix] = (st.st_atime_ns, st.st_mtime_ns, st.st_size)
    return out


def restarted_wal(db: str | Path, client: Any) -> int:
    """Through `client` (Sibyl's, left open: its last close folds the WAL away), a WAL of
    many frames folded into the store, then one commit that SQLite writes from the WAL's
    start: the next small commit changes no size. Returns the WAL's size."""
    for n in range(40):
        client.set_entity("notes", f"bulk-{n}", {"n": n})
    with closing(sqlite3.connect(db)) as conn:  # every frame into the store
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    wal_size = os.stat(f"{db}-wal").st_size
    client.set_entity("notes", "after-restart", {"n": -1})  # the WAL restarts at its start
    assert os.stat(f"{db}-wal").st_size == wal_size
    return wal_size


def same_tick_commit(db: str | Path, client: Any, wal_size: int, name: str) -> None:
    """A commit through `client` that leaves the files' times and sizes as they were just
    before it."""
    before = file_times(db)
    client.set_entity("notes", name, {"n": -2})
    assert os.stat(f"{db}-wal").st_size == wal_size  # within the restarted WAL's size
    for suffix, (atime, mtime, _size) in before.items():
        os.utime(f"{db}{suffix}", ns=(atime, mtime))  # the same tick of the files' clock
    assert file_times(db) == before
