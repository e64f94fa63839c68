"""A Sibyl store held locked by another process (SQLite's exclusive lock, as a writer in
exclusive locking mode or a long migration keeps it): a worker's read of it waits out its
busy timeout. For tests/test_locked_store.py, and tests/test_room_settling.py and
tests/test_worker_beats.py, where it keeps a real worker's op in flight for that wait."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Takes SQLite's exclusive lock on the store (argv[1]) with a write, says so, and keeps it
# until its stdin closes.
_LOCKER = ("import sqlite3, sys\n"
           "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
           "c.execute('PRAGMA locking_mode=EXCLUSIVE')\n"
           "c.execute('BEGIN EXCLUSIVE')\n"
           "c.execute('CREATE TABLE IF NOT EXISTS kint_test_lock (x)')\n"
           "c.execute('COMMIT')\n"
           "print('locked', flush=True)\n"
           "sys.stdin.read()\n")


@contextmanager
def locked(db: Path) -> Iterator[None]:
    """`db` held locked by another process for the block."""
    writer = subprocess.Popen([sys.executable, "-c", _LOCKER, str(db)], text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "locked\n"
        yield
    finally:
        assert writer.stdin is not None
        writer.stdin.close()
        writer.wait(timeout=30)
