"""A closing kint-server's exit push that meets a push of its space already running in the
same worker (a `kint push`, the watcher's, another session's exit push) was refused BUSY
by its own worker and never tried again: the log said "exit push not made (BUSY)", and the
rows the closing server wrote after that push read the store waited for the watcher's next
push, if one came before the worker idled out, and with no watcher, for good. It now waits
for its turn (up to its own bound, exit_bound.EXIT_TURN_S) and pushes what is left.

Real parts: the devchain's anvil behind a loopback RPC proxy (tests/rpc_proxy.py) that
holds the running push's transaction (sent after its rows were read), the test supervisor
and the space's worker, a real kint-server over stdio (tests/mcp_session.py) that writes
through its tool and closes, rows written through Sibyl's own client. The second test, on
a worker's real space context (tests/test_head_lock.py's `_worker`) and its real exit push,
what the wait does not change: it ends at its bound, and another process's head lock is a
BUSY failure as before. The third, on the first one's parts: a `kint supervisor restart`
during the wait ends it, logged as not started, where the worker's exit killed it unlogged.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from chain_machines import machine_behind_proxy
from conftest import write_rules
from mcp_session import AgentProcess
from test_head_lock import HOLDER, _worker
from test_watcher_own_op import _pulling
from kint.protocol import ErrorCode, ProtocolError

WAIT = {"timeout": 90, "interval": 0.1}
# KINT_RPC_TIMEOUT past the proxy's hold: the held send is let go by the test.
HOLD = {"methods": ["eth_sendRawTransaction"], "seconds": 60}


def _op(sb, db) -> str | None:
    """The oldest op in flight in the space's worker, from its beat."""
    return (sb.row(db)["op"] or {}).get("name")


@contextmanager
def _exit_push_behind_a_push(sb, proxy, push: Callable[[], object]) -> Iterator[Path]:
    """A kint-server with no watcher (only its exit push can anchor what it writes), its
    start-up pull over; `push` run on a thread and held by the proxy at its transaction,
    past its read of the store; a row written through the server, which then closes and
    asks for its exit push. Yields the supervisor's log; the held transaction goes through
    and the push is joined at the end."""
    db = sb.sibyl_db
    # Written before the session attaches: no drift for the session's exit push to hold.
    # The running push anchors them.
    write_rules(db, sb.tenant, first="pushed by the running push")
    closing = AgentProcess({**sb.env, "KINT_RPC_TIMEOUT": "60",
                            "KINT_NO_WATCHER": "1"}).start()
    running = None
    try:
        sb.wait_for(lambda: closing.call("memory_pull")["ok"],
                    what="the server's start-up pull ended", **WAIT)
        proxy.set_mode("delay_methods", **HOLD)
        seen = len(proxy.calls)
        running = threading.Thread(target=push)
        running.start()
        sb.wait_for(lambda: "eth_sendRawTransaction" in proxy.calls[seen:]
                    and _op(sb, db) == "push", what="the push at its send", **WAIT)
        assert closing.call("memory_remember", category="notes", name="exit-push",
                            body={"text": "written after the push read the store"}
                            )["ok"] is True
    finally:
        closing.close()  # asks the worker for its exit push
    try:
        yield sb.kint_home / "supervisor.log"
    finally:
        proxy.forward()  # the held transaction goes through: the push ends
        if running is not None:
            running.join(180)


def test_an_exit_push_behind_a_running_push_waits_for_it_then_pushes_what_is_left(
        tmp_path, chain_home):
    with machine_behind_proxy(tmp_path / "m", chain_home, KINT_RPC_TIMEOUT="60") as (sb, proxy):
        db = sb.sibyl_db
        pushed: dict = {}
        with _exit_push_behind_a_push(
                sb, proxy, lambda: pushed.update(sb.call("push", db, timeout_s=180))
        ) as log_path:
            # It waits for the push that runs (the fault: refused BUSY at once).
            sb.wait_for(lambda: "exit push waits for the push" in (text := log_path.read_text())
                        or "exit push not made" in text, what="the exit push met", **WAIT)
            assert _op(sb, db) == "push"  # met while the push ran, not after
        assert pushed.get("pushed"), pushed
        text = log_path.read_text()
        assert "exit push waits for the push running for this space to end (up to 450 s)" \
            in text, text[-3000:]
        # Then it pushes the server's row: the running push's epoch, then its own.
        sb.wait_for(lambda: (sb.row(db)["head"] or {}).get("seq") == 2,
                    what="the exit push's epoch", **WAIT)
        status = sb.call("status", db, args={"chain": True}, timeout_s=30)
        assert status["unanchored_changes"] == {"changed": 0, "deleted": 0}, status
        text = sb.wait_for(lambda: "exit push: anchored" in (t := log_path.read_text()) and t,
                           what="the exit push's line", **WAIT)
        assert "exit push not made" not in text, text[-3000:]


def test_the_exit_push_waits_its_turn_up_to_its_bound_and_another_process_is_busy(
        tmp_path, monkeypatch, caplog):
    """A pull of the space (a real `head_op` on the worker's turn) that outlasts the exit
    push's bound (EXIT_TURN_S, lowered to a second) leaves it refused BUSY naming the pull,
    logged as not made, once it has waited on the turn; another kint process that holds
    the head lock file is a BUSY failure, the turn free, as before. With neither, the push
    goes on past both to its own refusal (the space is not connected)."""
    from kint.tenant_worker import head_lock as head_lock_mod
    from kint.tenant_worker import exit_bound
    from kint.tenant_worker.head_lock import MESSAGE
    from kint.tenant_worker.sessions import exit_push

    monkeypatch.setattr(exit_bound, "EXIT_TURN_S", 1)
    monkeypatch.setattr(head_lock_mod, "WAIT_S", 0.5)  # the file lock's wait
    caplog.set_level(logging.INFO, logger="kint.worker")
    worker, seen = _worker(tmp_path)
    ctx = worker.ctx
    space16 = ctx.config.space16
    try:
        with _pulling(ctx):
            with pytest.raises(ProtocolError) as refused:
                exit_push(ctx, {})
            assert seen.waits >= 1  # it waited on the turn (the fault: refused at once)
        assert refused.value.code is ErrorCode.BUSY, refused.value
        assert ("waited 1 s for the pull running for this space (for "
                in refused.value.message), refused.value.message
        assert (f"space {space16}: exit push waits for the pull running for this space to "
                f"end (up to 1 s)") in caplog.text, caplog.text
        assert (f"space {space16}: exit push not made (BUSY): waited 1 s for the pull"
                in caplog.text), caplog.text

        holder = subprocess.Popen([sys.executable, "-c", HOLDER,
                                   str(ctx.state.files["head_lock"])],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline() == "held\n"
            with pytest.raises(ProtocolError) as refused:
                exit_push(ctx, {})
            assert (refused.value.code, refused.value.message) == (ErrorCode.BUSY, MESSAGE)
        finally:
            holder.stdin.close()
            holder.wait(timeout=30)
        with pytest.raises(ProtocolError) as refused:
            exit_push(ctx, {})
        assert refused.value.code is not ErrorCode.BUSY, refused.value
    finally:
        worker.close()


def test_a_restart_while_an_exit_push_waits_ends_it_logged_and_pushes_nothing(
        tmp_path, chain_home):
    """`kint supervisor restart` while a closing server's exit push waits for a running push:
    the worker's stop ends the wait (HeadTurn.stop, from `_dispatch`), logged as not started,
    naming the stop, where the grace's end killed it unlogged; it starts no push in the
    stopping worker. The real supervisor, worker and kint-server, as the first test."""
    with machine_behind_proxy(tmp_path / "m", chain_home, KINT_RPC_TIMEOUT="60") as (sb, proxy):
        db = sb.sibyl_db
        with _exit_push_behind_a_push(sb, proxy, lambda: sb.kint("push", timeout=180)
                                      ) as log_path:
            sb.wait_for(lambda: "exit push waits for the push" in log_path.read_text(),
                        what="the exit push waiting", **WAIT)
            space = sb.row(db)["space"]
            out = sb.kint("supervisor", "restart", space, timeout=120)
            assert out.returncode == 0, out.stdout + out.stderr
            text = sb.wait_for(lambda: "exit push not" in (t := log_path.read_text())
                               and t, what="the exit push's line", **WAIT)
        assert ("exit push not started: the worker is stopping (restart); any rows it would "
                "push stay in the store, unanchored, for the next push" in text), text[-3000:]
        assert "exit push: anchored" not in text, text[-3000:]
