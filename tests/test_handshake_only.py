"""A health check costs nothing (issue 13, item 5): `claude mcp list` starts kint-server,
lists its tools and closes. On Base every exit push is gas, so a session whose tools wrote
nothing asks for none: the rows an earlier session left unanchored belong to the space's
worker and its watcher, not to every handshake."""

from __future__ import annotations

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
        sb.wait_for(lambda: sb.row(sb.sibyl_db)["sessions"] == 1, what="the session attached")
        agent.close()
        # What is checked is that nothing happens, so the test waits for the closing
        # server's goodbye to have been run to its end: either goodbye (a detach, or an exit
        # push, which the worker runs after the server is gone and logs either way) first
        # ends the session, and an exit push is then the op in flight until it is over. A
        # beat with no session and no op comes after whichever was sent.
        sb.wait_for(lambda: (r := sb.row(sb.sibyl_db))["sessions"] == 0 and r["op"] is None,
                    what="the session's goodbye run to its end", timeout=60)

        assert anchor.w3.eth.get_transaction_count(connected["session"]) == nonce_before
        status = kjson(sb, "status")
        assert status["chain_head"] == head_before and status["unanchored"] == 1
        log = (sb.kint_home / "supervisor.log").read_text(errors="replace")
        assert "exit push" not in log.lower()
    finally:
        sb.shutdown()
