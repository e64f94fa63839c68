"""A space queued for room whose turn comes while the worker started before it is still
starting (kint/supervisor/room.py): the real supervisor under a low `ulimit -n`, real
workers for a few Sibyl stores.

Every worker but one holds an agent session; that one (X) is idle. Space A's request
finds no room: X is stopped to make it, and A waits. X is held (SIGSTOP) so that space
B's request comes meanwhile and waits behind A. X let go, it exits, and the sweep starts
A's worker; then comes B's turn, with no room and A's worker still starting. B used to
be refused BUSY there ("no room"), though A's worker, its one `status` answered, was
idle a moment later and could have been stopped for B. Now B waits for that, within
its deadline, and is served.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from conftest import let_go_on, make_sandbox
from kint.client import KintError
from support.limited_box import profile_stores, start_limited

# Room for a few workers: the supervisor keeps 16 + LIMIT/8 descriptors free, holds about
# 20 of its own and 3 for each worker.
LIMIT = 56
SPACES = 8


def _in_thread(call) -> tuple[threading.Thread, dict]:  # noqa: ANN001
    """Run `call` on a thread of its own; what it returned or raised lands in the dict."""
    said: dict = {}

    def run() -> None:
        try:
            said["answer"] = call()
        except KintError as err:
            said["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, said


def test_a_space_whose_turn_comes_while_the_other_worker_starts_waits_for_it(tmp_path):
    sb = make_sandbox(tmp_path / "machine")
    dbs = profile_stores(sb, list(range(SPACES)))
    start_limited(sb, LIMIT)
    held = None
    try:
        # Sessions attached until the supervisor has no room for another worker. Each
        # client connected costs it a descriptor: two more are held meanwhile than the
        # requests for A and B hold later, so that the room X leaves is surely A's.
        spare_clients = [sb.client() for _ in range(2)]
        assert all(c.ping(2.0) for c in spare_clients)
        served = []
        for n, db in enumerate(dbs):
            try:
                sb.call("attach", db, args={"session": f"agent-{n}", "watcher": False})
            except KintError as err:
                assert err.code == "BUSY", err
                break
            served.append(db)
        for c in spare_clients:
            c.close()
        assert 2 <= len(served) <= SPACES - 2, served
        space_a, space_b = dbs[len(served)], dbs[len(served) + 1]

        # X's session ends: once a beat after that is read, X may be stopped for room.
        x = served[0]
        sb.call("detach", x, args={"session": "agent-0"})
        detached = time.monotonic()

        def x_idle():
            asked = time.monotonic()
            row = sb.row(x)
            age = row["last_beat_age_s"]
            return row["sessions"] == 0 and age is not None and age < asked - detached and row

        held = sb.wait_for(x_idle, timeout=20, what="a beat of X after its session ended")["pid"]
        os.kill(held, signal.SIGSTOP)
        a_thread, a_said = _in_thread(lambda: sb.call("status", space_a, timeout_s=40))
        sb.wait_for(lambda: sb.row(x)["state"] == "stopping", timeout=20,
                    what="X stopped to make room for A")
        b_thread, b_said = _in_thread(lambda: sb.call("status", space_b, timeout_s=40))
        sb.wait_for(lambda: any(r["store"] == str(space_b) and r["waiting"] == 1
                                for r in sb.sup_status()["spaces"]),
                    timeout=20, what="B's request queued behind A's")
        os.kill(held, signal.SIGCONT)  # X exits; A's worker starts, and B's turn comes
        for thread in (a_thread, b_thread):
            thread.join(60)
        assert "answer" in a_said, a_said
        assert "answer" in b_said, b_said  # once refused BUSY: "no room to start the worker"
        assert b_said["answer"]["store"]["exists"], b_said
        rows = {r["store"]: r for r in sb.sup_status()["spaces"]}
        assert rows[str(space_b)]["state"] == "ready" and rows[str(space_b)]["no_room"] is None
        assert rows[str(space_a)]["pid"] is None and rows[str(space_a)]["restarts"] == 0
        for other in served[1:]:  # the spaces with sessions kept their workers
            assert rows[str(other)]["state"] == "ready", rows[str(other)]
        log = (sb.kint_home / "supervisor.log").read_text()
        assert "Traceback" not in log and "quarantined" not in log, log[-3000:]
    finally:
        let_go_on(held)
        sb.shutdown()
