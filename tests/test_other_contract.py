"""A space read through another EpochAnchor than the one it was connected on (lane chain17).

The enrolment records the chain id and the contract; only the chain id was compared, so a
`contract` set in config.toml, or a KINT_CONTRACT in the supervisor's environment, after
the connect went unnoticed: status read the other contract's head (empty) as the space's,
and push and pull went to a contract that never saw the space. v0.3.0's 11-contract.md
("The deployment"): another address is a new chain of epochs that starts empty.

Through the real CLI, on the session's devchain with a second EpochAnchor deployed on it.
Machine A has anchored an epoch: every command that reads the head refuses, naming both
contracts, where the one in force was set and how to set it back, and nothing is sent.
Machine F connected and never pushed: the refusal says so (not "its epochs are there"),
and offers the connect that moves it, which works.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from eth_account import Account

from chain_machines import (connect_with_wallet, deploy_second_anchor, devchain_anchor, kjson,
                            ok, owner_account, recovery_code)
from conftest import sibyl_client
from machines_together import machines_started, side_by_side
from rpc_proxy import closed_port_url


@pytest.fixture(scope="module")
def second_anchor(chain_home) -> str:
    return deploy_second_anchor(chain_home)


@pytest.fixture(scope="module")
def machines(tmp_path_factory, chain_home):
    """(`machine`'s, `spare`'s), their supervisors started side by side
    (machines_together.machines_started)."""
    with machines_started([tmp_path_factory.mktemp("other-contract"),
                           tmp_path_factory.mktemp("other-contract-spare")], chain_home) as made:
        yield made


@pytest.fixture(scope="module")
def machine(machines):
    """A machine connected on the devchain's EpochAnchor, one epoch anchored."""
    sb = machines[0]
    connected = kjson(sb, "connect", "--dev")
    sb.owner, sb.space16, sb.session = (connected["owner"], connected["space"],
                                        connected["session"])
    client = sibyl_client(sb.sibyl_db, sb.tenant)
    client.set_entity("rules", "anchored", {"rule": "first"})
    assert kjson(sb, "push")["pushed"] == 1
    client.set_entity("rules", "waiting", {"rule": "not anchored yet"})
    return sb


@pytest.fixture(scope="module")
def spare(machines):
    """A second machine for the tests that set `contract` in its config.toml: each works in
    a space of its own (the joiner in the default store's, the others in a profile store's)
    and takes its config.toml away when done, so none needs a machine started for it."""
    return machines[1]


def head_on(chain_home, contract: str, owner: str, space: str):
    """(owner, space)'s head on `contract`, read straight from the devchain."""
    from kint.chain.anchor import Anchor
    from kint.chain.rpc import RpcTracker

    config = devchain_anchor(chain_home).config
    return Anchor(replace(config, anchor=contract), RpcTracker()).head(owner, space)


def space_id(sb) -> str:
    return json.loads((sb.kint_home / f"enrol-{sb.space16}.json").read_text())["space"]


def sent(sb, chain_home) -> int:
    return devchain_anchor(chain_home).w3.eth.get_transaction_count(sb.session)


def refused(out, code: int, *lines: str) -> None:
    assert out.returncode == code, out.stdout + out.stderr
    for line in lines:
        assert line in out.stderr, out.stderr


def test_a_contract_set_in_config_toml_after_the_connect_is_refused_by_name(
        machine, chain_home, second_anchor):
    anchor = devchain_anchor(chain_home).config.anchor
    path = machine.kint_home / "config.toml"
    said = (f"this space was connected on the EpochAnchor at {anchor} on the devchain, where "
            f"this machine has anchored or pulled its epochs up to 1; kint now reads the one "
            f"at {second_anchor} (KINT_CONTRACT: `contract` in {path})")
    hint = f'hint: set `contract = "{anchor}"` in {path}'
    nonce = sent(machine, chain_home)
    path.write_text(f'contract = "{second_anchor}"\n')
    path.chmod(0o600)
    try:
        # Status read the other contract's head (none) as this space's, and said nothing.
        status = kjson(machine, "status")
        assert status["chain_head"] is None and status["chain_head_unavailable"] == said, status
        # Each refused before anything is sent: two lanes side by side, each checked after.
        # The commands that take the space's head op (push, compact, pull, and
        # recovery-code, which settles a rekey under it) share a lane: side by side, one was
        # refused BUSY by the other's op before its own refusal.
        lanes = ((("push",), 5), (("compact",), 5), (("pull",), 5), (("recovery-code",), 2)), \
            ((("verify", "first"), 2), (("doctor", "--json"), None))
        outs = side_by_side(*(lambda lane=lane: [machine.kint(*command) for command, _ in lane]
                              for lane in lanes))
        for lane, lane_outs in zip(lanes, outs):
            for (command, code), out in zip(lane, lane_outs):
                if code is not None:
                    refused(out, code, f"kint: error: {said} [CONFIG_INVALID]", hint)
                    assert "kint connect` again" not in out.stderr, (command, out.stderr)
        checks = {c["name"]: c for c in json.loads(outs[1][1].stdout)["checks"]}
        assert checks["chain"] == {"name": "chain", "ok": False, "detail": said,
                                   "hint": hint.removeprefix("hint: ")}, checks["chain"]
        # Connecting again would leave this contract's mirror and watermark under an
        # enrolment for the other: refused, the enrolment as it was.
        enrol = machine.kint_home / f"enrol-{machine.space16}.json"
        before = enrol.read_bytes()
        again = machine.kint("connect", "--owner", machine.owner, "--recovery-code-stdin",
                             input=recovery_code(machine, machine.space16) + "\n")
        refused(again, 2, f"kint: error: {said}: connect does not move the space off them "
                          f"[CONFIG_INVALID]", hint)
        assert enrol.read_bytes() == before
        # In a space's table the table is named; the default contract needs removing.
        label = machine.label(machine.sibyl_db)
        path.write_text(f'[spaces."{label}"]\ncontract = "{second_anchor}"\n')
        refused(machine.kint("push"), 5, f'(KINT_CONTRACT: `contract` in {path} '
                f'[spaces."{label}"])', f'hint: set `contract = "{anchor}"` in {path} '
                f'[spaces."{label}"]')
        # Nothing left the machine, and the other contract never saw the space.
        assert sent(machine, chain_home) == nonce
        assert head_on(chain_home, second_anchor, machine.owner, space_id(machine)).seq == 0
    finally:
        path.unlink(missing_ok=True)
    assert kjson(machine, "push")["pushed"] == 1  # back on its own contract


def test_a_contract_in_the_supervisors_environment_names_its_service(
        machine, chain_home, second_anchor):
    anchor = devchain_anchor(chain_home).config.anchor
    machine.shutdown()
    machine.env["KINT_CONTRACT"] = second_anchor
    try:
        machine.start_entitled()
    finally:
        del machine.env["KINT_CONTRACT"]
    try:
        nonce = sent(machine, chain_home)
        out = machine.kint("pull")
        refused(out, 5, f"now reads the one at {second_anchor} (KINT_CONTRACT in the "
                        f"supervisor's environment) [CONFIG_INVALID]",
                f"hint: the supervisor was started with it: set KINT_CONTRACT={anchor} in "
                f"the service's environment file and restart the service, or `kint "
                f"supervisor stop` and run the next command from an environment where it is "
                f"{anchor}")
        assert sent(machine, chain_home) == nonce
    finally:
        machine.shutdown()
        machine.start_entitled()


def test_a_command_that_checks_the_spaces_chain_names_the_supervisors_endpoint_setting(
        machine):
    """The supervisor started with a KINT_RPC_URL of no devchain: the space's worker reads
    Base, where the space was connected on the devchain. A worker's refusal (pull) and a
    command that checks the space's chain in its own process (`session-key show`, with the
    worker's chain settings: kint.commands.enrolled_contract) name that setting where it
    is set. The command named "KINT_RPC_URL" alone, by a lookup in its own environment,
    which has none and which the worker does not use (where it is set travels with the
    chain settings now: ChainConfig.machine_rpc_source)."""
    seen = kjson(machine, "status")["head"]["seq"]  # the module's other tests push too
    machine.shutdown()
    machine.env["KINT_RPC_URL"] = closed_port_url()
    try:
        machine.start_entitled()
    finally:
        del machine.env["KINT_RPC_URL"]
    way_back = ("hint: read the devchain again: `kint devchain start` (its state is kept), "
                "with KINT_RPC_URL in the supervisor's environment unset or naming its "
                "endpoint")
    try:
        said = (f"this space was connected on the devchain (chain id 31337), where this "
                f"machine has anchored or pulled its epochs up to {seen}; kint now reads Base "
                f"(chain id 8453) [CONFIG_INVALID]")
        refused(machine.kint("pull"), 5, said, way_back)
        refused(machine.kint("session-key", "show"), 2, said, way_back)
    finally:
        machine.shutdown()
        machine.start_entitled()


def test_a_commands_chain_refusal_names_the_supervisors_endpoint_where_it_was_set(
        machine, chain_home):
    """The supervisor started with KINT_RPC_URL (the devchain's own endpoint) and a
    KINT_CONTRACT that names an account: a command acting for another owner reads the chain
    through the space's worker's settings, and the endpoint answers with no data. The hint
    names the endpoint where it was set, as it names the contract; it said "the endpoint
    (KINT_RPC_URL)", a setting that in the caller's shell changes nothing (review39b S2).
    Nothing on chain is changed: both only read."""
    url = devchain_anchor(chain_home).config.rpc_urls[0]
    account = Account.create().address  # an account: no code at its address
    machine.shutdown()
    machine.env.update({"KINT_RPC_URL": url, "KINT_CONTRACT": account})
    try:
        machine.start_entitled()
    finally:
        del machine.env["KINT_RPC_URL"], machine.env["KINT_CONTRACT"]
    hint = ("check the contract (KINT_CONTRACT in the supervisor's environment) and the "
            "endpoint (KINT_RPC_URL in the supervisor's environment): they must name kint's "
            "EpochAnchor and an endpoint of chain 31337, where it is deployed")
    other = Account.create().address
    try:
        refused(machine.kint("authorize", "payload", "--owner", other), 2,
                f"kint: error: authorize payload: reading the authorization nonce: {url} has "
                f"no contract at {account} (its call returned no data) [RPC_UNAVAILABLE]",
                f"hint: {hint}")
        shown = machine.kint("session-key", "show", "--owner", other)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert f"(its call returned no data); showing the local half only ({hint})" \
            in shown.stderr, shown.stderr
    finally:
        machine.shutdown()
        machine.start_entitled()


def test_a_space_that_never_pushed_says_so_and_moves_on_connect(spare, chain_home,
                                                               second_anchor):
    """Connected, nothing anchored: the refusal said "its epochs are there" of a space that
    has none; it says this machine holds none, and that connecting again moves it."""
    fresh, db = spare, spare.profile_db("fresh")
    path = fresh.kint_home / "config.toml"
    try:
        connected = kjson(fresh, "--db", str(db), "connect", "--dev")
        space16 = connected["space"]
        anchor = devchain_anchor(chain_home).config.anchor
        path.write_text(f'contract = "{second_anchor}"\n')
        path.chmod(0o600)
        said = (f"this space was connected on the EpochAnchor at {anchor} on the devchain, "
                f"where this machine has anchored or pulled none of its epochs; kint now "
                f"reads the one at {second_anchor} (KINT_CONTRACT: `contract` in {path})")
        assert kjson(fresh, "--db", str(db), "status")["chain_head_unavailable"] == said
        refused(fresh.kint("--db", str(db), "push"), 5, f"kint: error: {said} [CONFIG_INVALID]",
                f'hint: set `contract = "{anchor}"` in {path}; or run `kint connect` again '
                f'to connect the space on the contract at {second_anchor}')
        moved = ok(fresh.kint("--db", str(db), "connect", "--dev"))
        assert (f"chain: {said}: the space is connected on the one kint reads now"
                in moved.stdout.splitlines()), moved.stdout
        enrolment = json.loads((fresh.kint_home / f"enrol-{space16}.json").read_text())
        assert enrolment["contract"] == second_anchor, enrolment
        sibyl_client(db, fresh.tenant).set_entity("rules", "new", {"rule": "here"})
        assert kjson(fresh, "--db", str(db), "push")["pushed"] == 1
        assert head_on(chain_home, second_anchor, connected["owner"],
                       enrolment["space"]).seq == 1
    finally:
        path.unlink(missing_ok=True)


def test_a_machine_that_joined_is_not_made_the_vaults_maker_by_the_move(spare, machine,
                                                                       second_anchor):
    """A machine that joined the vault from the head header, then connected again on a
    contract where the space has no epochs: its wraps of the old vault were taken as a
    vault started here, so it got a recovery file (the data key in the clear on disk) and
    `vault_created`. Its enrolment moves; it is still no maker."""
    joiner = spare
    path = joiner.kint_home / "config.toml"
    try:
        wallet = owner_account(machine, machine.owner)
        joined = connect_with_wallet(joiner, wallet)
        assert joined["source"] == "chain head header" and joined["space"] == machine.space16
        path.write_text(f'contract = "{second_anchor}"\n')
        path.chmod(0o600)
        moved = connect_with_wallet(joiner, wallet)
        assert moved["chain_moved"] and moved["source"] == "local wraps", moved
        assert moved["fresh_vault"] is False and moved["recovery_file"] is None, moved
        assert not (joiner.kint_home / f"RECOVERY-{machine.space16}.txt").exists()
        enrolment = json.loads(
            (joiner.kint_home / f"enrol-{machine.space16}.json").read_text())
        assert enrolment["contract"] == second_anchor, enrolment
        assert enrolment["vault_created"] is False, enrolment
    finally:
        path.unlink(missing_ok=True)


def test_a_move_is_refused_while_the_files_that_hold_the_old_epochs_do_not_read(
        spare, second_anchor):
    """A machine that anchored an epoch, its mirror and watermark both garbled: they were
    read as "no epochs here", so connect moved the enrolment off the contract that holds
    them. It refuses, naming the mirror, and the enrolment stays where it was."""
    pushed, db = spare, spare.profile_db("pushed")
    path = pushed.kint_home / "config.toml"
    try:
        connected = kjson(pushed, "--db", str(db), "connect", "--dev")
        space16 = connected["space"]
        sibyl_client(db, pushed.tenant).set_entity("rules", "kept", {"rule": "1"})
        assert kjson(pushed, "--db", str(db), "push")["pushed"] == 1
        enrol = pushed.kint_home / f"enrol-{space16}.json"
        before = enrol.read_bytes()
        mirror = pushed.kint_home / f"mirror-{space16}.json.gz"
        for name in (mirror.name, f"watermark-{space16}.json"):
            (pushed.kint_home / name).write_bytes(b"garbled")
        path.write_text(f'contract = "{second_anchor}"\n')
        path.chmod(0o600)
        out = pushed.kint("--db", str(db), "connect", "--dev")
        assert out.returncode != 0, out.stdout + out.stderr
        assert out.stderr.splitlines()[0].endswith("[CORRUPT_STATE]"), out.stderr
        assert f"kint's state file {mirror} " in out.stderr, out.stderr
        assert enrol.read_bytes() == before
    finally:
        path.unlink(missing_ok=True)


ENROLLED = "0x" + "11" * 20


@pytest.mark.parametrize("source, where, enrolled, hint", [
    # A `contract` in the file over a space connected on Base's deployment: remove it.
    ("file", "/h/config.toml", None,
     "remove `contract` from /h/config.toml (the default is {default})"),
    ("file", "/h/config.toml", ENROLLED, 'set `contract = "{enrolled}"` in /h/config.toml'),
    ("daemon environment", None, None, "the supervisor was started with it: unset "
     "KINT_CONTRACT in the service's environment file and restart the service, or `kint "
     "supervisor stop` and run the next command from an environment where it is unset"),
    # Set when the space was connected, unset since: Base's deployment is read now.
    ("default", None, ENROLLED, 'set `contract = "{enrolled}"` in $KINT_HOME/config.toml (or '
     'KINT_CONTRACT={enrolled} in the supervisor\'s environment)'),
])
def test_the_hint_names_the_setting_where_it_was_set(source, where, enrolled, hint):
    """Each place the contract in force can come from, and the way back from it; on Base,
    a space connected on the deployment gets the setting removed, not repeated."""
    from kint.chain.config import ChainConfig
    from kint.settings.schema import DEFAULT_CONTRACT
    from kint.tenant_worker.enrolled_chain import other_chain
    from kint.tenant_worker.enrolment import Enrolment

    enrolled = enrolled or DEFAULT_CONTRACT
    now = ENROLLED if enrolled == DEFAULT_CONTRACT else "0x" + "22" * 20
    chain = ChainConfig(("https://base.example",), 8453, now, 2, 10.0,
                        contract_source=source, contract_where=where)
    enrolment = Enrolment(space="ab" * 32, tenant="t", owner="0x" + "33" * 20, account="eoa",
                          contract=enrolled, chain_id=8453)
    refusal = other_chain(enrolment, chain, lambda: 4)
    assert refusal is not None and refusal.hint == hint.format(default=DEFAULT_CONTRACT,
                                                               enrolled=enrolled)
    assert (f"at {enrolled} on Base, where this machine has anchored or pulled its epochs up "
            f"to 4; kint now reads the one at {now} (") in refusal.message
    # The same contract in another case is the same contract.
    assert other_chain(enrolment, replace(chain, anchor=enrolled.lower()), lambda: 4) is None


@pytest.mark.parametrize("chain_id, said", [
    (8453, "KINT_CONTRACT unset: Base mainnet's deployment"),
    (84532, "KINT_CONTRACT unset: the default, the address of Base mainnet's deployment, "
            "though kint reads chain 84532, not Base"),
    (31337, "KINT_CONTRACT unset: the default, the address of Base mainnet's deployment, "
            "though kint reads the devchain, not Base"),
])
def test_the_default_contract_is_called_base_mainnets_deployment_only_on_base(chain_id, said):
    """With no contract set, kint reads the default address: Base mainnet's deployment on
    Base, and on any other chain only that address. The refusal said "Base mainnet's
    deployment" whatever the chain."""
    from kint.chain.config import ChainConfig
    from kint.settings.schema import DEFAULT_CONTRACT
    from kint.tenant_worker.enrolled_chain import other_chain
    from kint.tenant_worker.enrolment import Enrolment

    chain = ChainConfig(("http://127.0.0.1:9",), chain_id, DEFAULT_CONTRACT, 2, 10.0,
                        contract_source="default", contract_where=None)
    enrolment = Enrolment(space="ab" * 32, tenant="t", owner="0x" + "33" * 20, account="eoa",
                          contract=ENROLLED, chain_id=chain_id)
    refusal = other_chain(enrolment, chain, lambda: 0)
    assert refusal is not None
    assert refusal.message.endswith(f"kint now reads the one at {DEFAULT_CONTRACT} ({said})"), \
        refusal.message
