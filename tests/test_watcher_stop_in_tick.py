"""A worker's stop (Watcher.stop, as process.py makes it as the stop begins) that lands
inside a tick of the watcher's said nothing when it came after the tick read a changed
store but before the tick marked it dirty: the stop saw a clean store, and the tick, which
then marked it dirty, pushed nothing (`_fire` looks at the stop) and said nothing, so the
rows were left without the "rows left for the worker's next start" line every other stop
says. One that landed while the tick counted a dirty store said the line at once, though
the count then found nothing left. Now a stop that meets a tick leaves the line to the
tick's end, which says it once, only if rows are left (docs/faults.md).

The unit level: the window is a few lines of Watcher.tick, and a running worker's stop
cannot be made to begin inside it at will. A real Watcher over a real store file, its tick
on a thread of the test's; the test stops the watcher at a hook it controls (an event the
tick waits on), with no sleeps. Stand-ins: the count's answer (as in
tests/test_watcher_stopping.py) and, for "read", the watcher's own read of the store's
signature wrapped so that the tick waits there once it has read the change."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from conftest import write_store
from test_watcher_own_op import _changed

WHY = "the worker is stopping (restart)"


@pytest.mark.parametrize("where,quiet", [("read", "0"), ("read", "600"), ("count", "0")])
def test_a_stop_that_meets_a_tick_is_said_once_at_its_end_if_rows_are_left(
        tmp_path, monkeypatch, caplog, where, quiet):
    """`where` "read": the stop lands after the tick read the changed store, before it
    marked it dirty; past the quiet period (`quiet` 0, a push due that the stop prevents)
    or not (a size check counts one row). Rows are left: the stop's line, once. `where`
    "count": the stop lands as the tick's count of the dirty store runs, and that count
    finds nothing left: no line, the store clean."""
    from kint.tenant_worker.watcher import Watcher
    from kint.tenant_worker.watcher_push import ROWS_LEFT

    monkeypatch.setenv("KINT_QUIET_SECONDS", quiet)
    monkeypatch.setenv("KINT_POLL_SECONDS", "15")
    caplog.set_level(logging.INFO, logger="kint.worker")
    db = write_store(tmp_path / "memory.db")
    at, go = threading.Event(), threading.Event()
    pushed: list[str] = []

    def count() -> tuple[int, int]:
        if where == "count":
            at.set()
            assert go.wait(30)
            return 0, 0
        return 1, 0

    watcher = Watcher(str(db), count, pushed.append, generation=lambda: 0)
    read = watcher._read_signature
    armed = [where == "read"]

    def read_then_wait() -> tuple[int, ...] | None:
        sig = read()
        if armed[0]:  # the tick's read of the changed store, once
            armed[0] = False
            at.set()
            assert go.wait(30)
        return sig

    watcher._read_signature = read_then_wait
    ticker = threading.Thread(target=watcher.tick, args=(time.monotonic(),))
    try:
        _changed(db, 10)
        ticker.start()
        assert at.wait(30)
        watcher.stop(WHY)  # as process.py makes it, the tick held at the hook
        go.set()
        ticker.join(30)
        assert not ticker.is_alive()
    finally:
        go.set()
    said = [r.getMessage() for r in caplog.records if ROWS_LEFT in r.getMessage()]
    assert pushed == [] and watcher.backoff.failure is None
    if where == "read":
        assert said == [f"watcher: stopped: {WHY}; {ROWS_LEFT}"], caplog.text
        assert watcher.dirty
    else:
        assert said == [] and not watcher.dirty, caplog.text
    # Said once: a later stop (the worker's own again, or the gate's) says nothing more.
    watcher.stop(WHY)
    assert len([r for r in caplog.records if ROWS_LEFT in r.getMessage()]) == len(said)
