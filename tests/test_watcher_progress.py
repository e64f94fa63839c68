"""A push the store watcher starts runs without a request in flight, yet `kint supervisor
status` shows its progress: the worker's beat carries the progress line whenever one is
set, not only while an op runs.

Real parts: the devchain's anvil behind a loopback RPC proxy (tests/rpc_proxy.py), the
test supervisor and the space's worker, a real watcher started by a session's `attach`.
The proxy answers every receipt null while the push runs (a slow block), so the push
stays at its epoch long enough for a beat to carry its progress to the supervisor.

The line says which op it is of and how long ago that op began: the supervisor keeps a
line until the next beat, so a `kint push` or a `memory_pull` sent just after another op
ended would otherwise show that op's last line as its own first one. The client shows a
line only for its call's op begun since the call was sent (Client.progress_line).

The same push, with the worker told to restart while it waits for its receipt: the push is
no request in flight, and the worker used to exit at once, cutting it between its send and
its receipt and leaving its journal for its successor to settle. It now finishes the push
(within its stop grace), then exits: the same holds for a recycle for its memory and the
supervisor's own stop, which take the same path."""

from __future__ import annotations

import time

from chain_machines import machine_behind_proxy, ok
from conftest import pid_alive, sibyl_client

# Watcher pushes, a beat a second and the chain are slower than wait_for's defaults.
WAIT = {"timeout": 30, "interval": 0.2}
# How long the worker told to restart is watched still running the push: one that does
# not wait for it exits within milliseconds of the stop.
STILL_RUNNING_S = 1.5


def test_a_watcher_push_shows_its_progress_and_a_restart_waits_for_it(tmp_path, chain_home):
    before = time.monotonic()
    with machine_behind_proxy(tmp_path / "machine", chain_home, KINT_POLL_SECONDS="1",
                              KINT_QUIET_SECONDS="0") as (sb, proxy):
        attached = sb.call("attach", sb.sibyl_db,
                           args={"session": "watcher-progress", "watcher": True})
        assert attached["watcher"] is True
        proxy.set_mode("unmined")
        client = sibyl_client(sb.sibyl_db, sb.tenant)
        client.set_entity("notes", "watched", {"text": "pushed by the watcher"})
        client.storage.close()

        # The push's line, not any line: the status is the last beat's, and on a loaded
        # box a beat made while `connect` ran is still the last one read when this starts
        # (its line "connect: authorizing ...", until the beat after the attach's answer).
        row = sb.wait_for(lambda: (r := sb.row(sb.sibyl_db))["progress_op"] == "push" and r,
                          what="the watcher's push in the supervisor's status", **WAIT)
        assert row["progress"].startswith("push: epoch 1 of 1"), row
        assert row["op"] is None  # no request in flight: the watcher's own push
        shown = ok(sb.kint("supervisor", "status")).stdout
        assert "push: epoch 1 of 1" in shown, shown  # the table's OP column says so too

        assert row["head"]["seq"] == 0  # nothing anchored yet: the push waits for its receipt

        # Whose line it is: a push, begun since `before`, and not before the last beat.
        assert row["progress_op"] == "push", row
        assert 0 <= row["progress_age_s"] <= time.monotonic() - before, row
        with sb.client() as client:
            line = client.progress_line(row["space"], "push", before)
            assert line is not None and line.startswith("push: epoch 1 of 1"), line
            # Another op's call is not shown a push's line, nor a push sent after this
            # one began: the line is the last of an op before it.
            assert client.progress_line(row["space"], "pull", before) is None
            assert client.progress_line(row["space"], "push", time.monotonic()) is None

        # Told to restart with the push waiting for its receipt, the worker stays.
        pid = row["pid"]
        ok(sb.kint("supervisor", "restart", row["space"]))
        deadline = time.monotonic() + STILL_RUNNING_S
        while time.monotonic() < deadline:
            assert pid_alive(pid), "the worker exited with its watcher's push in the air"
            time.sleep(0.1)
        assert sb.row(sb.sibyl_db)["state"] == "stopping"

        proxy.forward()
        # (A new worker's first beats carry no head yet: null until it has read one.)
        row = sb.wait_for(lambda: (r := sb.row(sb.sibyl_db))["progress"] is None
                          and r["pid"] not in (None, pid) and r["state"] == "ready"
                          and (r["head"] or {}).get("seq") == 1 and r,
                          what="the push to land and the worker to restart", **WAIT)
        assert row["restarts"] == 0, row  # commanded, not a crash
        assert sb.call("status", sb.sibyl_db, args={"chain": True})["unanchored"] == 0
        # The push ended in the worker that ran it (its watcher's result line, then its
        # clean exit), not in its successor's settling of a journal left behind.
        lines = (sb.kint_home / "supervisor.log").read_text().splitlines()
        own = [line.split(" INFO ", 1)[-1] for line in lines if f" {pid} kint.worker " in line]
        after = own[next(i for i, line in enumerate(own) if "watcher: pushing" in line) + 1:]
        stop = after.index("stop requested (restart)")
        assert "exits (0)" in after[-1], after
        assert any(line.startswith("watcher: ") for line in after[stop + 1:-1]), after
        assert not list(sb.kint_home.rglob("pending-*.json"))
