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

from conftest import let_go_on, make_sandbox
from support.limited_box import (fill_with_sessions, idle_after_detach, in_thread,
                                 profile_stores, start_limited)

# Room for a few workers: the supervisor keeps 16 + LIMIT/8 descriptors free, holds about
# 20 of its own and 3 for each worker.
LIMIT = 56
SPACES = 8


def test_a_space_whose_turn_comes_while_the_other_worker_starts_waits_for_it(tmp_path):
    sb = make_sandbox(tmp_path / "machine")
    dbs = profile_stores(sb, list(range(SPACES)))
    start_limited(sb, LIMIT)
    held = None
    try:
        # Sessions attached until the supervisor has no room for another worker, while
        # as many clients are held as the requests for A and B hold later.
        served = fill_with_sessions(sb, dbs, spare=2)
        space_a, space_b = dbs[len(served)], dbs[len(served) + 1]

        # X's session ends: once a beat after that is read, X may be stopped for room.
        x = served[0]
        held = idle_after_detach(sb, x, "agent-0")
        os.kill(held, signal.SIGSTOP)
        a_thread, a_said = in_thread(lambda: sb.call("status", space_a, timeout_s=40))
        sb.wait_for(lambda: sb.row(x)["state"] == "stopping", timeout=20,
                    what="X stopped to make room for A")
        b_thread, b_said = in_thread(lambda: sb.call("status", space_b, timeout_s=40))
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
