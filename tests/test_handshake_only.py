"""A health check costs nothing (issue 13, item 5): `claude mcp list` starts kint-server,
lists its tools and closes. On Base every exit push is gas, so a session whose tools wrote
nothing asks for none: the rows an earlier session left unanchored belong to the space's
worker and its watcher, not to every handshake."""

from __future__ import annotations

import time

from chain_machines import devchain_anchor, kjson, new_machine
from conftest import sibyl_client
from mcp_session import AgentProcess


def test_a_handshake_only_session_sends_no_transaction(tmp_path, chain_home):
    sb = new_machine(tmp_path / "machine", chain_home)
    try:
        sibyl_client(sb.sibyl_db, sb.tenant).set_entity("rules", "anchored", {"rule": "a"})
        connected = kjson(sb, "connect", "--dev")
        kjson(sb, "push")
        sibyl_client(sb.sibyl_db, sb.tenant).set_entity("rules", "left", {"rule": "unanchored"})
        anchor = devchain_anchor(chain_home)
        nonce_before = anchor.w3.eth.get_transaction_count(connected["session"])
        head_before = kjson(sb, "status")["chain_head"]

        agent = AgentProcess(sb.env).start()
        assert "memory_verify" in agent.tools
        agent.close()
        # Time let pass on purpose, as what is checked is that nothing happens: an exit push
        # is a message the closing server leaves the worker, which runs it after the server
        # is gone and logs it either way (the log is checked below). On anvil, which mines
        # each transaction as it arrives, one lands in about a second; 3 s leaves room for a
        # loaded box, and longer would only slow the test.
        time.sleep(3)

        assert anchor.w3.eth.get_transaction_count(connected["session"]) == nonce_before
        status = kjson(sb, "status")
        assert status["chain_head"] == head_before and status["unanchored"] == 1
        log = (sb.kint_home / "supervisor.log").read_text(errors="replace")
        assert "exit push" not in log.lower()
    finally:
        sb.shutdown()
