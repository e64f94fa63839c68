"""`kint authorize` and `kint session-key show` on another EpochAnchor than the one the space
was connected on (lane leftovers17).

They read the contract in force without comparing it with the enrolment's, so with a
`contract` set in config.toml after the connect, an authorize for the connected owner went
to a contract where the space has no epochs, and `show` reported the key's authorization
there. Now, with the owner from the enrolment, every lane refuses as the worker commands do
(CONFIG_INVALID, their message and hint, exit 2) and nothing is signed or sent; an explicit
`--owner` naming another owner goes on; naming the space's own owner is refused the same way
(lane left18).

Through the real CLI, on the session's devchain with a second EpochAnchor deployed on it
(as tests/test_other_contract.py does).
"""

from __future__ import annotations

import json

import pytest

from chain_machines import (deploy_second_anchor, devchain_anchor, kjson, new_machine,
                            owner_account)
from conftest import sibyl_client
from table_runs import collected_ids, running_ahead


@pytest.fixture(scope="module")
def second_anchor(chain_home) -> str:
    return deploy_second_anchor(chain_home)


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home, second_anchor):
    """Connected with --dev on the devchain's EpochAnchor, one epoch anchored, then
    `contract` set to the second one in config.toml."""
    sb = new_machine(tmp_path_factory.mktemp("authorize-other"), chain_home)
    connected = kjson(sb, "connect", "--dev")
    sb.owner, sb.session = connected["owner"], connected["session"]
    sibyl_client(sb.sibyl_db, sb.tenant).set_entity("rules", "anchored", {"rule": "first"})
    assert kjson(sb, "push")["pushed"] == 1
    sb.owner_key = owner_account(sb, sb.owner).key.hex()
    anchor = devchain_anchor(chain_home).config.anchor
    sb.config_path = sb.kint_home / "config.toml"
    sb.said = (f"this space was connected on the EpochAnchor at {anchor} on the devchain, "
               f"where this machine has anchored or pulled its epochs up to 1; kint now "
               f"reads the one at {second_anchor} (KINT_CONTRACT: `contract` in "
               f"{sb.config_path})")
    sb.hint = f'hint: set `contract = "{anchor}"` in {sb.config_path}'
    sb.config_path.write_text(f'contract = "{second_anchor}"\n')
    sb.config_path.chmod(0o600)
    yield sb
    sb.shutdown()


def sent_by(chain_home, address: str) -> int:
    return devchain_anchor(chain_home).w3.eth.get_transaction_count(address)


def expiry_on(chain_home, contract: str, owner: str, key: str) -> int:
    from dataclasses import replace

    from kint.chain.anchor import Anchor
    from kint.chain.rpc import RpcTracker

    config = devchain_anchor(chain_home).config
    return Anchor(replace(config, anchor=contract), RpcTracker()).session_key_expiry(owner, key)


LANES = [
    ("direct", ["authorize", "direct"], None),
    ("burn-nonce", ["authorize", "burn-nonce"], None),
    ("payload", ["authorize", "payload"], None),
    ("submit", ["authorize", "submit", "--deadline", "1", "--expiry", "2", "--signature", "-"],
     "0x" + "ab" * 65 + "\n"),
    ("page", ["authorize", "page"], None),
    ("session-key show", ["session-key", "show"], None),
]


OWNER_KEY_ENV = "KINT_OWNER_KEY"
NAMED_OWNER = [("authorize", "payload"), ("session-key", "show")]
OTHER_OWNER = "0x" + "42" * 20


@pytest.fixture(scope="module")
def commands(request, machine, chain_home):
    """The commands of this module's tests up to the last one, which changes the config
    they read: none signs or sends anything, so they run ahead of their tests two at a
    time (tests/table_runs.py). Yields (the owner's and the session key's transaction
    counts before any of them ran, the runs by test name)."""
    nonces = sent_by(chain_home, machine.owner), sent_by(chain_home, machine.session)
    runs = {}
    collected = collected_ids(request, test_the_connected_owner_on_another_contract_is_refused)
    for what, argv, stdin in LANES:
        if what in collected:
            runs[f"test_the_connected_owner_on_another_contract_is_refused[{what}]"] = (
                lambda argv=argv, stdin=stdin: machine.kint(
                    *argv, input=stdin, env={OWNER_KEY_ENV: machine.owner_key,
                                             "KINT_AUTHORIZE_PAGE_TIMEOUT": "5"}))
    named = test_the_spaces_owner_named_with_owner_is_refused_the_same_way
    for n, argv in enumerate(NAMED_OWNER):
        if f"argv{n}" in collected_ids(request, named):
            runs[f"test_the_spaces_owner_named_with_owner_is_refused_the_same_way[argv{n}]"] = (
                lambda argv=argv: machine.kint(*argv, "--owner",
                                               machine.owner.upper().replace("0X", "0x")))
    if any(item.name == "test_another_owner_goes_on_with_the_contract_in_force"
           for item in request.session.items):
        runs["test_another_owner_goes_on_with_the_contract_in_force"] = (
            lambda: machine.kint("authorize", "payload", "--owner", OTHER_OWNER))
    with running_ahead(runs) as ahead:
        yield nonces, ahead


@pytest.mark.parametrize("what,argv,stdin", LANES, ids=[lane[0] for lane in LANES])
def test_the_connected_owner_on_another_contract_is_refused(request, commands, machine,
                                                            chain_home, second_anchor,
                                                            what, argv, stdin):
    nonces, ahead = commands
    out = ahead.outcome(request.node.name)
    assert out.returncode == 2, (what, out.stdout, out.stderr)
    assert f"kint: error: {machine.said} [CONFIG_INVALID]" in out.stderr, out.stderr
    assert machine.hint in out.stderr, out.stderr
    assert "http://127.0.0.1" not in out.stdout, out.stdout  # no page was served
    # Nothing sent by this lane (nor by any other run so far).
    assert (sent_by(chain_home, machine.owner), sent_by(chain_home, machine.session)) == nonces
    assert expiry_on(chain_home, second_anchor, machine.owner, machine.session) == 0


@pytest.mark.parametrize("argv", NAMED_OWNER)
def test_the_spaces_owner_named_with_owner_is_refused_the_same_way(request, commands, machine,
                                                                   argv):
    """Naming the space's own owner with `--owner` (in another case) only warned and went on
    with the contract in force; it is refused as the connected owner is (lane left18)."""
    out = commands[1].outcome(request.node.name)
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"kint: error: {machine.said} [CONFIG_INVALID]" in out.stderr, out.stderr
    assert machine.hint in out.stderr, out.stderr
    assert "warning" not in out.stderr and out.stdout == "", out.stdout + out.stderr


def test_another_owner_goes_on_with_the_contract_in_force(request, commands, machine,
                                                          second_anchor):
    """The enrolment says nothing of another owner: its payload is for the contract in
    force, with no word about the space."""
    out = commands[1].outcome(request.node.name)
    assert out.returncode == 0, out.stderr
    typed = json.loads(out.stdout)
    assert typed["domain"]["verifyingContract"].lower() == second_anchor.lower()
    assert machine.said not in out.stderr and "warning" not in out.stderr, out.stderr


def test_on_the_space_s_own_contract_nothing_is_refused(commands, machine, second_anchor):
    """The contract set back: show reads the authorization --dev made, with no warning."""
    commands[1].wait_all()  # none of the commands above may read the config set back
    machine.config_path.unlink()
    try:
        out = machine.kint("session-key", "show")
        assert out.returncode == 0 and "warning" not in out.stderr, out.stderr
        assert json.loads(out.stdout)["authorized"] is True
    finally:
        machine.config_path.write_text(f'contract = "{second_anchor}"\n')
