"""A test run killed before its end leaves its folder (tests/conftest.py): the next run
removes it, and now stops the devchain anvil it left running too, but only that anvil.

Each test makes a run folder of its own, beside none of the real runs' (the clean-up looks
only at the `kt-*` folders beside the one it is given), with a real anvil started by the
real `kint devchain start` in the KINT_HOME a run's devchain has there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from conftest import (DEVCHAIN_KINT_HOME, hold_run_lock, make_sandbox, pid_alive,
                      remove_abandoned_runs, wait_until)
from kint.chain.config import devchain_record
from kint.chain.devchain.identity import recorded_anvil_runs


def _abandoned_run(parent: Path) -> tuple[Path, dict]:
    """A run folder whose run was killed: its lock free (taken, then let go, as a killed
    run's is by the kernel), its devchain's anvil running. Returns the folder and the
    anvil's record."""
    folder = parent / "kt-killed"
    folder.mkdir(mode=0o700)
    os.close(hold_run_lock(folder))
    chain = make_sandbox(folder / DEVCHAIN_KINT_HOME.parent)
    assert chain.kint_home == folder / DEVCHAIN_KINT_HOME
    out = chain.kint("devchain", "start")
    assert out.returncode == 0, out.stdout + out.stderr
    record = json.loads(devchain_record(chain.kint_home).read_text())
    assert recorded_anvil_runs(record)
    return folder, record


def _stop(record: dict) -> None:
    """The test's own clean-up: the anvil it started, if it still runs."""
    if recorded_anvil_runs(record):
        os.kill(record["pid"], signal.SIGKILL)


def test_an_abandoned_runs_anvil_is_stopped_with_its_folder(tmp_path):
    folder, record = _abandoned_run(tmp_path)
    try:
        remove_abandoned_runs(tmp_path / "kt-this-run")
        assert not folder.exists()
        # Stopped, not merely orphaned: before, it ran on with its folder gone.
        assert wait_until(lambda: not pid_alive(record["pid"]), timeout=20)
    finally:
        _stop(record)


def test_a_pid_that_is_no_longer_the_anvil_is_left_alone(tmp_path):
    """The record's pid is signalled only while it is the anvil that record describes (its
    command line and start time): a process that took the pid since is never signalled.
    Here the record names another live process of this user's: it runs on, and the folder
    is removed all the same. A pid is another process's only once its own process ended,
    so the anvil is killed first: left running, it dumped its state file into the folder
    every second while the folder was removed, and a dump between the removal of
    state.json and of devchain/ left the folder behind (ENOTEMPTY, ignored by rmtree)."""
    folder, record = _abandoned_run(tmp_path)
    os.kill(record["pid"], signal.SIGKILL)
    assert wait_until(lambda: not recorded_anvil_runs(record), timeout=20)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        path = devchain_record(folder / DEVCHAIN_KINT_HOME)
        path.write_text(json.dumps({**record, "pid": other.pid}))
        remove_abandoned_runs(tmp_path / "kt-this-run")
        assert not folder.exists()
        assert other.poll() is None, "a process that is not the recorded anvil was signalled"
    finally:
        other.kill()
        other.wait()
        _stop(record)
