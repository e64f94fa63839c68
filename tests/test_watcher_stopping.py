"""A store watcher's push that came due in a stopping worker's grace started a chain push
the grace could cut between its send and its receipt. The mend of last session had the
watcher look at the worker's stop (a callback) at each push it found due: till one came
due it went on ticking in a worker on its way out, and said nothing of the rows it left
unless a push came due. Now the worker stops its watcher as its stop begins (process.py,
beside head_lock.HeadTurn.stop: Watcher.stop): the watcher says once, then, that the
store's rows are left for the worker's next start, and ticks no more; the next worker
counts those rows and pushes them. The gate behind it, for a push of the watcher's already
under way as the stop begins (head_lock._take's `refuse_stopping`, asked for the watcher's
push in tenant_worker/sessions.py), is proven by tests/test_head_lock.py's
test_once_the_workers_stop_began_the_watchers_push_is_refused_and_a_users_op_runs and by
tests/test_watcher_push_settings.py's look at what the watcher's push is asked with; the
second test here proves that the watcher says what it leaves once, never twice, when the
stop meets a tick of its between the count and the push, or a push of its own begun (the
gate refuses it, and that push says it). A user's op the worker took before the stop still
runs in the grace (tests/test_stop_grace_queued_op.py).

Real parts: the devchain's anvil behind a loopback RPC proxy (tests/rpc_proxy.py) that
holds a pull's head read, so the watcher's push, due, waits for it (its turn taken) until
the stop has begun; the test supervisor and the space's worker, its watcher started by a
session's `attach`; a second `attach` held on the worker's pool
(KINT_TEST_HOLD_ATTACH, tests/support/kint_test_faults.py), which keeps the stopping
worker in its grace once the pull ends; the supervisor's own restart of the space; rows
written through Sibyl's own client.

Once the pull has ended in the grace, the watcher's push is due and the space's turn free:
a watcher still ticking pushes, or says it did not (the gate), at its next tick (a poll is
0.25 s here). The test lets the grace run on for BEATS of the stopping worker's beats
(a second apart while it has an op in flight), each seen in `kint supervisor status`, before
it lets the worker go, and then reads the stopping worker's lines: nothing of the watcher
after its stop's own line.

The premise, the pull's end and those beats inside the stopping worker's grace, must fit
in that grace: at its 10 s a slow box could end the grace first, and the test fail with
nothing wrong. KINT_TEST_STOP_GRACE_S (tests/support/kint_test_timings.py) gives it 60 s
here, the supervisor's SIGKILL 5 s past it; the held attach, not the grace, is what keeps
the worker stopping until the test lets it go.

A session's attach that asks for the watcher, run in the grace, starts none (the next
worker's runs): the second test, with the same real parts, and the third for a stop begun
between the attach's look at it and the watcher's start; the fourth, for one begun as the
watcher's start counts (or just after), proves the stop's line said once, and no thread;
the last proves that the stop says no rows are left for a next start that would not push
them either.

The fifth test drives a real Watcher over a real store file, its tick on a thread of the
test's, with a worker's real space context (tests/test_head_lock.py's `_worker`): the stop
is the one process.py makes (HeadTurn.stop, then Watcher.stop), and the push takes the real
`head_op` with the watcher's `refuse_stopping`. Stand-ins: the count (its answer, and a
wait where the test stops the worker) and the push's body past its turn, as in
tests/test_watcher_own_op.py: no real tick can be stopped at will between its steps."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from chain_machines import anchored, machine_behind_proxy, new_machine, ok
from conftest import write_rules, write_store
from support.attach_in_flight import attach_in_flight
from test_head_lock import _worker
from test_watcher_own_op import ENV, MET, WAIT, _changed, _op, _pull_held_at_head_read

STOPPED = ("watcher: stopped: the worker is stopping (restart); the store's rows are left "
           "for the worker's next start")
STOPPING = "stop requested (restart)"
LEFT = "were left unanchored by an earlier session"
# Room for the premise in the stopping worker's grace (the default's 10 s, on a slow box).
GRACE = {"KINT_TEST_STOP_GRACE_S": "60"}
# The stopping worker's beats the grace runs on for after the pull ends: a dozen polls.
BEATS = 3


def _beats(sb, db, count: int) -> None:
    """Wait for `count` beats of the space's worker, each seen as its row's
    `last_beat_age_s` going down (a beat newer than the one last read)."""
    last = [sb.row(db)["last_beat_age_s"]]

    def newer() -> bool:
        age = sb.row(db)["last_beat_age_s"]
        was, last[0] = last[0], age
        return age is not None and was is not None and age < was

    for n in range(count):
        sb.wait_for(newer, what=f"the stopping worker's beat {n + 1}", **WAIT)



def _restart_in_flight(sb) -> threading.Thread:
    """The supervisor's own restart of the space's worker (`sup.restart`), sent on a thread:
    its stop waits in its grace for the op the test holds."""
    restarter = threading.Thread(
        target=sb.call, args=("sup.restart",),
        kwargs={"args": {"target": sb.tenant}, "timeout_s": 120}, daemon=True)
    restarter.start()
    return restarter

def test_the_watcher_stops_as_its_worker_does_and_the_next_worker_pushes_its_rows(
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
            # A push is due (quiet 0) and waits for the pull: the store is dirty.
            sb.wait_for(lambda: MET in log_path.read_text(),
                        what="the watcher's push waiting for the pull", **WAIT)
            hold.touch()
            caller = attach_in_flight(sb, attached, timeout_s=120)
            sb.wait_for(lambda: (sb.row(db).get("ops_running") or 0) >= 2,
                        what="the held attach in flight beside the pull", **WAIT)
            restarter = _restart_in_flight(sb)
            # The stop begins with the pull in flight: the watcher stops there and then, and
            # says what it leaves (before, nothing was said until a push came due).
            sb.wait_for(lambda: STOPPED in log_path.read_text(),
                        what="the watcher stopped as the worker's stop began", **WAIT)
            # The pull ends; the held attach keeps the worker in its stop's grace, where a
            # watcher still ticking would find its push due and the space's turn free.
            proxy.forward()
            pull.join(120)
            assert not pull.is_alive()
            _beats(sb, db, BEATS)
            assert sb.row(db)["pid"] == old  # still the stopping worker, in its grace
        finally:
            if hold.exists():
                hold.unlink()  # the attach ends: the worker exits
            proxy.forward()
            pull.join(120)
            for thread in (caller, restarter):
                if thread is not None:
                    thread.join(120)
        # The next worker (the restart's, the session handed over) counts the rows the
        # stopping one left and pushes them.
        sb.wait_for(lambda: (sb.row(db)["head"] or {}).get("seq") == 2,
                    what="the next worker's push of the rows", **WAIT)
        new = sb.row(db)["pid"]
        assert new != old
        status = ok(sb.kint("status", "--json")).stdout
        assert '"watcher_failure": null' in status, status
        text = log_path.read_text()
        assert [line for line in text.splitlines()
                if f" {new} kint.worker " in line and LEFT in line], text
        # The stopping worker's own lines: its watcher said once what it left, as the stop
        # began, and nothing after: no tick, no push, no refused push, no failure.
        said = [line for line in text.split(STOPPING, 1)[1].splitlines()
                if f" {old} kint.worker " in line]
        assert sum(STOPPED in line for line in said) == 1, said
        after = said[[STOPPED in line for line in said].index(True) + 1:]
        assert not [line for line in after if "watcher:" in line], said
        assert not [line for line in said if "anchored" in line or "push failed" in line
                    or "eth_sendRawTransaction" in line], said


def test_a_watcher_an_attach_asks_for_in_the_stops_grace_is_the_next_workers(
        tmp_path, chain_home):
    """A session's `attach` asking for the watcher, taken by the worker before its stop
    and run in the stop's grace, in a space that had none: the watcher is made (the
    handoff says the space runs one) but not started, and the next worker's watcher counts
    the store and pushes it. Started, its count ran in the grace and its push came due
    there (refused by the stop's gate), though the stop had stopped every watcher there was.

    Real parts: the devchain's anvil, the test supervisor and the space's worker, the
    attach held on the worker's pool (KINT_TEST_HOLD_ATTACH) until the stop began, the
    supervisor's own restart, rows written through Sibyl's own client. The stop's begun
    is seen as its line and then two beats: the loop's turn after the one that logged the
    stop request sends its beat, then stops the watcher (process.py), so the second beat
    seen after it comes from a turn after the one that stopped the watcher."""
    hold = tmp_path / "hold-attach"
    with anchored(new_machine(tmp_path / "m", chain_home, KINT_TEST_HOLD_ATTACH=str(hold),
                              **GRACE, **ENV), first="pushed before the stop") as sb:
        db = sb.sibyl_db
        log_path = sb.kint_home / "supervisor.log"
        write_rules(db, sb.tenant, second="written before the stop")
        old = sb.row(db)["pid"]
        out: dict = {}
        hold.touch()
        caller = restarter = None
        try:
            # Held on the worker's pool: returned once the worker runs it.
            caller = attach_in_flight(sb, out, timeout_s=120, watcher=True)
            restarter = _restart_in_flight(sb)
            sb.wait_for(lambda: STOPPING in log_path.read_text(),
                        what="the worker's stop begun", **WAIT)
            _beats(sb, db, 2)
            assert sb.row(db)["pid"] == old  # still the stopping worker, in its grace
        finally:
            if hold.exists():
                hold.unlink()  # the attach runs, in the grace; then the worker exits
            for thread in (caller, restarter):
                if thread is not None:
                    thread.join(120)
        assert out.get("reply", {}).get("watcher") is True, out
        sb.wait_for(lambda: (sb.row(db)["head"] or {}).get("seq") == 2,
                    what="the next worker's push of the rows", **WAIT)
        new = sb.row(db)["pid"]
        assert new != old
        text = log_path.read_text()
        assert [line for line in text.splitlines()
                if f" {new} kint.worker " in line and LEFT in line], text
        said = [line for line in text.split(STOPPING, 1)[1].splitlines()
                if f" {old} kint.worker " in line]
        assert not [line for line in said if "watcher" in line or LEFT in line], said


def test_a_watcher_the_stop_stopped_before_its_start_never_starts(tmp_path):
    """The stop that begins between the attach's look at it and the watcher's start stops
    the watcher just made (process.py): its start makes no count and no thread. A real
    Watcher over a real store; the unit level because that window between two lines of
    sessions.attach cannot be hit at will in a running worker; the count is a stand-in
    that tells whether it was made."""
    from kint.tenant_worker.watcher import Watcher

    counted: list[int] = []
    watcher = Watcher(str(write_store(tmp_path / "memory.db")),
                      lambda: counted.append(1) or (1, 0), lambda reason: None,
                      generation=lambda: 0)
    watcher.stop("the worker is stopping (restart)")
    watcher.start()
    assert counted == [] and not watcher.dirty
    assert not watcher._thread.is_alive() and watcher._thread.ident is None


@pytest.mark.parametrize("met", ["count", "after"])
def test_a_stop_that_meets_the_watchers_start_count_is_said_once_and_starts_no_thread(
        tmp_path, caplog, met):
    """A watcher's start (an attach the worker took before its stop, or the handoff's
    `pool.submit(watcher.start)` in worker_start.py) counts what an earlier session left.
    A stop begun while that count ran (`met` "count") saw no dirty store and said nothing;
    the count then said the rows "are pushed at the next quiet period", and the thread
    started and ended at once: no push, nor the stop's line (docs/faults.md). Now the
    start says the stop's line as its count ends, the count's own line says no push, and
    no thread starts. A stop after the count, before the thread starts (`met` "after"),
    says the line itself, and the start not again. Either way exactly one line.

    The unit level: the window is one count long, between two steps of Watcher.start, and
    a running worker's stop cannot be made to begin inside it at will. A real Watcher over
    a real store file; stand-ins: the count (rows left, and for "count" a wait where the
    test stops the watcher), and for "after" the watcher's own `_start_count` wrapped so
    that the stop comes as it returns."""
    from kint.tenant_worker.watcher import Watcher
    from kint.tenant_worker.watcher_push import ROWS_LEFT

    caplog.set_level(logging.INFO, logger="kint.worker")
    why = "the worker is stopping (restart)"
    at, go = threading.Event(), threading.Event()
    pushed: list[str] = []

    def count() -> tuple[int, int]:
        if met == "count":
            at.set()
            assert go.wait(30)
        return 3, 0

    watcher = Watcher(str(write_store(tmp_path / "memory.db")), count, pushed.append,
                      generation=lambda: 0)
    counted = watcher._start_count

    def count_then_stop(*args):
        counts = counted(*args)
        watcher.stop(why)
        return counts

    if met == "after":
        watcher._start_count = count_then_stop
    starter = threading.Thread(target=watcher.start)
    try:
        starter.start()
        if met == "count":
            assert at.wait(30)
            watcher.stop(why)  # as process.py makes it, the count still running
            go.set()
        starter.join(30)
        assert not starter.is_alive()
    finally:
        go.set()
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("watcher:")]
    stopped = f"watcher: stopped: {why}; {ROWS_LEFT}"
    assert [line for line in said if ROWS_LEFT in line] == [stopped], said
    # The count's line first; it promises a push only where no stop had begun by then.
    count_line = "watcher: 3 changed and 0 deleted row(s) were left unanchored by an earlier " \
        "session" + ("" if met == "count" else "; they are pushed at the next quiet period")
    assert said[-2:] == [count_line, stopped], said
    assert watcher.dirty and pushed == [] and watcher._thread.ident is None  # no thread


@pytest.mark.parametrize("met", ["count", "push"])
def test_a_stop_that_meets_a_tick_on_its_way_to_a_push_is_said_once(
        tmp_path, monkeypatch, caplog, met):
    """The stop comes as the tick's count runs (`met` "count": the push is not started,
    and the stop says what it leaves) or as its push has begun, before the space's turn
    (`met` "push": the stop's gate refuses the push, which says it; the stop says nothing).
    Either way one line, and no push, no failure."""
    from kint.tenant_worker.head_lock import head_op
    from kint.tenant_worker.watcher import Watcher
    from kint.tenant_worker.watcher_push import ROWS_LEFT

    monkeypatch.setenv("KINT_QUIET_SECONDS", "0")
    monkeypatch.setenv("KINT_POLL_SECONDS", "15")
    caplog.set_level(logging.INFO, logger="kint.worker")
    worker, _ = _worker(tmp_path)
    ctx = worker.ctx
    db = write_store(tmp_path / "memory.db")
    at, go = threading.Event(), threading.Event()
    pushed: list[str] = []

    def count() -> tuple[int, int]:
        if met == "count":
            at.set()
            assert go.wait(30)
        return 1, 0

    def push(reason: str) -> None:
        if met == "push":
            at.set()
            assert go.wait(30)
        with head_op(ctx, "push", lock_file=False, refuse_stopping=True):
            pushed.append(reason)

    watcher = Watcher(str(db), count, push, generation=lambda: 0,
                      own_op=lambda: ctx.head_op_began)
    ticker = threading.Thread(target=watcher.tick, args=(time.monotonic(),))
    try:
        _changed(db, 10)
        ticker.start()  # the store changed, past the quiet period: a push due
        assert at.wait(30)
        # The worker's stop, as process.py makes it.
        ctx.head_ops.stop("restart")
        watcher.stop(ctx.head_ops.stopped)
        go.set()
        ticker.join(30)
        assert not ticker.is_alive()
    finally:
        go.set()
        worker.close()
    said = [r.getMessage() for r in caplog.records if ROWS_LEFT in r.getMessage()]
    why = "the worker is stopping (restart)"
    assert said == [f"watcher: stopped: {why}; {ROWS_LEFT}" if met == "count" else
                    f"watcher: push (quiet trigger) not started: {why}; {ROWS_LEFT}"], said
    assert pushed == [] and watcher.dirty and watcher.backoff.failure is None
    # A push begun says so before its refusal; one the stop met first never began.
    pushing = [r for r in caplog.records if "watcher: pushing" in r.getMessage()]
    assert bool(pushing) == (met == "push"), caplog.text


@pytest.mark.parametrize("why", ["cannot push", "count fails for good"])
def test_an_idle_stop_of_a_store_no_next_start_pushes_says_no_rows_are_left_for_it(
        tmp_path, monkeypatch, caplog, why):
    """A dirty store this worker cannot push (no cached data key: the count answers None)
    or cannot count until a file is mended (CountFailed, lasting) is no work (`work_left`),
    so the idle stop takes it; nor would the next worker's start push it, so the stop does
    not say its rows are left for that start (it did, at every idle stop after a write in
    a space not connected yet). A real Watcher over a real store file, its tick made by
    the test; the count is a stand-in for the two answers (a real space without a data key
    or with a damaged store would say the same through sessions._changes_to_push)."""
    from kint.tenant_worker.unanchored import CountFailed
    from kint.tenant_worker.watcher import Watcher
    from kint.tenant_worker.watcher_push import ROWS_LEFT

    monkeypatch.setenv("KINT_QUIET_SECONDS", "0")
    caplog.set_level(logging.INFO, logger="kint.worker")
    db = write_store(tmp_path / "memory.db")
    pushed: list[str] = []

    def count() -> tuple[int, int] | None:
        if why == "cannot push":
            return None
        raise CountFailed(f"{db}: file is not a database", lasting=True)

    watcher = Watcher(str(db), count, pushed.append, generation=lambda: 0)
    _changed(db, 10)
    watcher.tick(time.monotonic())  # the store changed, past the quiet period: counted
    assert watcher.dirty and not watcher.work_left(0) and pushed == []
    watcher.stop("the worker is stopping (idle)")
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("watcher:")]
    assert "watcher: store changed" in said, said
    assert not [line for line in said if ROWS_LEFT in line or "stopped" in line], said
