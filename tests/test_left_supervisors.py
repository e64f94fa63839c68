"""The run's last sweep of the supervisors a test left (tests/support/left_supervisors.py,
run by the controller's pytest_sessionfinish over the run's folders): a supervisor held
with its workers (SIGSTOP to its group, as a test that crashed mid-way leaves it) is gone
after it, workers and all, and a supervisor outside the folder swept is not touched.

Real parts: `kint supervisor start`'s supervisor in a sandbox of its own, its forkserver
and a space's worker serving a real Sibyl store, the processes read from /proc. The sweep
is given this test's own folder, never the run's: the supervisors of the tests running
beside it are not its to stop."""

from __future__ import annotations

import os
import signal

import pytest

from conftest import make_sandbox, write_store
from kint.supervisor.pidlock import running_pid
from support.left_supervisors import group_alive, group_members, stop_left_under

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="the sweep reads /proc")


def test_a_held_supervisor_and_its_workers_are_gone_after_the_sweep(tmp_path):
    left = make_sandbox(tmp_path / "swept" / "machine")
    beside = make_sandbox(tmp_path / "beside")
    write_store(left.sibyl_db)
    try:
        held = left.start()
        left.call("status", left.sibyl_db)  # a space's worker running under it
        kept = beside.start()
        group = group_members(held)
        assert held in group and len(group) >= 3, group  # with its forkserver and worker
        os.killpg(held, signal.SIGSTOP)

        assert stop_left_under(tmp_path / "swept") == [held]
        assert not group_alive(held), group_members(held)
        assert running_pid(left.kint_home) is None
        # Outside the folder swept: running and answering, as it was.
        assert running_pid(beside.kint_home) == kept
        assert beside.call("sup.ping")["pid"] == kept
    finally:  # a held group is continued first (Sandbox.shutdown)
        left.shutdown()
        beside.shutdown()
