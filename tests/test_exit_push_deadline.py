"""The exit push's bound is the supervisor's deadline for its request, not one the worker
read from its clock as the push began. That one started late by however long the request
had waited (in the supervisor's queue while the worker started, behind the worker's other
ops on its pool), and was the op's whole 900 s whatever the request asked: so the worker
started epochs after the supervisor had answered the request TIMEOUT, its work going on
unseen. The supervisor now sends each request's deadline with it (kint/supervisor/timed.py),
the worker checks it (kint/protocol/worker_wire.py, `req_deadline`) and the exit push is
bound by it (kint/tenant_worker/request_deadline.py, exit_bound.ExitBound.for_request).

Real parts in the first test: the devchain's anvil behind a loopback RPC proxy
(tests/rpc_proxy.py) that holds the exit push's first transaction (`delay_methods`, let go
by the test once the supervisor has answered), the test supervisor and the space's worker,
rows of random bytes (more than one epoch's worth) written through Sibyl's own client, the
exit push asked through kint's own client with a bound shorter than the worker's own 900 s.
The room kept for one epoch is set to none (tests/support/kint_test_timings.py:
KINT_TEST_EXIT_EPOCH_ROOM_S), so the push's first epoch starts however slowly the box brings
it there. The second is the same machine's parts without the proxy's hold: the worker's
main thread held at the decode of the exit push's request (tests/support/kint_test_faults.py:
KINT_TEST_HOLD_DISPATCH) until the supervisor has answered it, so the request waits past its
deadline before the worker reads it. The others are of the two functions alone, on the
clock's values: how long a request waited before it ran is what they are given.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time

import pytest

from chain_machines import machine_behind_proxy
from conftest import write_store
from mcp_session import exit_push_said

WAIT = {"timeout": 90, "interval": 0.1}
HOLD = {"methods": ["eth_sendRawTransaction"], "seconds": 240}
# The exit push's request's bound as its client asks it (the supervisor's TIMEOUT comes at
# it, less the client's grace): far less than the worker's own 900 s, and long enough that
# a loaded two-core box brings the push to its first epoch's send within it (the first
# test's premise: its bound is measured from the routing, so a slow start eats it).
ASKED_S = 60
# The first test's KINT_RPC_TIMEOUT: its send, held until the supervisor has answered, must
# not time out first, however early the box reached it.
SEND_WAITS_S = 2 * ASKED_S
# The held request's (the second test): it waits out its whole bound unread, so the time
# the box takes before the worker reads it is no part of that test's premise.
HELD_ASKED_S = 15
CUT = re.compile(r"exit push: anchored none of its (\d+) epoch\(s\); stopped in the receipt wait "
                 r"of the first: its bound came first; that epoch was sent and may still land: "
                 r"its journal is settled by the next push or pull, which records it if it "
                 r"did; the (\d+) row change\(s\) stay in the store, unanchored, for the next "
                 r"push")


def asked_in_thread(sb, db, asked_s: float) -> dict:
    """The exit push of `db`'s space asked through kint's own client on a thread of its own,
    with a bound of `asked_s`: a dict that gets its `result`, or the KintError it was
    `refused` with, and holds the `thread`."""
    answered: dict = {}

    def ask() -> None:
        from kint.client_errors import KintError

        try:
            answered["result"] = sb.call("exit_push", db, timeout_s=asked_s, args={})
        except KintError as err:
            answered["refused"] = err

    answered["thread"] = threading.Thread(target=ask, daemon=True)
    answered["thread"].start()
    return answered


def settled_from_its_journal(sb, db) -> None:
    """Wait until epoch 1 of a journal an exit push left is recorded as the space's head by
    a later pull, the journal gone and the settlement's line in the supervisor's log."""
    sb.wait_for(lambda: (sb.row(db)["head"] or {}).get("seq") == 1,
                what="epoch 1, settled from its journal, the head", **WAIT)
    assert not list(sb.kint_home.glob("pending-*.json"))
    log_path = sb.kint_home / "supervisor.log"
    sb.wait_for(lambda: "a push killed mid-way had landed; recorded epoch 1"
                in log_path.read_text(), what="the settlement's line", **WAIT)


def test_the_exit_push_starts_no_epoch_after_the_supervisor_answered_it_timeout(
        tmp_path, chain_home):
    """An exit push whose first epoch is held at its send until the supervisor has answered
    its request TIMEOUT: let go, that epoch is sent (and lands), and the push waits for no
    receipt past its bound, nor starts a second epoch: its line says it stopped in the
    first's receipt wait, and the epoch's journal, kept, is what a pull then settles,
    recording it from the chain, not sending it again (its line, and still the one send):
    nothing is lost. Before, the worker's bound ran 900 s from the push's
    start, and it anchored every epoch after the TIMEOUT, its reply dropped; then its
    receipt wait, which looked at its own 60 s only at its loop's top, went on past the
    bound (AnchorWrites.wait's `until`; seen failing without it: the push waited, recorded
    the epoch and stopped before the next)."""
    with machine_behind_proxy(tmp_path / "m", chain_home, KINT_RPC_TIMEOUT=str(SEND_WAITS_S),
                              KINT_TEST_EXIT_EPOCH_ROOM_S="0") as (sb, proxy):
        db = sb.sibyl_db
        write_store(db, {f"blob-{i}": {"hex": os.urandom(40_000).hex()} for i in range(4)},
                    tenant=sb.tenant)
        proxy.set_mode("delay_methods", **HOLD)
        seen = len(proxy.calls)
        answered = asked_in_thread(sb, db, ASKED_S)
        asking = answered["thread"]
        try:
            sb.wait_for(lambda: "eth_sendRawTransaction" in proxy.calls[seen:],
                        what=(f"the exit push's first epoch at its send, within the {ASKED_S} s "
                              "its request asked (a box slower than that to reach it cuts the "
                              "push before its first epoch: the premise, not the fix, failed)"),
                        **WAIT)
            asking.join(ASKED_S + 60)  # the supervisor's answer: its deadline has passed
            assert not asking.is_alive()
        finally:
            proxy.forward()
            asking.join(60)
        refused = answered.get("refused")
        assert refused is not None and refused.code == "TIMEOUT", answered
        assert refused.message.startswith("exit_push on space"), refused.message
        text = exit_push_said(sb, **WAIT)
        line = CUT.search(text)
        assert line is not None, text[-3000:]
        assert int(line.group(1)) >= 2 and int(line.group(2)) > 0
        assert proxy.calls[seen:].count("eth_sendRawTransaction") == 1, proxy.calls[seen:]
        assert list(sb.kint_home.glob("pending-*.json")), "the sent epoch's journal kept"
        assert not (sb.row(db)["head"] or {}).get("seq"), sb.row(db)  # none recorded yet
        pulled = sb.kint("pull")
        assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        # Recorded from the chain (pending._record_head), not sent again: the one send is
        # still the exit push's.
        settled_from_its_journal(sb, db)
        assert proxy.calls[seen:].count("eth_sendRawTransaction") == 1, proxy.calls[seen:]
        assert "epoch 2 anchored" not in exit_push_said(sb, **WAIT), text[-3000:]


def test_an_exit_push_held_before_the_worker_read_it_starts_nothing_past_its_deadline(
        tmp_path, chain_home):
    """The supervisor's half, which the test above cannot tell from the worker's own
    fallback (arrival plus the request's timeout): an exit push whose `req` waits unread
    in the worker's socket (its main thread held at the decode, KINT_TEST_HOLD_DISPATCH)
    until the supervisor has answered it TIMEOUT. Let go, it starts nothing: its bound is
    the deadline the supervisor sent with it, from its routing, already past. Without that
    field (timed.py's `_forward`) the worker bounded it from when it read the request,
    HELD_ASKED_S on from the TIMEOUT, and anchored every epoch, unseen (seen failing so).
    Nor does it take the turn and read the chain (the head, the key's rights) only to be
    cut before its first epoch, as it did until sessions.exit_push looked at the deadline
    first (seen failing so: its line, and the chain reads the proxy saw after the hold).
    The worker's heartbeat timeout is longer than the hold, so the held worker is not
    taken for hung."""
    hold = tmp_path / "hold-dispatch"
    with machine_behind_proxy(tmp_path / "m", chain_home, KINT_RPC_TIMEOUT="60",
                              KINT_TEST_EXIT_EPOCH_ROOM_S="0",
                              KINT_TEST_HOLD_DISPATCH=str(hold),
                              KINT_WORKER_HEARTBEAT_TIMEOUT=str(6 * HELD_ASKED_S)) as (sb, proxy):
        db = sb.sibyl_db
        write_store(db, {f"blob-{i}": {"hex": os.urandom(40_000).hex()} for i in range(4)},
                    tenant=sb.tenant)
        hold.touch()
        answered = asked_in_thread(sb, db, HELD_ASKED_S)
        try:
            sb.wait_for(lambda: hold.with_name("hold-dispatch.reached").exists(),
                        what="the worker held at the exit push's decode", **WAIT)
            answered["thread"].join(HELD_ASKED_S + 60)  # the supervisor's TIMEOUT
            assert not answered["thread"].is_alive()
        finally:
            seen = len(proxy.calls)
            hold.unlink()
        refused = answered.get("refused")
        assert refused is not None and refused.code == "TIMEOUT", answered
        text = exit_push_said(sb, **WAIT)
        assert ("exit push not started: its request's deadline had passed when the worker "
                "came to begin it; any rows it would push stay in the store, unanchored, for "
                "the next push") in text, text[-3000:]
        assert "eth_call" not in proxy.calls[seen:], proxy.calls[seen:]
        assert "epoch 1 anchored" not in text, text[-3000:]
        assert not (sb.row(db)["head"] or {}).get("seq"), sb.row(db)  # none, or seq 0


def test_an_exit_push_sent_to_a_worker_that_crashed_is_answered_and_never_sent_again(
        tmp_path, chain_home):
    """What a worker's crash does to an exit push it was sent and had not read (its main
    thread held at the decode, KINT_TEST_HOLD_DISPATCH, then SIGKILLed): the supervisor
    answers it WORKER_DOWN at the exit, saying whether it ran is unknown, and the worker it
    starts next is never sent it, so no deadline, fresh or first, is given it again, and
    nothing of it runs past the caller's (the review asked whether a resent request got a
    fresh one: none is resent). A request still queued, never sent (one routed while the
    worker starts, as the held test's above is), goes once, with the deadline of its routing
    (timed.py's `_forward`, Pending.deadline). Checked once the next worker has answered a
    later request and runs no op (a state that lasts): no exit push line, no transaction.
    Seen failing with the crash's answer replaced by a requeue (worker_exit.py marking the
    request unsent, for the next worker): it went unanswered to its TIMEOUT."""
    import signal

    hold = tmp_path / "hold-dispatch"
    with machine_behind_proxy(tmp_path / "m", chain_home, KINT_RPC_TIMEOUT="60",
                              KINT_TEST_HOLD_DISPATCH=str(hold),
                              KINT_WORKER_HEARTBEAT_TIMEOUT=str(6 * HELD_ASKED_S)) as (sb, proxy):
        db = sb.sibyl_db
        write_store(db, {"row": {"text": "written before the crash"}}, tenant=sb.tenant)
        hold.touch()
        seen = len(proxy.calls)
        answered = asked_in_thread(sb, db, ASKED_S)
        try:
            sb.wait_for(lambda: hold.with_name("hold-dispatch.reached").exists(),
                        what="the worker held at the exit push's decode", **WAIT)
            crashed = sb.row(db)["pid"]
            os.kill(crashed, signal.SIGKILL)
            answered["thread"].join(ASKED_S)  # the exit's answer, long before the deadline
            assert not answered["thread"].is_alive()
        finally:
            hold.unlink()
        refused = answered.get("refused")
        assert refused is not None and refused.code == "WORKER_DOWN", answered
        assert "while running exit_push" in refused.message, refused.message
        sb.wait_for(lambda: (r := sb.row(db))["pid"] not in (None, crashed)
                    and r["state"] in ("ready", "busy"), what="the next worker serving", **WAIT)
        assert sb.call("status", db, timeout_s=60)  # a later request, answered
        sb.wait_for(lambda: sb.row(db)["ops_running"] == 0, what="no op running", **WAIT)
        log = (sb.kint_home / "supervisor.log").read_text()
        assert "exit push" not in log, log[-3000:]
        assert "eth_sendRawTransaction" not in proxy.calls[seen:], proxy.calls[seen:]
        assert not (sb.row(db)["head"] or {}).get("seq"), sb.row(db)


def test_an_exit_push_that_waited_before_it_ran_keeps_the_bound_from_its_routing():
    """A request routed 890 s before its exit push runs (queued behind other ops): the
    push's bound ends at the request's deadline, 10 s on, not 900 s from now, and its wait
    for the turn, half the bound from the routing, is already over, leaving the push what
    is left; one routed just now is bound as before, and a call outside any request (no
    deadline) from now."""
    from kint.tenant_worker.exit_bound import EXIT_BOUND_S, EXIT_TURN_S, ExitBound
    from kint.tenant_worker.request_deadline import Deadline, current, running_until

    now = time.monotonic()
    late = ExitBound.for_request(Deadline(at=now + 10, seconds=900))
    assert late.ends == now + 10 and late.seconds == 900
    assert late.turn_by == now + 10 - 450
    before = time.monotonic()
    fresh = ExitBound.for_request(Deadline(at=before + 900, seconds=900))
    # Its turn's end is the earlier of now + EXIT_TURN_S and `(at) - seconds / 2`, compared
    # as computed: `before + 450` may be one float step below `(before + 900) - 450`.
    assert fresh.ends == before + 900
    assert before + 450 - 1 < fresh.turn_by <= (before + 900) - 900 / 2
    asked = ExitBound.for_request(Deadline(at=before + 28, seconds=28))
    # As the code computes it ((at) - seconds / 2): `before + 14` is not always that float.
    assert (asked.ends, asked.turn_by, asked.seconds) == (before + 28, before + 28 - 28 / 2, 28)
    assert current() is None
    with running_until(Deadline(at=before + 28, seconds=28)):
        assert current() == Deadline(at=before + 28, seconds=28)
    assert current() is None
    alone = ExitBound.for_request(None)
    assert alone.seconds == EXIT_BOUND_S
    assert alone.ends - alone.turn_by == EXIT_BOUND_S - EXIT_TURN_S


def test_a_request_deadline_from_the_supervisor_is_checked_and_bounded():
    """What the worker takes of a `req`'s deadline: the one sent, when it is no later than
    the request's own timeout from its arrival; a later one held to that, so no peer
    stretches an op past the bound it asked; none (an older supervisor) that bound from
    the arrival; one that is no finite number refused BAD_REQUEST; one already past kept."""
    from kint.protocol import ErrorCode, ProtocolError
    from kint.protocol.worker_wire import BAD_DEADLINE, BAD_DEADLINE_HINT, req_deadline

    now = 1000.0
    assert req_deadline({"deadline": 1010.5}, 30_000, now) == 1010.5
    assert req_deadline({"deadline": 5000}, 30_000, now) == 1030.0
    assert req_deadline({}, 30_000, now) == 1030.0
    assert req_deadline({"deadline": None}, 30_000, now) == 1030.0  # null: as none
    assert req_deadline({"deadline": 990.0}, 30_000, now) == 990.0
    for bad in ("1010", True, [1010], {"at": 1}, math.nan, math.inf, -math.inf):
        with pytest.raises(ProtocolError) as refused:
            req_deadline({"deadline": bad}, 30_000, now)
        assert refused.value.code is ErrorCode.BAD_REQUEST
        # Its own hint: BAD_REQUEST's default sent the user to fix a command's value, and
        # the supervisor, not the user, sets the deadline.
        assert (refused.value.message, refused.value.hint) == (BAD_DEADLINE, BAD_DEADLINE_HINT)
