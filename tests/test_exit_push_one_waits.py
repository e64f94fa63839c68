"""What an exit push's wait for its turn (push._turn_wait, head_lock._wait_turn) may not do.
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

import pytest

from test_head_lock import _worker
from test_watcher_own_op import _pulling


def test_a_plain_push_request_saying_exit_is_refused_busy_at_once(tmp_path, monkeypatch):
    """The wait is the exit push's (sessions.exit_push), not a request's hold_reason: a
    `push` request sent with hold_reason "exit" is refused BUSY behind a running op, with
    no wait on the turn."""
    from kint.tenant_worker import push as push_mod
    from kint.tenant_worker.head_lock import TurnTaken

    monkeypatch.setattr(push_mod, "EXIT_TURN_S", 1)
    worker, seen = _worker(tmp_path)
    try:
        with _pulling(ctx := worker.ctx):
            with pytest.raises(TurnTaken) as refused:
                push_mod.push(ctx, {"hold_reason": "exit"})
            assert seen.waits == 0, "it waited its turn"
        assert "a pull is already running for this space" in refused.value.message
    finally:
        worker.close()
