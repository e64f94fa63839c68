"""Spawner.close during the warm-up (kint/supervisor/spawner.py), in this process: the
supervisor exits right after its close, before the warm-up thread gets to log, so what
that thread logs of a stop can only be seen where the thread is joined, here. The
forkserver is multiprocess' real one, its preload held by tests/support/held_preload.py
until the test lets it go."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import multiprocess.forkserver

from conftest import pid_alive, support_first, wait_until
from kint.supervisor.spawner import Spawner


def _warming(tmp_path, monkeypatch) -> tuple[Spawner, Path, int]:
    """A spawner whose warm-up thread waits on a forkserver held in its preload, and that
    forkserver's pid."""
    hold = tmp_path / "let-the-preload-go"
    monkeypatch.setenv("KINT_TEST_PRELOAD_HOLD", str(hold))
    monkeypatch.delenv("KINT_TEST_PRELOAD_HOLD_KEEPS_ON", raising=False)
    # The forkserver's imports see PYTHONPATH, not this process's sys.path (multiprocess'
    # forkserver main leaves the sys_path it is given unused): held_preload is found there.
    monkeypatch.setenv("PYTHONPATH", support_first(os.environ.get("PYTHONPATH", "")))
    spawner = Spawner(extra_preload=("held_preload",))
    spawner.warm_up_in_background()
    importing = Path(f"{hold}.forkserver")
    pid = wait_until(lambda: importing.exists() and importing.read_text(), timeout=120)
    assert pid, "the forkserver never reached its held import"
    # The forkserver itself holds (not a child of it that imported held_preload anew).
    assert int(pid) == multiprocess.forkserver._forkserver._forkserver_pid
    return spawner, hold, int(pid)


def _end_warm_up(spawner: Spawner, hold: Path) -> None:
    hold.touch()
    assert spawner._thread is not None
    spawner._thread.join(120)
    assert not spawner._thread.is_alive(), "the warm-up thread did not end"
    spawner.close()  # its thread ended: now its pipe is closed


def test_a_stop_during_the_warm_up_does_not_log_the_failure_it_causes(
        tmp_path, monkeypatch, caplog):
    """The forkserver close ends makes the warm-up fail (its fork request meets a dead
    forkserver): that is the stop's doing, not a forkserver that could not start, and
    the log does not say it did."""
    caplog.set_level(logging.DEBUG, logger="kint.supervisor")
    spawner, hold, forkserver = _warming(tmp_path, monkeypatch)
    try:
        spawner.close()
        assert wait_until(lambda: not pid_alive(forkserver), timeout=30), \
            "the forkserver outlived close"
    finally:
        _end_warm_up(spawner, hold)
    # The warm-up did fail, and said so in its outcome ...
    assert spawner._outcome and "did not start" in spawner._outcome[0], spawner._outcome
    # ... but not in the log, where a forkserver that failed on its own is named.
    said = [r.getMessage() for r in caplog.records]
    assert not any("did not start" in line for line in said), said


def test_a_stop_finds_no_forkserver_record_and_still_returns(tmp_path, monkeypatch, caplog):
    """A multiprocess without the module-level `_forkserver` this reads (another layout;
    the lock pins one that has it, so its absence is made here by removing it): close
    says so in one log line, without a traceback, and returns, so the stop goes on to
    release the supervisor's pid file. The forkserver is left to import to the end."""
    caplog.set_level(logging.DEBUG, logger="kint.supervisor")
    spawner, hold, forkserver = _warming(tmp_path, monkeypatch)
    try:
        # The module's functions are bound to the instance already: the warm-up goes on.
        monkeypatch.delattr(multiprocess.forkserver, "_forkserver")
        spawner.close()
        said = [r for r in caplog.records if r.name == "kint.supervisor"]
        assert len(said) == 1, [r.getMessage() for r in said]
        assert "could not find multiprocess' forkserver record" in said[0].getMessage()
        assert said[0].exc_info is None
        assert pid_alive(forkserver)
    finally:
        monkeypatch.undo()
        _end_warm_up(spawner, hold)
    # Let go, the forkserver ended its preload and served the warm-up's child.
    assert spawner._outcome == [], spawner._outcome
