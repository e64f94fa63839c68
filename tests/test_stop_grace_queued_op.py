"""A user's `push` the worker took before its stop, still queued on its op pool (not yet at
the space's turn) when a restart or the supervisor's stop begins, runs in the stop's grace
and its client gets the push's answer, as README promises a request in flight ("still get
their worker's answers when they finish within its 10 s stop grace"). When the head lock's
stop gate held for every op (review34a M1) it was refused `WORKER_DOWN` `the worker is
stopping (restart)` without starting, with the hint "the worker is being restarted" even
on the supervisor's stop; only the store watcher's own push is refused now
(head_lock._take's `refuse_stopping`, tests/test_head_lock.py), and the watcher itself
stops as the worker's stop begins (tests/test_watcher_stopping.py).

Real parts: the devchain's anvil, the test supervisor and the space's worker; four
`attach`es held on the worker's pool of four threads (KINT_TEST_HOLD_ATTACH,
tests/support/kint_test_faults.py), so the push waits in the pool until the test lets them
go, after the worker logged the stop; rows written through Sibyl's own client."""

from __future__ import annotations

import threading

import pytest

from chain_machines import anchored, new_machine
from conftest import write_rules
from kint.client import KintError
from kint.tenant_worker.config import WorkerConfig

# The worker's op pool, filled by held attaches so the push waits in its queue.
POOL = WorkerConfig.threads


@pytest.mark.parametrize("how", ["restart", "stop"])
def test_a_users_push_queued_before_the_stop_runs_in_its_grace(tmp_path, chain_home, how):
    hold = tmp_path / "hold-attach"
    with anchored(new_machine(tmp_path / "m", chain_home, KINT_TEST_HOLD_ATTACH=str(hold)),
                  first="pushed before the stop") as sb:
        db = sb.sibyl_db
        log_path = sb.kint_home / "supervisor.log"
        write_rules(db, sb.tenant, second="queued behind the held attaches")
        out: dict[str, object] = {}

        def attach(i: int) -> None:
            try:
                sb.call("attach", db, timeout_s=120,
                        args={"session": f"agent-{i}", "watcher": False})
            except KintError as err:
                out[f"agent-{i}"] = err

        def push() -> None:
            try:
                out["push"] = sb.call("push", db, timeout_s=120)
            except KintError as err:
                out["push"] = f"{err.code}: {err.message} | hint: {err.hint}"

        hold.touch()
        threads = [threading.Thread(target=attach, args=(i,), daemon=True)
                   for i in range(POOL)]
        stopper = None
        try:
            for thread in threads:
                thread.start()
            sb.wait_for(lambda: (sb.row(db).get("ops_running") or 0) >= POOL,
                        what="the held attaches on every thread of the pool")
            pusher = threading.Thread(target=push, daemon=True)
            threads.append(pusher)
            pusher.start()
            sb.wait_for(lambda: (sb.row(db).get("ops_running") or 0) > POOL,
                        what="the push in flight, queued behind them")
            if how == "restart":
                stopper = threading.Thread(
                    target=sb.call, args=("sup.restart",),
                    kwargs={"args": {"target": sb.tenant}, "timeout_s": 120}, daemon=True)
            else:
                stopper = threading.Thread(target=sb.call, args=("sup.stop",),
                                           kwargs={"timeout_s": 120}, daemon=True)
            stopper.start()
            sb.wait_for(lambda: "stop requested" in log_path.read_text(),
                        what="the stop read by the worker")
        finally:
            hold.unlink()  # the attaches end: the push takes a thread, then the turn
            for thread in threads:
                thread.join(120)
            if stopper is not None:
                stopper.join(120)
        result = out["push"]
        assert isinstance(result, dict), result
        assert result["pushed"] == 1 and result["head_seq"] == 2, result
