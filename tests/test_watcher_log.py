"""The store watcher's log lines, kint v0.3.0's (10-configuration.md, "Logs"): `watcher:
store changed`, then `watcher: pushing (quiet trigger)` or `watcher: pushing (size
trigger)`, then the push's result. A busy store writes one `store changed` line per dirty
spell, not one per poll.

A real Watcher over a real store file, its clock in the test's hands; its push is a
stand-in that answers as the worker's push does (a dict with a `message`). The size
trigger's line on the real worker is checked in tests/test_watcher_size_trigger.py."""

from __future__ import annotations

import logging
import os
import time

from conftest import write_store


def _touch(db, seconds: int) -> None:
    """A store change: the file's modification time moves (to a time of its own a while
    ago, as a write the watcher reads two seconds or more after it: store.SettledRule)."""
    os.utime(db, ns=(time.time_ns(), time.time_ns() - (10 - seconds) * 10**9))


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("watcher: ")
            and not r.getMessage().startswith("watcher: quiet ")]  # the timings line


def test_a_quiet_push_and_a_size_push_log_what_triggered_them_and_their_result(
        tmp_path, monkeypatch, caplog):
    from kint.tenant_worker.watcher import Watcher

    db = write_store(tmp_path / "memory.db")
    monkeypatch.setenv("KINT_QUIET_SECONDS", "300")
    monkeypatch.setenv("KINT_SIZE_TRIGGER_BYTES", "4000")
    rows, pushed = [1], []

    def push(reason: str) -> dict:
        pushed.append(reason)
        return {"pushed": 1, "message": f"anchored {rows[0]} row change(s) in 1 epoch(s)"}

    watcher = Watcher(str(db), lambda: (rows[0], 0), push, generation=lambda: 0)
    caplog.set_level(logging.INFO, logger="kint.worker")
    now = time.monotonic()
    _touch(db, 1)
    watcher.tick(now)
    _touch(db, 2)
    watcher.tick(now + 15)  # still dirty: no second line
    assert _lines(caplog) == ["watcher: store changed"] and pushed == []
    watcher.tick(now + 15 + 300)  # quiet for KINT_QUIET_SECONDS
    assert pushed == ["watcher"]  # the hold's reason: the watcher's push, whatever fired it
    assert _lines(caplog) == ["watcher: store changed", "watcher: pushing (quiet trigger)",
                              "watcher: anchored 1 row change(s) in 1 epoch(s)"]

    caplog.clear()
    rows[0] = 11  # 4400 estimated bytes: more than the trigger
    _touch(db, 3)
    later = now + 1000
    watcher.tick(later)
    assert pushed == ["watcher", "watcher"]
    assert _lines(caplog) == ["watcher: store changed", "watcher: pushing (size trigger)",
                              "watcher: anchored 11 row change(s) in 1 epoch(s)"]
