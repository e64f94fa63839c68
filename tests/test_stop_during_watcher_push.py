"""A worker told to stop (a recycle for its memory, `kint supervisor restart`, the
supervisor's own stop) while its store watcher's push waits for its receipt: the push is
no request in flight, and the worker used to exit at once, cutting it between its send and
its receipt and leaving its journal for the next worker to settle. It now finishes the
push first (within its stop grace), then exits.

Real parts: the devchain's anvil behind a loopback RPC proxy (tests/rpc_proxy.py) that
answers every receipt null while the push runs (a slow block), the test supervisor, a real
watcher started by a session's `attach`.
"""

from __future__ import annotations

import time

from chain_machines import machine_behind_proxy, ok
from conftest import pid_alive, sibyl_client

WAIT = {"timeout": 30, "interval": 0.2}
# How long the stopped worker is watched still running its push: a worker that does not
# wait for it exits within milliseconds of the stop.
STILL_RUNNING_S = 1.5


def test_a_restart_waits_for_the_watchers_push_to_land(tmp_path, chain_home):
    with machine_behind_proxy(tmp_path / "machine", chain_home, KINT_POLL_SECONDS="1",
                              KINT_QUIET_SECONDS="0") as (sb, proxy):
        sb.call("attach", sb.sibyl_db, args={"session": "stop-mid-push", "watcher": True})
        proxy.set_mode("unmined")
        client = sibyl_client(sb.sibyl_db, sb.tenant)
        client.set_entity("notes", "watched", {"text": "pushed by the watcher"})
        client.storage.close()
        row = sb.wait_for(lambda: (r := sb.row(sb.sibyl_db))["progress"] and r,
                          what="the watcher's push waiting for its receipt", **WAIT)
        assert row["progress"].startswith("push: epoch 1 of 1") and row["op"] is None, row
        pid = row["pid"]

        ok(sb.kint("supervisor", "restart", row["space"]))
        deadline = time.monotonic() + STILL_RUNNING_S
        while time.monotonic() < deadline:
            assert pid_alive(pid), "the worker exited with its watcher's push in the air"
            time.sleep(0.1)
        assert sb.row(sb.sibyl_db)["state"] == "stopping"

        proxy.forward()  # the receipt comes: the push lands, then the worker exits
        row = sb.wait_for(lambda: (r := sb.row(sb.sibyl_db))["pid"] not in (None, pid)
                          and r["state"] == "ready" and r, what="the restarted worker", **WAIT)
        assert row["head"]["seq"] == 1 and row["restarts"] == 0, row
        # The push ended in the worker that ran it (its watcher's result line, then its
        # clean exit), not in its successor's settling of a journal left behind.
        lines = (sb.kint_home / "supervisor.log").read_text().splitlines()
        own = [line for line in lines if f" {pid} kint.worker " in line]
        pushing = next(i for i, line in enumerate(own) if "watcher: pushing" in line)
        after = [line.split(" INFO ", 1)[-1] for line in own[pushing + 1:]]
        assert after[0] == "stop requested (restart)" and "exits (0)" in after[-1], after
        assert any(line.startswith("watcher: ") for line in after[1:-1]), after
        assert not list(sb.kint_home.rglob("pending-*.json"))
        assert sb.call("status", sb.sibyl_db, args={"chain": True})["unanchored"] == 0
