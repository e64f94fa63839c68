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
import time

from conftest import sibyl_client, write_store
from support.same_tick import restarted_wal, same_tick_commit

TENANT = "kint-test"


def test_a_commit_inside_the_same_tick_and_size_is_counted(sandbox):
    db = sandbox.sibyl_db
    write_store(db)
    client = sibyl_client(db)
    wal_size = restarted_wal(db, client)

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
    same_tick_commit(db, client, wal_size, "same-tick")
    try:
        assert entities() == before + 1
    finally:
        client.storage.close()  # not before: the last close folds the WAL and removes it
