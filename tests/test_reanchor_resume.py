"""`kint push --reanchor` (kint/tenant_worker/reanchor.py) where the chain, the endpoint or
the machine do not go the plain way: the dropped transaction still waiting at the endpoint,
a re-anchoring killed between two epochs, dropped epochs put back in later blocks, and a
re-send whose connection was never made.

Each test has spaces of its own on one machine of the session's devchain (Hermes profile
stores, as in test_reorg.py), so its reorganisation drops only the blocks its own pushes
made, the last ones. anvil stops mining where a test needs a transaction to wait
(`evm_setAutomine`), always turned back on in a `finally`: the anvil is the whole suite's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from web3 import Web3

from chain_machines import (connected_profile, devchain_anchor, devchain_web3, kjson,
                            machine_behind_proxy, new_machine, on)
from conftest import write_rules as write
from kint.spaces import space_id as space_id_of

# Drops blocks and turns automine off on the run's one devchain: alone on it.
pytestmark = pytest.mark.chain_exclusive


@pytest.fixture(scope="module")
def flag(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("flag") / "crash-flag"


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home, flag):
    sb = new_machine(tmp_path_factory.mktemp("reanchor"), chain_home,
                     KINT_TEST_CRASH_FLAG=str(flag))
    yield sb
    sb.shutdown()


@pytest.fixture(scope="module")
def w3(chain_home):
    return devchain_web3(chain_home)



def anvil(w3: Web3, method: str, *params: object) -> object:
    answer = w3.provider.make_request(method, list(params))
    assert "error" not in answer, answer
    return answer.get("result")


def drop_last_blocks(w3: Web3, last: int, depth: int) -> None:
    """The chain reorganises its last `depth` blocks, up to `last`, away (their
    transactions gone with them): anvil mines empty ones at those heights instead."""
    assert w3.eth.block_number == last, "the blocks to drop are not the last"
    anvil(w3, "anvil_reorg", depth, [])


def meta_of(sb, db: Path, seq: int) -> dict:
    folder = sb.kint_home / "epochs" / space_id_of(sb.label(db))[:16]
    return json.loads((folder / f"{seq:08d}.meta.json").read_text())


def test_reanchor_refuses_while_the_dropped_transaction_waits(machine, w3):
    """The chain dropped epoch 2's block but the endpoint put its transaction back in its
    pool, unmined (anvil mines nothing meanwhile). `push --reanchor` refuses STALE_RPC
    naming it and sends nothing (a second send would revert once the first is mined); the
    user's next step, the hint's `kint push` once it has landed, pushes on top of it. The
    epoch landed a block later than the one this machine recorded, and the push records
    where it is (it kept the dropped block: `kint history --block` was bounded by a block
    that never held it)."""
    db = connected_profile(machine, "waiting", **{"release-gate": "ship on green only"})
    kjson(machine, *on(db, "push"))
    write(db, machine.tenant, **{"deploy-window": "deploys only before 3pm"})
    (epoch,) = kjson(machine, *on(db, "push"))["epochs"]
    raw = w3.eth.get_raw_transaction(epoch["tx"])
    write(db, machine.tenant, **{"third": "written after the reorganisation"})
    anvil(w3, "evm_setAutomine", False)
    try:
        drop_last_blocks(w3, epoch["block"], 1)
        w3.eth.send_raw_transaction(raw)  # back in the pool, waiting: nothing is mined now
        assert w3.eth.get_transaction(epoch["tx"])["blockNumber"] is None

        refused = machine.kint(*on(db, "push", "--reanchor"))
        assert refused.returncode == 5 and "[STALE_RPC]" in refused.stderr, refused.stderr
        assert (f"epoch 2's transaction {epoch['tx'][:14]} is waiting at the endpoint to "
                f"be mined again, so it lands by itself; --reanchor sent nothing"
                in refused.stderr), refused.stderr
        assert "run `kint push` once it has landed" in refused.stderr, refused.stderr
        pool = anvil(w3, "txpool_content")
        assert sum(len(by) for by in pool["pending"].values()) == 1, pool  # its own only
        anvil(w3, "evm_mine")
    finally:
        anvil(w3, "evm_setAutomine", True)
    landed = w3.eth.get_transaction_receipt(epoch["tx"])["blockNumber"]
    assert landed == epoch["block"] + 1

    (third,) = kjson(machine, *on(db, "push"))["epochs"]
    assert third["seq"] == 3
    # The file keeps the bare hex; the command gives it with its `0x` (tx_text.py).
    assert (meta_of(machine, db, 2)["block"], "0x" + meta_of(machine, db, 2)["tx"]) == (
        landed, epoch["tx"])


def test_a_pull_records_an_epoch_put_back_in_a_later_block(machine, w3):
    """The chain dropped the block of epoch 1 and mined its transaction again in the next
    one: same seq, digest and transaction, another block. A pull, which finds nothing to
    apply, records the block the head names in the epoch cache, the mirror and the
    watermark (it kept the dropped one)."""
    db = connected_profile(machine, "put-back", **{"release-gate": "ship on green only"})
    (epoch,) = kjson(machine, *on(db, "push"))["epochs"]
    raw = w3.eth.get_raw_transaction(epoch["tx"])
    drop_last_blocks(w3, epoch["block"], 1)
    w3.eth.send_raw_transaction(raw)  # mined by automine, a block later
    # anvil answers the send before its automine has mined it: wait for the receipt (a
    # receipt asked at once was not found once, in a full run).
    landed = w3.eth.wait_for_transaction_receipt(epoch["tx"], timeout=30,
                                                 poll_latency=0.05)["blockNumber"]
    assert landed == epoch["block"] + 1

    pulled = kjson(machine, *on(db, "pull"))
    assert pulled["applied"] == [] and pulled["head"]["block"] == landed, pulled
    assert meta_of(machine, db, 1)["block"] == landed
    space16 = space_id_of(machine.label(db))[:16]
    mark = json.loads((machine.kint_home / f"watermark-{space16}.json").read_text())
    assert mark["block"] == landed, mark
    log = (machine.kint_home / "supervisor.log").read_text(errors="replace")
    assert f"epoch 1 is in block {landed}" in log


def test_a_pull_records_every_epoch_put_back_not_the_head_alone(machine, w3):
    """The chain dropped the blocks of epochs 1 and 2 and mined both transactions again,
    each in a later block. A pull records both where they are: epoch 2 from the head's
    block, epoch 1 from the block epoch 2's event names as its prevBlock (it recorded the
    head alone, and epoch 1 kept its dropped block)."""
    db = connected_profile(machine, "put-back-two", **{"release-gate": "ship on green only"})
    (first,) = kjson(machine, *on(db, "push"))["epochs"]
    write(db, machine.tenant, **{"deploy-window": "deploys only before 3pm"})
    (second,) = kjson(machine, *on(db, "push"))["epochs"]
    raws = [w3.eth.get_raw_transaction(e["tx"]) for e in (first, second)]
    drop_last_blocks(w3, second["block"], second["block"] - first["block"] + 1)
    landed = []
    for raw, epoch in zip(raws, (first, second)):
        w3.eth.send_raw_transaction(raw)  # mined by automine, after the dropped blocks
        landed.append(w3.eth.wait_for_transaction_receipt(
            epoch["tx"], timeout=30, poll_latency=0.05)["blockNumber"])
    assert landed[0] > second["block"] and landed[1] > landed[0]

    pulled = kjson(machine, *on(db, "pull"))
    assert pulled["applied"] == [] and pulled["head"]["block"] == landed[1], pulled
    assert [meta_of(machine, db, seq)["block"] for seq in (1, 2)] == landed


def test_a_reanchoring_killed_between_two_epochs_finishes_once(machine, w3, flag,
                                                                chain_home):
    """The chain dropped epochs 2 and 3. The worker is killed once epoch 2's re-send has
    its receipt, before it is recorded. Running `push --reanchor` again sends epoch 3 only
    (one transaction: nothing is sent twice), and epoch 2's record names the block and
    transaction it landed in the second time, read from epoch 3's prevBlock (it kept the
    dropped block)."""
    db = connected_profile(machine, "killed", **{"release-gate": "ship on green only"})
    kjson(machine, *on(db, "push"))
    write(db, machine.tenant, **{"deploy-window": "deploys only before 3pm"})
    kjson(machine, *on(db, "push"))
    write(db, machine.tenant, **{"third": "the third epoch's rule"})
    (third,) = kjson(machine, *on(db, "push"))["epochs"]
    owner = kjson(machine, *on(db, "status"))["owner"]
    session = w3.eth.get_transaction(third["tx"])["from"]
    drop_last_blocks(w3, third["block"], 2)

    space16 = space_id_of(machine.label(db))[:16]
    flag.write_text(f"after_receipt {space16}")
    killed = machine.kint(*on(db, "push", "--reanchor"))
    assert not flag.exists(), "the worker never reached epoch 2's receipt"
    assert killed.returncode != 0, killed.stdout + killed.stderr
    sent_before = w3.eth.get_transaction_count(session)

    again = kjson(machine, *on(db, "push", "--reanchor"))
    assert [e["seq"] for e in again["reanchored"]] == [3], again
    assert w3.eth.get_transaction_count(session) == sent_before + 1
    chain = devchain_anchor(chain_home)
    space_id = space_id_of(machine.label(db))
    assert chain.head(owner, space_id).seq == 3
    event3 = chain.epoch_log(owner, space_id, 3, again["reanchored"][0]["block"])
    event2 = chain.epoch_log(owner, space_id, 2, event3.prev_block)
    assert event2 is not None
    assert (meta_of(machine, db, 2)["block"], meta_of(machine, db, 2)["tx"]) == (
        event2.block, event2.tx_hash)
    assert kjson(machine, *on(db, "pull"))["applied"] == []


def test_a_reanchor_whose_send_never_left_sends_the_same_transaction(tmp_path, chain_home,
                                                                     w3):
    """The endpoint stops listening just before epoch 2's re-send: the refusal says it
    was never sent (it said "may still land"), and the next `push --reanchor` sends that
    same signed transaction, where it signed another at the next nonce, which waited
    behind the first until the first was pushed through, and then reverted."""
    with machine_behind_proxy(tmp_path / "m", chain_home,
                              KINT_NONCE_RETRY_SECONDS="1") as (m, proxy):
        write(m.sibyl_db, m.tenant, **{"release-gate": "ship on green only"})
        kjson(m, "push")
        write(m.sibyl_db, m.tenant, **{"deploy-window": "deploys only before 3pm"})
        (epoch,) = kjson(m, "push")["epochs"]
        session = w3.eth.get_transaction(epoch["tx"])["from"]
        drop_last_blocks(w3, epoch["block"], 1)
        count = w3.eth.get_transaction_count(session)

        proxy.set_mode("close_after", methods=["eth_getBalance"])
        refused = m.kint("push", "--reanchor")
        assert refused.returncode == 5 and "[RPC_UNAVAILABLE]" in refused.stderr, \
            refused.stderr
        assert ("epoch 2 was signed to be sent again but never sent (no connection to the "
                "endpoint was made)") in refused.stderr, refused.stderr
        assert "may still land" not in refused.stderr
        signed = meta_of(m, m.sibyl_db, 2)["tx"]
        proxy.reopen()

        pushed = kjson(m, "push", "--reanchor")
        (again,) = pushed["reanchored"]
        assert again["seq"] == 2 and again["tx"] == "0x" + signed, (again, signed)
        assert w3.eth.get_transaction_count(session) == count + 1
