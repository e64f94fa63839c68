"""A kint-server session's keepalive (kint.agent_server.session): it attaches again every
KEEPALIVE_S on a socket of its own, so a long tool call holding the session's socket does
not hold it back, and it sends nothing once `close()` has begun, so the worker never counts
a gone server as attached; the worker, for its part, does not take back a session that
said goodbye when an attach of it sent earlier runs after the goodbye (its op pool may run
them in either order).

Real parts: a real kint-server process under the `mcp` SDK's stdio client, on a machine
connected to the devchain through the loopback RPC proxy (a push that waits on a receipt
that never comes is the long call), the test supervisor and the space's worker. The order
at close is checked on the session class in this process against the same supervisor and
worker: in kint-server the window is a keepalive waking as the server exits, which no
test can hit on purpose, so a test holds the session's socket as a long tool call does
(the case in which the old keepalive waited, then attached after the goodbye) and records
what the session sends."""

from __future__ import annotations

import time

from chain_machines import machine_behind_proxy
from conftest import make_sandbox, wait_until, write_store
from kint.agent_server import session as session_module
from kint.agent_server.session import AgentSession
from kint.spaces import SpaceRef
from mcp_session import AgentProcess

# The longest the push below is waited for in kint-server (KINT_TEST_TOOL_WAIT_S): the
# keepalives at every half second are seen well within it.
LONG_CALL_S = 12


def _server_log(sb) -> str:
    return "\n".join(path.read_text(errors="replace")
                     for path in sb.kint_home.rglob("kint.log"))


def _sessions(sb) -> int:
    """How many sessions the space's worker counts (a detach of an id never attached
    changes nothing and answers the count)."""
    return sb.call("detach", sb.sibyl_db, args={"session": "probe"})["sessions"]


def test_the_keepalive_attaches_while_a_long_call_holds_the_session(tmp_path_factory,
                                                                     chain_home):
    with machine_behind_proxy(tmp_path_factory.mktemp("keepalive"), chain_home,
                              KINT_QUIET_SECONDS="3600") as (sb, proxy):
        attaches = sb.root / "attaches"
        agent = AgentProcess({**sb.env, "KINT_TEST_TOOL_WAIT_S": str(LONG_CALL_S),
                              "KINT_TEST_KEEPALIVE_S": "0.5", "SESSION_NAME": "long",
                              "KINT_TEST_ATTACH_LOG": str(attaches)}).start()
        try:
            assert agent.call("memory_remember", category="rules", name="release-gate",
                              body={"rule": "never ship on a Friday"})["ok"] is True
            seen = len(proxy.calls)
            proxy.set_mode("unmined")
            push = agent.submit("memory_push")
            assert wait_until(lambda: "eth_getTransactionReceipt" in proxy.calls[seen:],
                              timeout=60, interval=0.2), proxy.calls[seen:]
            before = len(attaches.read_text().split())
            # Before, the keepalive waited for the session's socket until the push let go.
            assert wait_until(lambda: len(attaches.read_text().split()) >= before + 2,
                              timeout=LONG_CALL_S / 2, interval=0.1), \
                "no keepalive attach while the push held the session's socket"
            assert not push.done(), "the push came back before the keepalives were seen"
            proxy.forward()
        finally:
            agent.close()  # mid-call: the goodbye goes on a socket of its own
        assert wait_until(lambda: "kint-server exits" in _server_log(sb), timeout=30), \
            _server_log(sb)[-2000:]
        assert wait_until(lambda: _sessions(sb) == 0, timeout=30, interval=0.2), \
            "the worker still counts the gone server's session"


def test_a_closing_session_attaches_no_more_and_the_worker_keeps_it_gone(tmp_path,
                                                                         monkeypatch):
    sb = make_sandbox(tmp_path / "machine")
    sb.start_entitled()
    try:
        write_store(sb.sibyl_db, tenant=sb.tenant)
        monkeypatch.setattr(session_module, "KEEPALIVE_S", 0.05)
        sent: list[tuple[str, float]] = []
        real = AgentSession._call_on

        def recorded(self, client, op, args, timeout_s):  # noqa: ANN001, ANN202
            sent.append((op, time.monotonic()))
            return real(self, client, op, args, timeout_s)

        monkeypatch.setattr(AgentSession, "_call_on", recorded)
        session = AgentSession(SpaceRef(label=sb.tenant, tenant=sb.tenant,
                                        db=str(sb.sibyl_db)), sb.kint_home)
        session.watcher = False
        session.attach()

        def attaches() -> int:
            return sum(op == "attach" for op, _ in sent)

        with session._lock:  # a tool call waiting on the worker holds the session's socket
            assert wait_until(lambda: attaches() >= 3, timeout=30), sent
            closing = time.monotonic()
            session.close()  # says goodbye on a socket of its own, the call still held
        session._keepalive.join(30)
        assert not session._keepalive.is_alive()
        # Before, the keepalive blocked behind the held socket sent its attach now.
        assert [at for op, at in sent if op == "attach" and at >= closing] == [], sent
        assert wait_until(lambda: _sessions(sb) == 0, timeout=30, interval=0.2)

        # An attach the worker runs after its session's goodbye (sent before it, or by a
        # keepalive that was already waiting on a slow worker) does not take it back.
        late = sb.call("attach", sb.sibyl_db, args={"session": session.id, "watcher": False})
        assert late["ended"] is True and late["sessions"] == 0, late
        assert _sessions(sb) == 0
    finally:
        sb.shutdown()
