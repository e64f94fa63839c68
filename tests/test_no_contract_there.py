"""A view that returned no data through a worker (kint.chain.anchor.NoContractThere): the
endpoint answered, and there is no EpochAnchor at the contract's address on its chain.

Its step read "check the contract setting", naming no setting, and a worker's push, pull or
connect refused it with the step in the message and, as the hint, the one of an endpoint
that did not answer: "the devchain's endpoint did not answer: `kint devchain status` says
whether it runs", or "that is a transport failure". The user was sent to restart a devchain
that ran. Now what happened is the message, and the hint is the one check of a contract with
no EpochAnchor (kint.chain.contract_source), the contract and the endpoint each named where
it was set, as a command's own chain call and doctor's contract check name them; doctor's
session key line sends the user to that check.

Real parts: the session's devchain (anvil) with a second EpochAnchor deployed for this
module, whose code the test removes once a machine connected on it has anchored an epoch
(`anvil_setCode` to empty: what a devchain started again from an empty state, or a
contract setting pointed at an address with none, looks like); the real CLI and supervisor.
"""

from __future__ import annotations

import json
import pickle

import pytest
from eth_account import Account

from chain_machines import (deploy_second_anchor, devchain_anchor, kjson, new_machine,
                            wallet_signature)
from conftest import sibyl_client
from kint.agent_server.agent_hints import agent_error
from kint.chain.anchor import NoContractThere
from kint.chain.config import devchain_record
from kint.client import KintError

DEVCHAIN = "the devchain's, which `kint devchain status` names"
GIVEN = "the URLs given to this connect's --rpc-urls, which it used in place of settings"
# An endpoint that did not answer: none of these is said of one that answered.
UNANSWERED = ("did not answer", "transport failure")


def _check(config, endpoint: str = DEVCHAIN) -> str:
    return (f"check the contract (KINT_CONTRACT: `contract` in {config}) and the endpoint "
            f"({endpoint}): they must name kint's EpochAnchor and an endpoint of chain 31337, "
            f"where it is deployed")


def _with_contract(sb, contract: str):
    config = sb.kint_home / "config.toml"
    config.write_text(f'contract = "{contract}"\n')
    config.chmod(0o600)
    return config


def _refusal(out, exit_code: int) -> tuple[str, str]:
    """(message, hint) of RPC_UNAVAILABLE refusal `out`, whose exit code is unchanged
    (`exit_code`: a push's and a pull's 5, a connect's 2)."""
    assert out.returncode == exit_code, out.stdout + out.stderr
    message, hint = out.stderr.rstrip("\n").split("\n")[-2:]
    assert message.endswith(" [RPC_UNAVAILABLE]") and hint.startswith("hint: "), out.stderr
    return (message.removeprefix("kint: error: ").removesuffix(" [RPC_UNAVAILABLE]"),
            hint.removeprefix("hint: "))


@pytest.fixture(scope="module")
def emptied(tmp_path_factory, chain_home):
    """A machine connected on a second EpochAnchor (config.toml's `contract`) with one epoch
    anchored and one row written since, the contract's code then removed: (the machine,
    its config file, the contract's address)."""
    second = deploy_second_anchor(chain_home)
    sb = new_machine(tmp_path_factory.mktemp("no-contract"), chain_home)
    config = _with_contract(sb, second)
    kjson(sb, "connect", "--dev")
    client = sibyl_client(sb.sibyl_db, sb.tenant)
    client.set_entity("rules", "anchored", {"rule": "first"})
    assert kjson(sb, "push")["pushed"] == 1
    client.set_entity("rules", "later", {"rule": "second"})
    devchain_anchor(chain_home).w3.provider.make_request("anvil_setCode", [second, "0x"])
    try:
        yield sb, config, second
    finally:
        sb.shutdown()


@pytest.mark.parametrize("command", ["push", "pull"])
def test_a_push_or_pull_says_the_contract_is_missing_not_that_the_endpoint_is_down(
        emptied, command):
    sb, config, contract = emptied
    message, hint = _refusal(sb.kint(command), 5)
    assert message.endswith(f"has no contract at {contract} (its call returned no data)"), \
        message
    assert hint == _check(config), hint
    assert not any(words in message + hint for words in UNANSWERED), (message, hint)
    # An agent is told to stop and hand the human that same check.
    told = agent_error(f"memory_{command}", KintError("RPC_UNAVAILABLE", message, hint))
    assert told.hint == f"stop and tell the human: {_check(config)}", told.hint


def test_status_verify_and_doctor_name_the_check(emptied):
    sb, config, contract = emptied
    status = sb.kint("status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"no data); {_check(config)})" in status.stdout, status.stdout
    verify = sb.kint("verify", "rules")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert f"no data); {_check(config)}); verifying against the local mirror only" in \
        verify.stderr, verify.stderr
    doctor = sb.kint("doctor")
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    lines = doctor.stdout.splitlines()
    key = next(i for i, line in enumerate(lines) if "] session key: " in line)
    assert lines[key].startswith("[FAIL] session key: checking write rights: ") and \
        lines[key].endswith(f"has no contract at {contract} (its call returned no data)"), \
        lines[key]
    assert lines[key + 1].strip() == "hint: see the contract check", lines[key + 1]
    assert any(line.strip() == f"hint: {_check(config)}" for line in lines), doctor.stdout


@pytest.mark.parametrize("given", [False, True], ids=["settings", "rpc-urls"])
def test_a_connect_through_an_address_with_no_contract_names_the_check(
        tmp_path, chain_home, emptied, given):
    """The head read of a connect: it said "that is a transport failure, never a verdict on
    the vault" and sent the user to the devchain's status. Through `--rpc-urls`, the
    endpoint named is those URLs, which the connect used in place of the settings'."""
    _, _, contract = emptied
    sb = new_machine(tmp_path / "m", chain_home)
    config = _with_contract(sb, contract)
    owner = Account.create()
    from kint.custody.vault_message import canonical_payload

    payload = canonical_payload(owner.address).decode()
    url = json.loads(devchain_record(chain_home).read_text())["rpc_url"]
    urls = ("--rpc-urls", url) if given else ()
    try:
        message, hint = _refusal(sb.kint("connect", "--owner", owner.address, "--signature",
                                          "-", *urls,
                                          input=wallet_signature(owner, payload) + "\n"), 2)
    finally:
        sb.shutdown()
    assert message == (f"cannot read the chain head: reading the head: {url} has no contract "
                       f"at {contract} (its call returned no data)"), message
    assert hint == _check(config, GIVEN if given else DEVCHAIN), hint


def test_a_contract_that_reverts_a_view_is_said_as_no_epoch_anchor(tmp_path, chain_home):
    """A contract at the address that reverts every call (code set with `anvil_setCode`:
    PUSH1 0 PUSH1 0 REVERT), where EpochAnchor's views never revert: a connect's head read
    and a command's own call (`authorize payload`) say the contract reverted it, with the
    same check, where they said "the endpoint answered with an error (execution reverted)"
    under the hint of an endpoint that did not answer."""
    reverting = Account.create().address
    devchain_anchor(chain_home).w3.provider.make_request("anvil_setCode",
                                                         [reverting, "0x60006000fd"])
    sb = new_machine(tmp_path / "m", chain_home)
    config = _with_contract(sb, reverting)
    url = json.loads(devchain_record(chain_home).read_text())["rpc_url"]
    owner = Account.create()
    from kint.custody.vault_message import canonical_payload

    payload = canonical_payload(owner.address).decode()
    try:
        connect = _refusal(sb.kint("connect", "--owner", owner.address, "--signature", "-",
                                   input=wallet_signature(owner, payload) + "\n"), 2)
        authorize = _refusal(sb.kint("authorize", "payload", "--owner", owner.address), 2)
    finally:
        sb.shutdown()
    reverted = (f"the contract at {reverting} reverted the call on {url} (EpochAnchor's "
                f"views never revert)")
    assert connect == (f"cannot read the chain head: reading the head: {reverted}",
                       _check(config)), connect
    assert authorize == (f"authorize payload: reading the authorization nonce: {reverted}",
                         _check(config)), authorize


def test_the_failure_survives_a_pickle():
    """Rebuilt from its args, the exception lacked its step (TypeError on unpickling)."""
    err = NoContractThere("reading the head: x has no contract", "check it", other_chain=True)
    again = pickle.loads(pickle.dumps(err))
    assert (again.happened, again.step, again.other_chain, str(again)) == \
        (err.happened, err.step, True, str(err))

