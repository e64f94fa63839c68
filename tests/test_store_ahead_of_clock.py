"""A store whose files' times are ahead of the wall clock (the clock stepped back; a store
copied with its times) has its counts kept once they have stood (kint/tenant_worker/
store.py, `settled` and `StoreReader._steady`).

Counts are kept only once the files' newest mtime is two seconds in the past: a commit
within one tick of the files' clock may leave them as they were. An mtime in the future
never was, until the clock caught up (hours maybe), so every `kint status` counted every
tier again. Such a time is moved by any commit now (it stamps the present), so the count
is kept once the same signature has been seen two seconds apart (the monotonic clock).

Real parts: a real Sibyl store and the worker's real reader; the count is wrapped only to
tell a count from the kept one. The future time is set with os.utime.
"""

from __future__ import annotations

import os
import time

import pytest

from conftest import TENANT, write_store
from kint.tenant_worker.store import SETTLED_AFTER_NS, StoreNotCounted, StoreReader


def test_counts_of_a_store_ahead_of_the_clock_are_kept_once_steady(tmp_path, monkeypatch):
    db = str(write_store(tmp_path / "memory.db"))
    ahead = time.time_ns() + 3600 * 10**9
    for path in (db, db + "-wal"):
        if os.path.exists(path):
            os.utime(path, ns=(ahead, ahead))
    reader = StoreReader(db, TENANT)
    counted: list[int] = []
    count_rows = reader._count_rows

    def counting(*args, **kw):
        counted.append(1)
        return count_rows(*args, **kw)

    reader._count_rows = counting  # type: ignore[method-assign]
    first = reader.facts()
    assert reader.facts() == first and len(counted) == 2  # seen once: not kept yet
    time.sleep(SETTLED_AFTER_NS / 1e9 + 0.1)
    assert reader.facts() == first and len(counted) == 3  # steady: this count is kept
    assert reader.facts() == first and len(counted) == 3
    assert reader.facts(read=False) == first
    # The clock came within two seconds of the files' time: a commit now may stamp the
    # same tick, so the kept count is no longer used (`keep is not False`).
    monkeypatch.setattr(time, "time_ns", lambda: ahead)
    with pytest.raises(StoreNotCounted):
        reader.facts(read=False)
    assert reader.facts() == first and len(counted) == 4
