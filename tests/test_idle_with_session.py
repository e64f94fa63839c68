"""A worker with an agent session attached is never stopped as idle, even with the
shortest idle time (KINT_WORKER_IDLE_SECONDS=1) and a session that attached after the
worker's last beat.

The supervisor learns of a session from the worker's beats, and a worker beats up to a
beat interval after the attach's answer. The supervisor once judged idleness on whatever
beat it had read last: between an attach and the beat that reported it, a worker quiet
for the idle time was stopped with its session attached, and the session was lost until
its next keepalive. Here the worker beats every 5 s while it works
(KINT_TEST_BEAT_SECONDS, tests/support/kint_test_timings.py), and the attach itself
starts it: its first beat (no session yet) goes out before it reads the attach, its next
5 s later, so the attach is always answered in that window, 4 s longer than the idle time.

Real parts: the test supervisor over the default store, no chain, and the space's worker.
"""

from __future__ import annotations

from conftest import make_sandbox, write_store

IDLE_S = "1"
BEAT_S = "5"
SERVING = ("ready", "busy")


def test_a_session_attached_after_the_last_beat_keeps_the_worker_from_its_idle_exit(tmp_path):
    sb = make_sandbox(tmp_path / "machine", KINT_WORKER_IDLE_SECONDS=IDLE_S,
                      KINT_TEST_BEAT_SECONDS=BEAT_S)
    sb.start_entitled()
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
