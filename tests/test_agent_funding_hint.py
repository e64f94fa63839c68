"""memory_push with a session key too poor for the next transaction: the worker refuses with
"send ETH on chain C to 0x... (`kint status` names it), then try again", a hint built at
run time that names no command, and it reached the agent as it was, as if the agent could
send ETH. Funding the key is the owner's: kint-server tells the agent to stop and tell the
human which address needs ETH on which chain, then to push again; on the devchain, as here,
the command that gives it, `kint devchain fund ADDRESS` (the translation's cases, Base's
among them: tests/test_worker_hints_for_agents.py).

A real anvil (the key's balance set to nothing with anvil_setBalance, as spending it would
leave it), the machine's real supervisor and worker, a real kint-server driven by the MCP
SDK's client."""

from __future__ import annotations

import json

from chain_machines import kjson, new_machine
from conftest import write_rules
from kint.chain.config import devchain_record
from kint.chain.devchain.powers import fund
from kint.custody.session_key import session_address
from mcp_session import AgentProcess


def test_memory_push_with_a_session_key_short_of_eth_hands_its_funding_to_the_human(
        tmp_path, chain_home):
    m = new_machine(tmp_path / "m", chain_home, KINT_QUIET_SECONDS="3600")
    agent = None
    try:
        write_rules(m.sibyl_db, m.tenant, release="every release needs a green deadlift test")
        kjson(m, "connect", "--dev")
        kjson(m, "push")
        key = session_address(m.kint_home)
        record = json.loads(devchain_record(chain_home).read_text())
        fund(record["rpc_url"], key, 0)
        write_rules(m.sibyl_db, m.tenant, deploy="every deploy waits for the green build")
        agent = AgentProcess(m.env).start()
        refused = agent.failed("memory_push")
        assert refused["error"] == "PUSH_FAILED", refused
        assert "too little for the next transaction" in refused["message"], refused
        # On the devchain the human's command that funds it is named (it said "needs ETH on
        # chain 31337, and funding it is the owner's": no wallet holds devchain ETH).
        assert refused["hint"] == (
            f"stop and tell the human: this machine's session key {key} needs devchain ETH, "
            f"which `kint devchain fund {key}` in their terminal gives; after that, call "
            f"memory_push again"), refused
        # The owner funds it: the push the hint names anchors the row.
        fund(record["rpc_url"], key, 10**17)
        assert agent.call("memory_push")["pushed"] == 1
    finally:
        if agent is not None:
            agent.close()
        m.shutdown()
