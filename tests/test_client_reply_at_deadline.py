"""A reply that arrives between a call's last receive and its deadline is the call's answer,
the supervisor's door open as much as closed (kint/client.py `_roundtrip`). Before, only a
closed door's dropped socket was looked at: with the door open the call said "no answer from
the supervisor within Ns" about a request that was answered, inviting a retry that would run
a write twice, and its next call skipped the reply as another request's (review37i S1).

Real supervisor, worker and files: the request is an agent's `attach` held on the worker's
pool (KINT_TEST_HOLD_ATTACH). The gap between the last receive that timed out and the
deadline cannot be reached from outside the client: the test wraps the client's real
`_check_serving` in the test process, lets the worker go, holds the look until the reply is
queued on the socket (a poll, taking nothing) and the call's deadline has passed, then looks.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import zmq

from conftest import make_sandbox, write_store
from support.attach_in_flight import attach_in_flight
from kint.client import Client

# The call's bound: its request's own is 2 s less (kint/client_bound.py), long enough for a
# loaded box to start the attach before the supervisor would answer it TIMEOUT.
BOUND_S = 20.0


def test_a_reply_arriving_by_the_deadline_is_taken_with_the_door_open(tmp_path):
    """The look held, the worker let go, until its reply is queued and the call's deadline
    has passed: the reply is the call's answer (before, the call raised "no answer")."""
    hold = tmp_path / "hold-attach"
    sb = make_sandbox(tmp_path / "machine", KINT_TEST_HOLD_ATTACH=str(hold),
                      KINT_WORKER_HEARTBEAT_TIMEOUT="60")
    client = Client(sb.kint_home, autostart=False)
    outcome: dict[str, Any] = {}
    deadlines: list[float] = []
    armed, held = threading.Event(), threading.Event()
    real_check, real_roundtrip = client._check_serving, client._roundtrip

    def roundtrip(request: Any, deadline: float, *a: Any, **kw: Any) -> Any:
        deadlines.append(deadline)
        return real_roundtrip(request, deadline, *a, **kw)

    def held_look(serving: int | None, op: str) -> int:
        if armed.is_set() and not held.is_set():
            held.set()
            hold.unlink()
            assert client._sock is not None
            assert client._sock.poll(60_000, zmq.POLLIN), "no reply came"
            # The premise is the deadline passed with the reply queued: wait for that moment.
            threading.Event().wait(max(0.0, deadlines[-1] - time.monotonic()))
        return real_check(serving, op)

    client._check_serving = held_look  # type: ignore[method-assign]
    client._roundtrip = roundtrip  # type: ignore[method-assign]
    caller = None
    try:
        sb.start_entitled()
        write_store(sb.sibyl_db, tenant=sb.tenant)
        sb.call("status", sb.sibyl_db, timeout_s=60)
        hold.touch()
        caller = attach_in_flight(sb, outcome, timeout_s=BOUND_S, client=client)
        armed.set()
        caller.join(BOUND_S + 60)
        assert not caller.is_alive()
        assert held.is_set(), "no look ran while the attach was held"
        assert "error" not in outcome, outcome["error"].message
        assert outcome["reply"]["sessions"] == 1, outcome
    finally:
        hold.unlink(missing_ok=True)
        if caller is not None:
            caller.join(60)  # closed under the caller's receive, libzmq aborts the process
        client.close()
        sb.shutdown()
