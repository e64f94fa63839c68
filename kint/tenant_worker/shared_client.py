"""The space's one Sibyl MemoryClient, shared by the ops that read or write through it (a
verify's search and refusal, a pull's replay), and closed only while none of them is
using it.

Why: Sibyl's `Storage.close()` closes every thread's connection, not the caller's alone.
A `pull --discard-local` closes the client before it moves the store aside, and a verify
on another pool thread between its two searches had its connection closed under it: the
user got "Cannot operate on a closed database" where the verify had an answer. So each such
op holds the client for its block (`using`), and a discard's `released` waits for every
block to end, keeps new ones waiting until the store is moved, and only then lets them
build a new client (a verify that waited finds the store gone, or the restored one). Both
waits are bounded: a block that never ends refuses the discard BUSY, nothing moved, rather
than hang the pull (RELEASE_WAIT_S); a discard that never ends refuses the op waiting for
it BUSY, rather than hold its thread of the worker's pool (USING_WAIT_S).

A store replaced under the client by something else (the client is rebuilt when the file
is no longer the one it was built on) retires the old client rather than close it: the
blocks still using it finish on it, and the last one out closes it.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from kint.protocol import ErrorCode, ProtocolError
from kint.sibyl_client import close_client, store_file_id

# How long a discard waits for the ops reading through the client to end: a verify's
# searches and its refusal's one write (which may wait on Sibyl's own lock for seconds).
RELEASE_WAIT_S = 30.0
# How long an op waits for a discard under way: its fold of the WAL (5 s at most, SQLite's
# busy wait) and the renames, or the wait above on another op.
USING_WAIT_S = 45.0


class SpaceClient:
    def __init__(self, db: str, tenant: str, home: Path) -> None:
        self._db, self._tenant, self._home = db, tenant, home
        self._cond = threading.Condition()
        self._client: Any = None
        self._store: tuple[int, int] | None = None  # the file it was built on
        self._users = 0  # `using` blocks open
        self._released = 0  # `released` blocks open (a discard, on one thread)
        self._releasing = ""  # what the last `released` block was for
        self._retired: list[Any] = []  # replaced while in use: closed by the last user

    @contextmanager
    def using(self) -> Iterator[None]:
        """A block in which the client `get` returns stays open; a discard in progress is
        waited for first. Never nested on one thread (a discard waiting between the two
        would wait for the outer one, and the inner one for the discard). BUSY when the
        discard has not ended within USING_WAIT_S (the op has not begun)."""
        with self._cond:
            if not self._cond.wait_for(lambda: not self._released, timeout=USING_WAIT_S):
                raise ProtocolError(
                    ErrorCode.BUSY,
                    f"{self._releasing} has held the store for over {USING_WAIT_S:.0f} s; "
                    f"this op waited for it, and did not run", "try again once it has ended")
            self._users += 1
        try:
            yield
        finally:
            with self._cond:
                self._users -= 1
                retired = self._unused_retired()
            _close(retired)

    def _unused_retired(self) -> list[Any]:
        """Under the lock: the retired clients once no block uses them, taken for the
        caller to close after letting the lock go (a slow close under it held up every
        `using` entry); a discard waiting for no block to be open is woken."""
        if self._users:
            return []
        retired, self._retired = self._retired, []
        self._cond.notify_all()
        return retired

    def get(self, store: tuple[int, int] | None = None) -> Any:
        """The client, built on first need and again when the store file is no longer the
        one it was built on (`store`: as the caller read it; None: read here, once). The
        file is recorded as read before the client opened it: one replaced in between
        rebuilds the client at the next call, never the reverse. Only a store the open
        created (none before) is looked at again."""
        retired: list[Any] = []
        try:
            with self._cond:
                store = store or store_file_id(self._db)
                if self._client is not None and store != self._store:
                    self._retired.append(self._client)
                    self._client = None
                    retired = self._unused_retired()
                if self._client is None:
                    from kint.sibyl_client import open_client

                    self._client = open_client(self._db, self._tenant, self._home)
                    self._store = store if store is not None else store_file_id(self._db)
                return self._client
        finally:
            _close(retired)

    @contextmanager
    def released(self, what: str) -> Iterator[None]:
        """No client open for the block: waits for every `using` block to end (new ones
        wait for this block), then closes it. BUSY naming `what` (the step that needs
        the store let go of) when they do not end within RELEASE_WAIT_S."""
        with self._cond:
            self._released += 1
            self._releasing = what
            if not self._cond.wait_for(lambda: not self._users, timeout=RELEASE_WAIT_S):
                self._released -= 1
                self._cond.notify_all()
                raise ProtocolError(
                    ErrorCode.BUSY,
                    f"{what}: an op still reads the store through kint's Sibyl client after "
                    f"{RELEASE_WAIT_S:.0f} s; nothing was moved", "try again")
            retired = self._retired + [self._client]
            self._client, self._retired = None, []
        _close(retired)
        try:
            yield
        finally:
            with self._cond:
                self._released -= 1
                self._cond.notify_all()


def _close(clients: list[Any]) -> None:
    """Close each of `clients` (outside the lock: Sibyl's close folds its connections)."""
    for client in clients:
        close_client(client)
