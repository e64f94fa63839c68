"""memory_push over the gap a pull left at an epoch nobody can open (a leaked session key's
bytes): the worker refuses GAP with its terminal hint, which says to pull and names `kint
compact --over-skipped`. kint-server gives the agent the pull as its own call
(memory_pull, 14-agents.md), and the snapshot, should the pull stop there again, as the
human's step ("stop and tell the human: ..."), since 14-agents.md tells an agent never to
run that command itself (the translation's cases: tests/test_v030_tool_errors.py). It
told the agent to stop and tell the human to run `kint pull`, the agent's own tool.

A real anvil, the machine's real supervisor and worker, a real kint-server driven by the MCP
SDK's client."""

from __future__ import annotations

import json

from eth_account import Account

from chain_machines import (authorize_machine, devchain_anchor, kjson, new_machine,
                            owner_account)
from conftest import write_rules
from mcp_session import AgentProcess


def test_memory_push_over_a_gap_has_the_agent_pull_then_hand_the_snapshot_over(tmp_path,
                                                                               chain_home):
    m = new_machine(tmp_path / "m", chain_home, KINT_QUIET_SECONDS="3600")
    agent = None
    try:
        write_rules(m.sibyl_db, m.tenant, release="every release needs a green deadlift test")
        connected = kjson(m, "connect", "--dev")
        kjson(m, "push")
        owner = owner_account(m, connected["owner"])
        space_id = json.loads((m.kint_home / f"enrol-{connected['space']}.json")
                              .read_text())["space"]
        anchor = devchain_anchor(chain_home)
        leaked = Account.create()
        authorize_machine(chain_home, owner, leaked.address)
        head = anchor.head(owner.address, space_id)
        anchor.transact(leaked, anchor.encode_push(owner.address, space_id, head.digest,
                                                   b"\x07 not a kint epoch " * 8))
        assert kjson(m, "pull")["gap"] == [head.seq + 1]
        agent = AgentProcess(m.env).start()
        refused = agent.failed("memory_push")
        assert refused["error"] == "PUSH_FAILED", refused
        assert "could not apply epoch(s)" in refused["message"], refused
        hint = refused["hint"]
        assert hint.startswith("call memory_pull: "), hint
        agents, _, humans = hint.partition("stop and tell the human: ")
        assert "kint" not in agents, hint
        assert "`kint compact --over-skipped`" in humans, hint  # the human's command, named
        # The pull it names stops at the same epoch: the agent's next step is the human's.
        assert agent.call("memory_pull")["skipped"], hint
    finally:
        if agent is not None:
            agent.close()
        m.shutdown()
