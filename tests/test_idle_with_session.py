"""A worker with an agent session attached is never stopped as idle, even with the
shortest idle time (KINT_WORKER_IDLE_SECONDS=1) and a session that attached after the
worker's last beat.

The supervisor learns of a session from the worker's beats, and a worker beats up to a
beat interval after the attach's answer. The supervisor once judged idleness on whatever
beat it had read last: between an attach and the beat that reported it, a worker quiet
for the idle time was stopped with its session attached, and the session was lost until
its next keepalive. Here the worker beats every 3 s while it works
(KINT_TEST_BEAT_SECONDS, tests/support/kint_test_timings.py), and the attach itself
starts it: its first beat (no session yet) goes out before it reads the attach, its next
3 s later, so the attach is always answered in that window, 2 s longer than the idle time.

Real parts: the test supervisor over the default store, no chain, and the space's worker.
The recycle for memory, the other stop the supervisor decides on a beat, is judged turn by
turn with explicit monotonic times (tests/support/lifecycle_host.py), as no test can time
a real worker's memory figure.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from conftest import make_sandbox, write_store
from kint.client import KintError
from machines_together import running_together
from support.lifecycle_host import LifecycleHost

from kint.supervisor import lifecycle
from kint.supervisor.settings import Settings
from kint.supervisor.workers import WorkerHandle

IDLE_S = "1"
BEAT_S = "3"
SERVING = ("ready", "busy")


@pytest.fixture(scope="module")
def machines(tmp_path_factory):
    """The two tests' machines, each its own test's alone, their test supervisors started
    side by side (machines_together.py): "attach" with the shortest idle time, "held" with
    the two holds its test touches (its folder `holds` is where they go)."""
    holds = tmp_path_factory.mktemp("holds")
    made = {
        "attach": make_sandbox(tmp_path_factory.mktemp("attach") / "machine",
                               KINT_WORKER_IDLE_SECONDS=IDLE_S, KINT_TEST_BEAT_SECONDS=BEAT_S),
        "held": make_sandbox(tmp_path_factory.mktemp("held") / "machine",
                             KINT_TEST_BEAT_SECONDS=BEAT_S,
                             KINT_WORKER_HEARTBEAT_TIMEOUT="12",
                             KINT_TEST_HOLD_DISPATCH=str(holds / "hold-dispatch"),
                             KINT_TEST_HOLD_ATTACH=str(holds / "hold-attach")),
    }
    with running_together(made):
        yield made


def test_a_session_attached_after_the_last_beat_keeps_the_worker_from_its_idle_exit(machines):
    sb = machines["attach"]
    try:
        write_store(sb.sibyl_db, tenant=sb.tenant)
        attached = sb.call("attach", sb.sibyl_db, timeout_s=30,
                           args={"session": "agent-one", "watcher": False})
        assert attached["sessions"] == 1, attached
        pid = sb.row(sb.sibyl_db)["pid"]
        assert pid, sb.row(sb.sibyl_db)

        def told_or_stopped() -> dict | None:
            row = sb.row(sb.sibyl_db)
            return row if row["sessions"] or row["state"] not in SERVING else None

        # Before, the worker was stopped as idle a second after the attach, on the beat
        # from before it.
        row = sb.wait_for(told_or_stopped, timeout=60,
                          what="the beat that reports the session, or a stop")
        assert row["state"] in SERVING and row["pid"] == pid and row["sessions"] == 1, row

        # Once the session leaves, the idle exit comes, on a beat that says so.
        left = sb.call("detach", sb.sibyl_db, timeout_s=30, args={"session": "agent-one"})
        assert left["sessions"] == 0, left
        row = sb.wait_for(lambda: (lambda r: r if r["pid"] is None else None)(
            sb.row(sb.sibyl_db)), timeout=60, what="the idle exit after the detach")
        assert row["state"] == "idle", row
    finally:
        sb.shutdown()


def test_a_beat_from_before_the_worker_took_a_timed_out_request_stops_nothing(machines):
    """The supervisor answered TIMEOUT for a request still queued to the worker (here an
    attach), and then read a beat the worker made before it took that request: the beat
    was read after the request arrived and after the last answer, and so once passed the
    idle gate, and the worker was stopped as idle while the attach ran, its session lost.
    Each beat now says how many requests the worker took; the gate also wants every
    request sent to it counted.

    Made certain with two holds (tests/support/kint_test_faults.py): the worker's main
    thread is held on a first request (a status) while the attach is sent to it and timed
    out, so that, let go, it answers the status, beats (its beat long due) and only then
    takes the attach; the attach is held on its pool thread, and the worker's next beat
    comes 3 s later (KINT_TEST_BEAT_SECONDS, and an idle beat of 3 s from a heartbeat
    timeout of 12 s), 2 s past the idle time."""
    sb = machines["held"]
    dispatch_hold = Path(sb.env["KINT_TEST_HOLD_DISPATCH"])
    attach_hold = Path(sb.env["KINT_TEST_HOLD_ATTACH"])
    try:
        write_store(sb.sibyl_db, tenant=sb.tenant)
        sb.call("status", sb.sibyl_db, timeout_s=60)
        pid = sb.row(sb.sibyl_db)["pid"]
        dispatch_hold.touch()
        first = threading.Thread(target=sb.call, args=("status", sb.sibyl_db),
                                 kwargs={"timeout_s": 60}, daemon=True)
        first.start()
        sb.wait_for(lambda: dispatch_hold.with_name("hold-dispatch.reached").exists(),
                    what="the worker held on the status")
        with sb.supervisor_config(f"worker_idle_seconds = {IDLE_S}\n"):
            with pytest.raises(KintError) as timed_out:
                sb.call("attach", sb.sibyl_db, timeout_s=3.5,
                        args={"session": "agent-one", "watcher": False})
            assert timed_out.value.code == "TIMEOUT", timed_out.value
            attach_hold.touch()
            dispatch_hold.unlink()
            first.join(30)

            def running_or_stopped() -> dict | None:
                row = sb.row(sb.sibyl_db)
                return row if row["op"] or row["state"] not in SERVING else None

            # Before, the worker was stopped as idle here, a second after the status's
            # answer, on the beat it made before it took the attach.
            row = sb.wait_for(running_or_stopped, timeout=30,
                              what="the beat that shows the attach, or a stop")
            attach_hold.unlink()
            assert row["state"] in SERVING and row["pid"] == pid, row
            def counted_or_stopped() -> dict | None:
                row = sb.row(sb.sibyl_db)
                return row if row["sessions"] or row["state"] not in SERVING else None

            row = sb.wait_for(counted_or_stopped, timeout=30, what="the session counted")
            assert row["pid"] == pid and row["sessions"] == 1, row
    finally:
        for hold in (dispatch_hold, attach_hold):
            hold.unlink(missing_ok=True)
        sb.shutdown()


def test_a_recycle_waits_for_a_beat_that_shows_what_the_last_answer_left():
    """A worker over KINT_WORKER_RECYCLE_MIB is recycled once quiet, sessions or not, but
    its successor is started at once only when the beat says sessions were attached; on a
    beat from before an attach, it was recycled as though none were."""
    host = LifecycleHost(Settings(recycle_mib=10.0))
    t0 = 1000.0
    handle = WorkerHandle(space_id="ab" * 32, label="t", tenant="t", db="/x.db")
    handle.state = "ready"
    handle.beat = {"sessions": 0, "own_mib": 30.0, "has_work": False, "every_s": 1.0}
    handle.last_beat_at = t0
    handle.last_activity = t0 + 0.5  # an attach arrived (and was answered) after that beat
    quiet_at = handle.last_activity + lifecycle.QUIET_SECONDS + 0.5

    host._check_alive(handle, quiet_at)
    assert handle.stop_reason is None and handle.state == "ready"

    handle.beat = {**handle.beat, "sessions": 1}
    handle.heard(quiet_at + 0.1)
    host._check_alive(handle, quiet_at + 0.2)
    assert handle.stop_reason == "recycle" and handle.state == "stopping"


def test_the_supervisors_own_pause_is_no_quiet_for_an_idle_exit():
    """The requests clients send while the supervisor is stopped (a Ctrl-Z) wait unread on
    its socket: its pause is no sign that nobody asked. Counted as quiet, the first sweep
    after the resume stopped as idle a worker whose request was next in line. The quiet
    now counts from the resume, as the workers' silence does."""
    host = LifecycleHost(Settings(idle_s=5.0))
    t0 = 1000.0
    handle = WorkerHandle(space_id="ab" * 32, label="t", tenant="t", db="/x.db")
    handle.state = "ready"
    handle.beat = {"sessions": 0, "has_work": False, "every_s": 1.0}
    handle.last_activity = t0  # the last answer
    handle.last_beat_at = t0 + 0.5  # a beat after it, the one a stop is judged on
    resumed = t0 + 60.0  # the supervisor stopped from t0 + 1 s
    handle.excuse_silence(resumed)
    handle.heard(resumed + 0.01)  # the beats read on resuming

    host._check_alive(handle, resumed + 0.1)
    assert handle.stop_reason is None and handle.state == "ready"
    host._check_alive(handle, resumed + 5.0)  # quiet for the whole idle time since
    assert handle.stop_reason == "idle" and handle.state == "stopping"
