"""What an exit push's wait for its turn (push.push, head_lock._wait_turn) may not do.
Each waiting exit push sat on a thread of the worker's op pool (4): four closing sessions
of one store filled it, and every other op of the space (an attach's keepalive, a
verify) waited behind the op they waited for. A plain `push` request that sent
hold_reason "exit" waited too, chosen by the wire. A stop during the wait killed the
exit push unlogged at the stop's grace, or let it start a chain push in a stopping
worker. And it waited the exit_push op's whole bound, so it pushed after the supervisor
had timed it out.

Real parts: a worker's real space context and op pool (tests/test_head_lock.py's
`_worker`, its turn's waits counted), a real pull's `head_op` holding the turn
(tests/test_watcher_own_op.py's `_pulling`), the real exit push and push handlers.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from test_head_lock import _worker
from test_watcher_own_op import _pulling
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.ops import OPS


def _ended(results: list, done: threading.Event, count: int):
    """A `then` for the pool that records each exit push's end, setting `done` at `count`."""
    def then(result) -> None:
        results.append(result)
        if len(results) == count:
            done.set()
    return then


def _exit_push(ctx):
    """The exit push as the worker runs it, its refusal returned rather than raised."""
    from kint.tenant_worker.sessions import exit_push

    try:
        return exit_push(ctx, {})
    except ProtocolError as err:
        return err


def test_one_exit_push_waits_and_a_fifth_op_of_the_space_runs_meanwhile(
        tmp_path, monkeypatch, caplog):
    """Four exit pushes meet a running pull on a worker of four pool threads: one waits at a
    time, the latest, and each earlier one answers once a later one waits in its place that
    it leaves its rows to it (logged, no failure), so three have answered while the pull
    still holds the turn, and a fifth op of the space runs meanwhile."""
    from kint.tenant_worker import exit_bound
    from kint.tenant_worker import push as push_mod

    monkeypatch.setattr(exit_bound, "EXIT_TURN_S", 120)
    caplog.set_level(logging.INFO, logger="kint.worker")
    worker, seen = _worker(tmp_path)
    ctx = worker.ctx
    assert worker.config.threads == 4
    ended: list = []
    three_answered, ran = threading.Event(), threading.Event()
    holder: list = []
    try:
        with _pulling(ctx):
            for number in range(1, 5):
                worker.pool.submit(_exit_push, ctx, then=_ended(ended, three_answered, 3))
                assert seen.waiting(number)  # this one waits its turn (in its place)
            worker.pool.submit(lambda: (holder.append(ctx.head_op_began), ran.set()))
            assert ran.wait(60) and three_answered.wait(60)
            # It ran while the pull still held the turn, not once the pull let go.
            assert holder[0] is not None and holder[0][0] == "pull", holder
            assert ctx.head_ops.wait_until is not None  # the fourth still waits
        assert all(r["message"] == push_mod.LEFT_TO_WAITING for r in ended[:3]), ended
        assert caplog.text.count("exit push: left to another exit push of the space") == 3
    finally:
        worker.close()


def test_a_plain_push_request_saying_exit_is_refused_busy_at_once(tmp_path, monkeypatch):
    """The wait is the exit push's (sessions.exit_push), not a request's hold_reason: a
    `push` request sent with hold_reason "exit" is refused BUSY behind a running op, with
    no wait on the turn."""
    from kint.tenant_worker import exit_bound
    from kint.tenant_worker import push as push_mod
    from kint.tenant_worker.head_lock import TurnTaken

    monkeypatch.setattr(exit_bound, "EXIT_TURN_S", 1)
    worker, seen = _worker(tmp_path)
    try:
        with _pulling(ctx := worker.ctx):
            with pytest.raises(TurnTaken) as refused:
                push_mod.push(ctx, {"hold_reason": "exit"})
            assert seen.waits == 0, "it waited its turn"
        assert "a pull is already running for this space" in refused.value.message
    finally:
        worker.close()


def test_a_stop_ends_a_waiting_exit_push_logged_and_starts_no_push(
        tmp_path, monkeypatch, caplog):
    """The worker stops (HeadTurn.stop, as `_dispatch` calls it, or its loop for a SIGTERM)
    while an exit push waits for a pull: the exit push ends refused WORKER_DOWN naming the
    stop, logged as not started, while the pull still holds the turn; one that comes after
    the pull ended starts no push in the stopping worker either."""
    from kint.tenant_worker import exit_bound

    monkeypatch.setattr(exit_bound, "EXIT_TURN_S", 120)
    caplog.set_level(logging.INFO, logger="kint.worker")
    worker, seen = _worker(tmp_path)
    ctx = worker.ctx
    space16 = ctx.config.space16
    got, done = [], threading.Event()
    try:
        with _pulling(ctx):
            worker.pool.submit(_exit_push, ctx, then=_ended(got, done, 1))
            assert seen.waiting(1)
            ctx.head_ops.stop("restart")
            assert done.wait(60)
            assert ctx.head_op_began is not None and ctx.head_op_began[0] == "pull"
        assert isinstance(got[0], ProtocolError), got
        assert got[0].code is ErrorCode.WORKER_DOWN
        assert got[0].message == "the worker is stopping (restart)"
        assert (f"space {space16}: exit push not started: the worker is stopping (restart); "
                f"any rows it would push stay in the store, unanchored, for the next push"
                ) in caplog.text, caplog.text
        after = _exit_push(ctx)
        assert isinstance(after, ProtocolError) and after.code is ErrorCode.WORKER_DOWN, after
    finally:
        worker.close()


def test_a_second_stop_message_keeps_the_first_reason_in_the_exit_push_line(
        tmp_path, caplog):
    """Two stop messages reach the worker (an idle stop, then the supervisor's own stop, as
    `kint supervisor stop` sends them to a worker whose idle stop is under way), each
    through its real `_dispatch`: an exit push that comes after is refused naming the first,
    the reason the worker stops for, and so is its line. The second renamed it: `(stop)`."""
    import zmq

    from kint.protocol import worker_wire

    caplog.set_level(logging.INFO, logger="kint.worker")
    worker, _ = _worker(tmp_path)
    ctx = worker.ctx
    try:
        for reason in ("idle", "stop"):
            worker._dispatch([zmq.Frame(frame) for frame in worker_wire.encode(
                {"kind": "stop", "reason": reason})])
        assert worker.stop_reason == "stop"  # the message read last
        refused = _exit_push(ctx)
        assert isinstance(refused, ProtocolError), refused
        assert (refused.code, refused.message) == (ErrorCode.WORKER_DOWN,
                                                   "the worker is stopping (idle)")
        assert (f"space {ctx.config.space16}: exit push not started: the worker is stopping "
                f"(idle); ") in caplog.text, caplog.text
        # The second message's own line says it is one (process._dispatch): it read
        # "stop requested (stop)", as if the worker stopped for that, where every other line
        # of the stop names the first; the hand-over still follows the last, as the
        # supervisor's successor does (worker_exit.py).
        assert "stop requested (idle)" in caplog.text, caplog.text
        assert ("stop requested again (stop): the worker is stopping (idle) already"
                in caplog.text), caplog.text
        assert "(stop)" not in caplog.text.replace("stop requested again (stop)", "")
    finally:
        worker.close()


def test_the_exit_push_waits_half_its_bound_leaving_the_rest_to_its_push():
    """The supervisor times the exit push out at its op's bound: the wait for the turn is
    half of it, so a push that gets its turn late still has the other half."""
    from kint.tenant_worker.exit_bound import EXIT_TURN_S

    assert EXIT_TURN_S * 2 <= OPS["exit_push"].max_timeout_ms // 1000


def _waiting(ctx, wait_s: float, outcome: dict, name: str) -> threading.Thread:
    """An op that waits its turn up to `wait_s` from now (its own deadline) on a thread,
    its end recorded in `outcome` under `name`."""
    from kint.tenant_worker.head_lock import TurnLeft, head_op

    def wait() -> None:
        try:
            with head_op(ctx, "push", lock_file=False, wait_until=time.monotonic() + wait_s):
                outcome[name] = "held the turn"
        except TurnLeft:
            outcome[name] = "left its work"
        except ProtocolError as err:
            outcome[name] = err.message

    thread = threading.Thread(target=wait)
    thread.start()
    return thread


def test_each_wait_keeps_its_own_deadline_and_the_later_one_waits(tmp_path):
    """A waits its turn (30 s) behind a pull; B comes and would wait 60 s: B waits in A's
    place, to its own deadline, and A leaves its work to B at once (TurnLeft), so the wait
    never outlives the deadline of the op that waits. B takes the turn once the pull ends.
    A had B's deadline moved onto it (review33h's mend): A, whose request the supervisor
    times out at its own bound, waited on past it for B, and then pushed unseen, its reply
    dropped."""
    worker, seen = _worker(tmp_path)
    ctx = worker.ctx
    outcome: dict = {}
    try:
        with _pulling(ctx):
            a = _waiting(ctx, 30, outcome, "A")
            assert seen.waiting(1)  # A waits its turn
            b = _waiting(ctx, 60, outcome, "B")
            # A leaves as B takes the wait over, at once, long before A's own 30 s (a stall
            # of B's thread on a loaded box does not make A give up first).
            a.join(30)
            assert outcome == {"A": "left its work"}, outcome
            assert not a.is_alive() and b.is_alive()
        b.join(30)
        assert outcome == {"A": "left its work", "B": "held the turn"}, outcome
    finally:
        worker.close()


def test_a_later_op_with_a_sooner_deadline_leaves_its_work_to_the_one_waiting(tmp_path):
    """A waits its turn (60 s) behind a pull; B would wait 1 s: B leaves its work to A at
    once, and A's deadline is its own, unmoved; A takes the turn once the pull ends. A guard
    against "the later op always waits in the other's place", not against the moved
    deadline (max(A's 60 s, B's 1 s) is A's own): the test above fails on that."""
    from kint.tenant_worker.head_lock import TurnLeft, head_op

    worker, seen = _worker(tmp_path)
    ctx = worker.ctx
    outcome: dict = {}
    try:
        with _pulling(ctx):
            a = _waiting(ctx, 60, outcome, "A")
            assert seen.waiting(1)
            a_until = ctx.head_ops.wait_until
            with pytest.raises(TurnLeft):
                with head_op(ctx, "push", lock_file=False, wait_until=time.monotonic() + 1):
                    pass
            assert ctx.head_ops.wait_until == a_until and a.is_alive()
        a.join(30)
        assert outcome == {"A": "held the turn"}, outcome
    finally:
        worker.close()
