"""After a reorganisation: the chain dropped the block that carried this machine's newest
epoch (anvil_reorg, depth 1, its transaction not put back, so the session key's nonce
count falls back too).

One machine on the session's devchain for the module; each test gives itself spaces of
their own (Hermes profile stores: one space each, one session key for all of them), so a
test's reorganisation drops only the block its own push made, the last one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from web3 import Web3

from chain_machines import kjson, new_machine, on
from conftest import write_rules as write


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home):
    sb = new_machine(tmp_path_factory.mktemp("reorg"), chain_home)
    yield sb
    sb.shutdown()


@pytest.fixture(scope="module")
def w3(chain_home):
    record = json.loads((chain_home / "devchain" / "devchain.json").read_text())
    return Web3(Web3.HTTPProvider(record["rpc_url"], request_kwargs={"timeout": 10},
                                  exception_retry_configuration=None))


def space(sb, profile: str, **rules: str) -> Path:
    """A connected space of its own on `sb`: profile `profile`'s store holding `rules`."""
    db = sb.profile_db(profile)
    db.parent.mkdir(parents=True, exist_ok=True)
    write(db, sb.tenant, **rules)
    kjson(sb, *on(db, "connect", "--dev"))
    return db


def drop_last_block(w3: Web3, block: int) -> None:
    """The chain reorganises its last block, `block`, away: anvil mines an empty one at
    that height in its place, and the transactions it held are gone."""
    assert w3.eth.block_number == block, "the block to drop is not the last"
    answer = w3.provider.make_request("anvil_reorg", [1, []])
    assert "error" not in answer, answer


def test_a_nonce_a_dropped_block_freed_is_taken_again(machine, w3):
    """Space A's epoch is in the block the chain drops, so the session key's nonce count
    falls back below A's transaction, which the nonce book still holds as mined. Space B's
    push takes that nonce again and lands at once; it took the nonce after it, behind a
    hole nothing would fill, and failed after the 60 s receipt wait ('no confirmed
    receipt')."""
    a = space(machine, "nonce-a", **{"release-gate": "ship on green only"})
    b = space(machine, "nonce-b", **{"deploy-window": "deploys only before 3pm"})
    (epoch,) = kjson(machine, *on(a, "push"))["epochs"]
    lost = w3.eth.get_transaction("0x" + epoch["tx"])
    drop_last_block(w3, epoch["block"])
    assert w3.eth.get_transaction_count(lost["from"]) == lost["nonce"]

    (landed,) = kjson(machine, *on(b, "push"))["epochs"]
    assert w3.eth.get_transaction("0x" + landed["tx"])["nonce"] == lost["nonce"]
    log = (machine.kint_home / "supervisor.log").read_text(errors="replace")
    assert f"nonce {lost['nonce']}'s transaction" in log and "no longer on the chain" in log
