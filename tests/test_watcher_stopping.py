"""A store watcher's push that came due in a stopping worker's grace started a chain push
the grace could cut between its send and its receipt: the worker's stop refused only an
exit push that waited its turn (head_lock.HeadTurn.stop), while the watcher, never
stopped, took the space's turn like any op. Now the watcher does not start a push once the
stop began, and reads that as no failure: it says once that it did not start the push and
pushes no more; the store's rows wait for the worker's next start. In this test's order of
events (the pull ends, the stop has begun, then the watcher ticks) it is the watcher's own
look (watcher.Watcher._stopping, the space's HeadTurn.stopped) that meets the stop, before
its count: what this proves is that look and its one line. The gate behind it, for a stop
that begins after the look (head_lock._take's `refuse_stopping`, asked for the watcher's
push in tenant_worker/sessions.py), is proven by tests/test_head_lock.py's
test_once_the_workers_stop_began_the_watchers_push_is_refused_and_a_users_op_runs and by
tests/test_watcher_push_settings.py's look at what the watcher's push is asked with. A
user's op the worker took before the stop still runs in the grace
(tests/test_stop_grace_queued_op.py).

Real parts: the devchain's anvil behind a loopback RPC proxy (tests/rpc_proxy.py) that
holds a pull's head read, so the watcher's push waits for it (its turn taken) until the
stop has begun; the test supervisor and the space's worker, its watcher started by a
session's `attach`; a second `attach` held on the worker's pool
(KINT_TEST_HOLD_ATTACH, tests/support/kint_test_faults.py), which keeps the stopping
worker in its grace once the pull ends; the supervisor's own restart of the space; rows
written through Sibyl's own client.

The premise, the watcher's tick coming inside the stopping worker's grace after the pull
has ended, must fit in that grace: at its 10 s a slow box could end the grace first, and
the test fail with nothing wrong. KINT_TEST_STOP_GRACE_S (tests/support/kint_test_timings.py)
gives it 60 s here, the supervisor's SIGKILL 5 s past it; the held attach, not the grace,
is what keeps the worker stopping until the test lets it go."""

from __future__ import annotations

import threading

from chain_machines import machine_behind_proxy, ok
from conftest import write_rules
from support.attach_in_flight import attach_in_flight
from test_watcher_own_op import ENV, MET, WAIT, _op, _pull_held_at_head_read

NOT_STARTED = ("watcher: push (quiet trigger) not started: the worker is stopping "
               "(restart); the store's rows are left for the worker's next start")
STOPPING = "stop requested (restart)"
# Room for the premise in the stopping worker's grace (the default's 10 s, on a slow box).
GRACE = {"KINT_TEST_STOP_GRACE_S": "60"}


def test_a_push_due_in_a_stopping_workers_grace_is_not_started_and_the_next_worker_pushes_it(
        tmp_path, chain_home):
    hold = tmp_path / "hold-attach"
    with machine_behind_proxy(tmp_path / "m", chain_home, KINT_TEST_HOLD_ATTACH=str(hold),
                              **GRACE, **ENV) as (sb, proxy):
        db = sb.sibyl_db
        log_path = sb.kint_home / "supervisor.log"
        # The pull's head read is held until the test lets it go.
        pull, _, seen = _pull_held_at_head_read(sb, proxy, db, "pushed before the stop", 60)
        attached: dict = {}
        caller = restarter = None
        try:
            sb.wait_for(lambda: "eth_call" in proxy.calls[seen:] and _op(sb, db) == "pull",
                        what="the pull in flight, at its head read", **WAIT)
            old = sb.row(db)["pid"]
            write_rules(db, sb.tenant, second="written while the pull runs")
            # A push is due (quiet 0) and waits for the pull.
            sb.wait_for(lambda: MET in log_path.read_text(),
                        what="the watcher's push waiting for the pull", **WAIT)
            hold.touch()
            caller = attach_in_flight(sb, attached, timeout_s=120)
            sb.wait_for(lambda: (sb.row(db).get("ops_running") or 0) >= 2,
                        what="the held attach in flight beside the pull", **WAIT)
            restarter = threading.Thread(
                target=sb.call, args=("sup.restart",),
                kwargs={"args": {"target": sb.tenant}, "timeout_s": 120}, daemon=True)
            restarter.start()
            sb.wait_for(lambda: STOPPING in log_path.read_text(),
                        what="the stop read by the worker", **WAIT)
            # The pull ends; the held attach keeps the worker in its stop's grace, where
            # the watcher's next tick finds its push due and the space's turn free.
            proxy.forward()
            pull.join(120)
            sb.wait_for(lambda: NOT_STARTED in (t := log_path.read_text())
                        or "epoch 2 anchored" in t,
                        what="the watcher's push in the grace, refused or made", **WAIT)
        finally:
            if hold.exists():
                hold.unlink()  # the attach ends: the worker exits
            proxy.forward()
            pull.join(120)
            for thread in (caller, restarter):
                if thread is not None:
                    thread.join(120)
        # The next worker (the restart's, the session handed over) pushes the rows.
        sb.wait_for(lambda: (sb.row(db)["head"] or {}).get("seq") == 2,
                    what="the next worker's push of the rows", **WAIT)
        assert sb.row(db)["pid"] != old
        status = ok(sb.kint("status", "--json")).stdout
        assert '"watcher_failure": null' in status, status
        # The stopping worker's own lines: it started no push, said so once, and recorded
        # no failure; the epoch is the next worker's.
        said = [line for line in log_path.read_text().split(STOPPING, 1)[1].splitlines()
                if f" {old} kint.worker " in line]
        assert [line for line in said if NOT_STARTED in line], said
        assert sum(NOT_STARTED in line for line in said) == 1, said
        # The stop was seen before the push's count: the one line, no "pushing" before it
        # (nor the diff of the store it cost).
        assert not [line for line in said if "watcher: pushing" in line], said
        assert not [line for line in said if "anchored" in line or "push failed" in line
                    or "eth_sendRawTransaction" in line], said
