"""The worker's read-only connections to the store: one per thread that reads it, kept
between ops (a warm connection per op thread: kint.tenant_worker.op_pool), and every one of
them known here, so a `pull --discard-local` can close them before it moves the store.

Why all of them, not the pull's thread's alone: a status counts on a thread of its own and
ops that overlap run on more than one pool thread, each left holding its connection. SQLite
removes a store's `-wal` and `-shm` only when the last connection to it closes, so while one
stayed open the discard's checkpoint left both beside the store, and they were moved aside
as two more backup files where docs/commands.md promises one.

Why a `with` around each use: a connection another thread is reading through at that
moment must not be closed under it (its op would fail). A reader in use is left open and
the discard moves the `-wal` and `-shm` aside with the store, as it does for any holder
(kint.tenant_worker.discard), which is safe, only not one file.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

Store = tuple[int, int]  # the store file's (device, inode)


@dataclass
class _Reader:
    conn: sqlite3.Connection
    store: Store
    uses: int = 0  # `reading` blocks open on it (its own thread's, nested)
    closed: bool = False


class StoreReaders:
    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self._lock = threading.Lock()
        self._local = threading.local()
        self._readers: dict[int, _Reader] = {}

    @contextmanager
    def reading(self, store: Store) -> Iterator[sqlite3.Connection]:
        """This thread's connection to the store file `store` names, opened anew when it
        was replaced (a discard moved it aside) or closed by `close_idle`; held in use,
        so never closed by another thread, until the block ends."""
        reader = self._take(store)
        try:
            yield reader.conn
        finally:
            with self._lock:
                reader.uses -= 1

    def _take(self, store: Store) -> _Reader:
        with self._lock:
            held: _Reader | None = getattr(self._local, "reader", None)
            if held is not None and not held.closed and held.store == store:
                held.uses += 1
                return held
            if held is not None and not held.closed and held.uses == 0:
                self._drop(held)
        conn = self._connect()  # outside the lock: raises as sqlite3 says
        reader = _Reader(conn, store, uses=1)
        with self._lock:
            self._readers[id(reader)] = reader
            self._local.reader = reader
        return reader

    def close_idle(self) -> int:
        """Close every connection no thread is reading through now; how many are in use
        (and stay open)."""
        with self._lock:
            busy = [r for r in self._readers.values() if r.uses]
            for reader in [r for r in self._readers.values() if not r.uses]:
                self._drop(reader)
            return len(busy)

    def _drop(self, reader: _Reader) -> None:
        """Close `reader` (the lock held)."""
        reader.closed = True
        self._readers.pop(id(reader), None)
        reader.conn.close()
