"""kint-server's tools as a model sees them (issue 13, item 4), through the official MCP
client over a real stdio session, on a real anvil with a real supervisor and worker: the
server's name and instructions, a description on every kint tool and argument, the bounds
and the tiers in the schema, unknown arguments and broken rules refused before anything
reaches the worker, `isError` on every failed call and never on an answer, and Sibyl's
eight tools exactly as Sibyl's own `build_server()` lists them."""

from __future__ import annotations

import asyncio
import json

import pytest

from chain_machines import kjson
from kint.rows.canon import TIERS, VERSIONED_TIERS
from mcp_session import quiet_agent

SIBYL_TOOLS = {"memory_remember", "memory_recall", "memory_search", "memory_list",
               "memory_forget", "memory_set_state", "memory_get_state", "memory_record_event"}
KINT_TOOLS = {"memory_status", "memory_connect", "memory_pull", "memory_push", "memory_verify",
              "memory_history"}


@pytest.fixture(scope="module")
def agent(tmp_path_factory, chain_home):
    yield from quiet_agent(tmp_path_factory.mktemp("tools"), chain_home)


def listed(agent):
    return {tool.name: tool for tool in agent.listed}


def refused(agent, tool, **args):
    """A call refused for its arguments: an error result under the codes Sibyl's own guard
    answers with (VALIDATION_ERROR, ValidationError), one message."""
    payload = agent.failed(tool, **args)
    assert payload["code"] == "VALIDATION_ERROR", payload
    assert payload["error"] == "ValidationError", payload
    assert payload["message"].startswith(f"{tool}: ")
    assert "version" not in payload["message"] + payload["hint"]  # the user's input, not ours
    return payload["message"]


def test_the_server_is_kint_and_tells_the_agent_to_verify_before_acting(agent):
    init = agent.initialized
    assert init.serverInfo.name == "kint"
    assert "memory_verify" in init.instructions
    assert "Before you act on anything recalled from memory, call memory_verify" in \
        init.instructions
    assert set(listed(agent)) == SIBYL_TOOLS | KINT_TOOLS


def test_every_kint_tool_and_argument_is_described_and_closed(agent):
    tools = listed(agent)
    for name in KINT_TOOLS:
        tool = tools[name]
        assert tool.description and len(tool.description) > 80, name
        schema = tool.inputSchema
        assert schema["additionalProperties"] is False, name
        for arg, spec in schema["properties"].items():
            assert len(spec.get("description", "")) > 20, (name, arg)
    assert tools["memory_status"].annotations.readOnlyHint is True
    assert "before acting on anything recalled" in tools["memory_verify"].description


def test_the_schemas_carry_the_bounds_and_the_tiers(agent):
    tools = listed(agent)
    verify = tools["memory_verify"].inputSchema["properties"]
    assert (verify["limit"]["minimum"], verify["limit"]["maximum"]) == (1, 100)
    assert verify["limit"]["default"] == 5
    assert (verify["query"]["minLength"], verify["query"]["maxLength"]) == (1, 4096)
    history = tools["memory_history"].inputSchema
    assert history["properties"]["tier"]["enum"] == list(VERSIONED_TIERS)
    assert set(VERSIONED_TIERS) < set(TIERS)  # journal events have no versions
    block = history["properties"]["block"]["anyOf"][0]
    assert (block["type"], block["minimum"], block["maximum"]) == ("integer", 0, 2**63 - 1)
    assert sorted(history["required"]) == ["key", "tier"]
    assert "so no entity is found without it" in history["properties"]["category"][
        "description"]
    assert "without category an entity lookup finds nothing" in \
        tools["memory_history"].description
    owner = tools["memory_connect"].inputSchema["properties"]["owner"]["anyOf"][0]
    assert owner["pattern"] == "^0x[0-9a-fA-F]{40}$"


def test_sibyls_eight_are_listed_exactly_as_sibyl_builds_them(agent):
    from sibyl_memory_mcp.server import build_server

    shipped = {t.name: t.model_dump(mode="json", exclude_none=True)
               for t in asyncio.run(build_server().list_tools())}
    assert set(shipped) == SIBYL_TOOLS
    served = {name: tool.model_dump(mode="json", exclude_none=True)
              for name, tool in listed(agent).items() if name in SIBYL_TOOLS}
    assert served == shipped


def test_out_of_bounds_and_broken_rules_are_refused_by_name(agent):
    assert refused(agent, "memory_verify", query="release rule", limit=0) == \
        "memory_verify: argument 'limit' must be greater than or equal to 1"
    assert "argument 'limit' must be less than or equal to 100" in refused(
        agent, "memory_verify", query="release rule", limit=101)
    assert "argument 'query' is required" in refused(agent, "memory_verify")
    assert "argument 'block' must be greater than or equal to 0" in refused(
        agent, "memory_history", tier="state", key="focus", block=-1)
    assert "argument 'block' must be less than or equal to" in refused(
        agent, "memory_history", tier="state", key="focus", block=2**63)
    assert "argument 'tier' must be 'entity', 'state' or 'reference'" in refused(
        agent, "memory_history", tier="journal", key="x")
    assert "only entities have a category" in refused(
        agent, "memory_history", tier="state", key="focus", category="rules")
    secret = "correct horse battery staple"
    message = refused(agent, "memory_connect", owner=secret)
    assert "argument 'owner' must match pattern" in message and secret not in message


def test_unknown_arguments_are_refused_and_nothing_is_pushed(agent):
    box = agent.box
    # Not connected: a failed call is an error; a refusal to vouch is an answer.
    not_connected = agent.result("memory_push")
    assert not_connected.isError is True
    assert json.loads(not_connected.content[0].text)["error"] == "NOT_CONNECTED"
    answer = agent.result("memory_verify", query="release rule")
    assert answer.isError is False
    assert answer.structuredContent["ok"] is True
    assert answer.structuredContent["decision"] == "refuse"
    steps = agent.result("memory_connect")
    assert steps.isError is False and steps.structuredContent["connected"] is False

    # `dev` takes none of the others (kint's own argument; the CLI's --dev refuses the
    # same): each is refused by name, before the worker, and nothing is connected.
    secret = "correct horse battery staple"
    for arg, value in (("owner", "0x" + "ab" * 20), ("passphrase", secret),
                       ("recovery_code", secret)):
        payload = agent.failed("memory_connect", dev=True, **{arg: value})
        assert payload["ok"] is False and payload["error"] == "BAD_REQUEST", payload
        assert payload["message"].startswith(f"{arg} cannot be given with dev: "), payload
        assert payload["hint"] and secret not in json.dumps(payload), payload
        # The agent's own step first; the passphrase wrap is handed to the human.
        assert not payload["hint"].startswith("stop and "), payload
    assert agent.call("memory_status")["owner"] is None

    assert agent.call("memory_connect", dev=True)["connected"] is True
    assert agent.call("memory_remember", category="rules", name="release-gate",
                      body={"rule": "never ship on a Friday"})["ok"] is True
    before = kjson(box, "status")
    assert before["unanchored"] >= 1

    assert refused(agent, "memory_push", compact=True) == \
        "memory_push: unknown argument 'compact' (it takes snapshot)"
    assert "unknown argument 'verbose' (it takes no arguments)" in refused(
        agent, "memory_status", verbose=True)
    after = kjson(box, "status")
    assert after["chain_head"] == before["chain_head"] and after["unanchored"]

    pushed = agent.result("memory_push")
    assert pushed.isError is False and pushed.structuredContent["pushed"] >= 1
    history = agent.result("memory_history", tier="entity", key="release-gate",
                           category="rules")
    assert history.isError is False and history.structuredContent["count"] == 1
    # v0.3.0 (08-tools.md, memory_history): an entity lookup without its category finds
    # nothing. It is answered in the found-nothing shape, with kint's note saying why.
    for block, found_nothing in ((None, {"versions": [], "count": 0}),
                                 (2**40, {"at_block": 2**40, "version": None})):
        args = {} if block is None else {"block": block}
        nothing = agent.result("memory_history", tier="entity", key="release-gate", **args)
        assert nothing.isError is False, nothing
        answer = dict(nothing.structuredContent)
        assert "looked up by category" in answer.pop("note")
        assert answer == {"ok": True, **found_nothing}


def test_a_value_of_another_type_is_refused_never_coerced(agent):
    """pydantic's lax mode read `snapshot: "yes"` as true (an epoch anchored, gas spent) and
    `discard_local: 1` as true (the store moved aside): the schema says boolean, and a call
    that breaks the schema is refused."""
    box = agent.box
    before = kjson(box, "status")["chain_head"]
    assert refused(agent, "memory_push", snapshot="yes") == \
        "memory_push: argument 'snapshot' must be a valid boolean"
    assert "argument 'discard_local' must be a valid boolean" in refused(
        agent, "memory_pull", discard_local=1)
    assert "argument 'limit' must be a valid integer" in refused(
        agent, "memory_verify", query="release rule", limit=True)
    assert "argument 'block' must be a valid integer" in refused(
        agent, "memory_history", tier="state", key="focus", block="12")
    assert kjson(box, "status")["chain_head"] == before


def test_a_value_the_worker_refuses_names_the_tool_to_call_again(agent):
    """The worker's own check of a value (a NUL in the query, a recovery code that is not
    one) says what to fix, and its hint is the agent's next call, not a command line."""
    status = agent.call("memory_status")
    owner, space16 = status["owner"] or "0x" + "1" * 40, status["space"][:16]
    payload = agent.failed("memory_verify", query="release\x00rule")
    assert payload["hint"] == ("nothing was done; call memory_verify again with the value named "
                               "above corrected"), payload
    # A recovery code the human gave: the agent asks for it again, naming the space's own
    # file (the worker knows the space; it said the literal RECOVERY-<space16>.txt).
    payload = agent.failed("memory_connect", owner=owner, recovery_code="not a code")
    assert payload["hint"] == ("nothing was done; ask the human for the recovery code again "
                               f"(the last line of KINT_HOME/RECOVERY-{space16}.txt) and call "
                               "memory_connect again with it"), payload
    assert "kint COMMAND" not in payload["hint"]
    # So does an owner whose mixed case is not its EIP-55 checksum (a character mistyped).
    digits = "19E7E376E7C213B7E7e7e46cc70A5dD086DAff2A"
    payload = agent.failed("memory_connect", owner="0x" + digits.replace("E", "e", 1))
    assert payload["error"] == "BAD_REQUEST" and "EIP-55 checksum" in payload["message"], payload
    assert payload["hint"] == ("nothing was done; ask the human for the owner's address again, "
                               "as their wallet shows it, and call memory_connect again with "
                               "it"), payload


def test_a_refusals_notices_are_their_own_field_beside_the_agents_hint(agent):
    """A setting of the server's environment the worker does not use (KINT_OFFLINE=true: a
    switch takes 1) is said with a refusal as the result's `notices` (docs/settings.md),
    and the hint is still the agent's next call: the notice rode under the worker's hint,
    so the generic hint was not recognised and the agent got the protocol's
    `kint COMMAND --help` with the notice glued under it."""
    from mcp_session import AgentProcess

    notice = ("kint: KINT_OFFLINE='true' in this environment is not 1 (on) or 0 (off), so it "
              "is not used: this call runs with unset (the default)")
    status = agent.call("memory_status")
    owner, space16 = status["owner"] or "0x" + "1" * 40, status["space"][:16]
    offline = AgentProcess({**agent.box.env, "KINT_OFFLINE": "true"}).start()
    try:
        payload = offline.failed("memory_connect", owner=owner, recovery_code="not a code")
    finally:
        offline.close()
    assert payload["hint"] == ("nothing was done; ask the human for the recovery code again "
                               f"(the last line of KINT_HOME/RECOVERY-{space16}.txt) and call "
                               "memory_connect again with it"), payload
    assert payload.get("notices") == [notice], payload
