"""A plain status sees a commit that left the store's files' times and sizes as they were
(kint/tenant_worker/store.py, `settled`).

The counts a status answers are cached against the store's signature. That was its and
its WAL's mtime and size only: a WAL that SQLite restarted after a checkpoint is written
again from its start inside the size it had, so a second commit within one tick of the
files' clock (milliseconds) changed neither, and status kept the counts from before it.

Real parts: a real supervisor and worker (`kint status`), Sibyl's own client writing the
store. The one thing the test does by hand is the clock's tick: the files' mtimes are set
at the count (a little ahead of it, so the count is inside their tick) and, after the
second commit, back to what they were (`os.utime`), which is what a commit inside the
same tick leaves; the sizes are the same by SQLite's own doing (a WAL
restarted inside a larger file, checked below).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import closing

from conftest import sibyl_client, write_store

TENANT = "kint-test"


def _stats(db) -> dict[str, tuple[int, int, int]]:
    out = {}
    for suffix in ("", "-wal"):
        st = os.stat(f"{db}{suffix}")
        out[suffix] = (st.st_atime_ns, st.st_mtime_ns, st.st_size)
    return out


def test_a_commit_inside_the_same_tick_and_size_is_counted(sandbox):
    db = sandbox.sibyl_db
    write_store(db)
    client = sibyl_client(db)
    for n in range(40):  # a WAL of many frames
        client.set_entity("notes", f"bulk-{n}", {"n": n})
    with closing(sqlite3.connect(db)) as conn:  # every frame into the store
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    wal_size = os.stat(f"{db}-wal").st_size
    client.set_entity("notes", "after-restart", {"n": -1})  # the WAL restarts at its start
    assert os.stat(f"{db}-wal").st_size == wal_size

    def entities() -> int:
        out = sandbox.kint("--db", str(db), "status", "--json")
        assert out.returncode == 0, out.stdout + out.stderr
        return json.loads(out.stdout)["rows"]["entity"]

    sandbox.start()
    entities()  # the worker runs
    # The count comes within the tick of the write before it: the files' times, set a
    # little ahead, are no older than the count (a count two seconds or more after the
    # last write is kept: any later commit lands in a later tick, and moves a time).
    ahead = time.time_ns() + 10_000_000_000
    for suffix in ("", "-wal"):
        os.utime(f"{db}{suffix}", ns=(ahead, ahead))
    before = entities()
    at_count = _stats(db)
    client.set_entity("notes", "same-tick", {"n": -2})
    assert os.stat(f"{db}-wal").st_size == wal_size  # within the restarted WAL's size
    for suffix, (atime, mtime, _size) in at_count.items():
        os.utime(f"{db}{suffix}", ns=(atime, mtime))  # the same tick of the files' clock
    assert _stats(db) == at_count
    try:
        assert entities() == before + 1
    finally:
        client.storage.close()  # not before: the last close folds the WAL and removes it
