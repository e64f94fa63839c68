"""After a reorganisation: the chain dropped the block that carried this machine's newest
epoch (anvil_reorg, depth 1, its transaction not put back, so the session key's nonce
count falls back too).

One machine on the session's devchain for the module; each test gives itself spaces of
their own (Hermes profile stores: one space each, one session key for all of them), so a
test's reorganisation drops only the block its own push made, the last one. The last test
needs a transaction in flight across the reorganisation, which a test cannot time against
a real anvil, so its endpoint is a stand-in answering as anvil does after one.
"""

from __future__ import annotations

import json

import pytest
from web3 import Web3

from chain_machines import connected_profile, devchain_web3, kjson, new_machine, ok, on
from conftest import write_rules as write
from kint.spaces import space_id as space_id_of


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home):
    sb = new_machine(tmp_path_factory.mktemp("reorg"), chain_home)
    yield sb
    sb.shutdown()


@pytest.fixture(scope="module")
def w3(chain_home):
    return devchain_web3(chain_home)



def drop_last_block(w3: Web3, block: int) -> None:
    """The chain reorganises its last block, `block`, away: anvil mines an empty one at
    that height in its place, and the transactions it held are gone."""
    assert w3.eth.block_number == block, "the block to drop is not the last"
    answer = w3.provider.make_request("anvil_reorg", [1, []])
    assert "error" not in answer, answer


# Drops the devchain's last block (anvil_reorg): alone on the run's devchain.
@pytest.mark.chain_exclusive
def test_a_nonce_a_dropped_block_freed_is_taken_again(machine, w3):
    """Space A's epoch is in the block the chain drops, so the session key's nonce count
    falls back below A's transaction, which the nonce book still holds as mined. Space B's
    push takes that nonce again and lands at once; it took the nonce after it, behind a
    hole nothing would fill, and failed after the 60 s receipt wait ('no confirmed
    receipt')."""
    a = connected_profile(machine, "nonce-a", **{"release-gate": "ship on green only"})
    b = connected_profile(machine, "nonce-b", **{"deploy-window": "deploys only before 3pm"})
    (epoch,) = kjson(machine, *on(a, "push"))["epochs"]
    lost = w3.eth.get_transaction(epoch["tx"])
    drop_last_block(w3, epoch["block"])
    assert w3.eth.get_transaction_count(lost["from"]) == lost["nonce"]

    (landed,) = kjson(machine, *on(b, "push"))["epochs"]
    assert w3.eth.get_transaction(landed["tx"])["nonce"] == lost["nonce"]
    log = (machine.kint_home / "supervisor.log").read_text(errors="replace")
    assert f"nonce {lost['nonce']}'s transaction" in log and "no longer on the chain" in log


# Drops the devchain's last block (anvil_reorg): alone on the run's devchain.
@pytest.mark.chain_exclusive
def test_push_reanchor_sends_the_dropped_epoch_again(machine, w3, chain_home):
    """Epoch 2 was in the block the chain dropped. With nothing changed, push says so and
    status shows the head behind, naming a reorganisation; with a change, push refuses
    STALE_RPC, its hint naming
    `kint push --reanchor` (it said only that kint changes nothing, leaving no way out);
    `push --reanchor` sends epoch 2 again byte for byte (the same digest on the same
    prev, from the epoch cache), then the change made since as epoch 3. The machine is in
    step again: pull has nothing to refuse and verify proceeds."""
    from chain_machines import devchain_anchor

    db = connected_profile(machine, "again", **{"release-gate": "ship on green only"})
    kjson(machine, *on(db, "push"))
    write(db, machine.tenant, **{"deploy-window": "deploys only before 3pm"})
    (epoch,) = kjson(machine, *on(db, "push"))["epochs"]
    drop_last_block(w3, epoch["block"])
    # Nothing changed: push reads no chain and says so, as v0.3.0's does; status is where
    # the loss shows (it said "a stale or lagging RPC" only).
    same = ok(machine.kint(*on(db, "push")))
    assert same.stdout == "nothing to push: the store matches the last anchored epoch\n"
    status = ok(machine.kint(*on(db, "status"))).stdout
    assert ("(BEHIND this machine: a stale or lagging RPC, or a reorganisation: `kint push` "
            "says which)") in status, status
    write(db, machine.tenant, **{"third": "written after the reorganisation"})

    refused = machine.kint(*on(db, "push"))
    assert refused.returncode == 5 and "[STALE_RPC]" in refused.stderr, refused.stderr
    assert "a reorganisation dropped epoch 2" in refused.stderr
    assert "`kint push --reanchor` sends them again" in refused.stderr, refused.stderr

    dry = ok(machine.kint(*on(db, "push", "--reanchor", "--dry-run"))).stdout
    assert dry.startswith("would anchor epoch 2 again (the chain lost it)\n"), dry
    assert w3.eth.block_number == epoch["block"]  # nothing sent
    pushed = kjson(machine, *on(db, "push", "--reanchor"))
    (again,) = pushed["reanchored"]
    assert (again["seq"], again["digest"]) == (2, epoch["digest"])
    assert again["gas_used"] > 0 and "gas" not in again, again  # as push's epochs name it
    # Landed again, in a block after the one the reorganisation dropped. Its transaction
    # may be the very one dropped (same nonce, fee and calldata sign to the same bytes when
    # the gas price has not moved, as on a quiet devchain): the receipt is what counts.
    assert again["block"] > epoch["block"]
    assert w3.eth.get_transaction_receipt(again["tx"])["blockNumber"] == again["block"]
    assert [e["seq"] for e in pushed["epochs"]] == [3]

    status = kjson(machine, *on(db, "status"))
    owner, space_id = status["owner"], space_id_of(machine.label(db))
    chain = devchain_anchor(chain_home)
    assert chain.head(owner, space_id).seq == 3
    landed = chain.epoch_log(owner, space_id, 2, again["block"])
    assert landed is not None and landed.digest == epoch["digest"]
    meta = json.loads((machine.kint_home / "epochs" / space_id[:16] / "00000002.meta.json")
                      .read_text())
    # The file keeps the bare hex; the command gives it with its `0x` (tx_text.py).
    assert (meta["block"], "0x" + meta["tx"]) == (again["block"], again["tx"])
    assert kjson(machine, *on(db, "pull"))["applied"] == []
    verdict = kjson(machine, *on(db, "verify", "deploys only before 3pm", "--no-write"))
    assert verdict["decision"] == "proceed", verdict

    unused = ok(machine.kint(*on(db, "push", "--reanchor")))
    assert "kint: --reanchor not used: the chain holds every epoch" in unused.stderr
    assert unused.stdout == "nothing to push: the store matches the last anchored epoch\n"


def test_a_transaction_waiting_behind_a_dropped_one_gets_its_hole_filled(tmp_path):
    """A transaction already sent (nonce 8) when the block holding the one below it
    (nonce 7, mined) is dropped waits on a hole: the wait's slow path now fills nonce 7
    with a transfer to self, where it skipped a nonce the book held as mined and the send
    waited out the receipt timeout. The endpoint is a stand-in: the chain's count fell back
    to 7, and transaction 7 is unknown to it."""
    from eth_account import Account
    from web3.exceptions import TransactionNotFound

    from kint.chain.nonces import NonceBook
    from kint.tenant_worker.session_sender import SessionSender

    account = Account.create()
    book = NonceBook(tmp_path)
    for nonce in (7, 8):
        assert book.allocate(account.address, 7, "a" * 16) == nonce
        book.record(nonce, bytes([nonce]) * 10)
    book.landed(7, "0x" + "77" * 32)
    sent: list[bytes] = []

    class Eth:
        gas_price = 10**9

        def get_transaction_count(self, address: str, block: str) -> int:
            return 7

        def get_transaction(self, tx_hash: str) -> None:
            raise TransactionNotFound(tx_hash)

    class StandIn:
        w3 = type("W3", (), {"eth": Eth()})()
        config = type("Config", (), {"chain_id": 31337})()

        def send_raw(self, raw: bytes) -> str:
            sent.append(raw)
            return "00" * 32

    sender = SessionSender(StandIn(), account, book, "a" * 16)  # type: ignore[arg-type]
    assert sender.unstick(8) == [7]
    assert len(sent) == 1 and Account.recover_transaction(sent[0]) == account.address
    entry = json.loads((tmp_path / "nonces" / f"{7:012d}.json").read_text())
    assert entry["raw"] == sent[0].hex() and not entry["mined"]  # the filler, at nonce 7


def test_an_endpoint_a_block_behind_does_not_free_a_mined_nonce(tmp_path):
    """An endpoint behind the block that mined nonce 7 (a load balancer's late node)
    neither counts it nor knows its transaction, yet nothing was dropped: the nonce stays
    taken, and the next push takes 8, where taking 7 again would be refused by the chain
    as a spent nonce. Once the endpoint is at that block and still does not know it, the
    block was dropped, and 7 is free again. The endpoint is a stand-in."""
    from eth_account import Account
    from web3.exceptions import TransactionNotFound

    from kint.chain.nonces import NonceBook
    from kint.tenant_worker.session_sender import SessionSender, Signed

    account = Account.create()
    book = NonceBook(tmp_path)
    assert book.allocate(account.address, 7, "a" * 16) == 7
    book.record(7, b"\x07" * 10)

    class Eth:
        block_number = 0

        def get_transaction_count(self, address: str, block: str) -> int:
            return 7

        def get_transaction(self, tx_hash: str) -> None:
            raise TransactionNotFound(tx_hash)

    eth = Eth()

    class StandIn:
        w3 = type("W3", (), {"eth": eth})()

        def wait(self, tx_hash: str, **_: object) -> dict[str, int]:
            return {"blockNumber": 100}

        def block_number(self) -> int:
            return eth.block_number

    sender = SessionSender(StandIn(), account, book, "a" * 16)  # type: ignore[arg-type]
    sender.wait("0x" + "77" * 32, Signed(7, b"\x07" * 10))
    eth.block_number = 99  # a block behind the one that mined nonce 7
    sender._free_dropped(7)
    assert book.allocate(account.address, 7, "a" * 16) == 8
    book.give_back(8)
    eth.block_number = 100  # at that block, and the transaction is not in it: dropped
    sender._free_dropped(7)
    assert book.allocate(account.address, 7, "a" * 16) == 7


def test_a_replacement_is_in_the_book_before_it_is_sent(tmp_path):
    """`cancel` records the transfer replacing a dropped push before it sends it, as every
    other send of the key's is recorded: it recorded after the send, so a worker killed
    between the two left the push in the book while the transfer waited at the endpoint,
    and a re-broadcast sent the push. A send that fails after the endpoint may have taken
    it (a kill, a silent endpoint) keeps the transfer; a refusal naming the transfer itself
    (too little ETH for its bid) puts the push back. The endpoint is a stand-in."""
    from eth_account import Account

    from kint.chain.calls import ChainRefused
    from kint.chain.nonces import NonceBook
    from kint.chain.rpc import RpcUnavailable
    from kint.tenant_worker.session_sender import SessionSender

    account = Account.create()
    book = NonceBook(tmp_path)
    push = b"\x07" * 10
    assert book.allocate(account.address, 7, "a" * 16) == 7
    book.record(7, push)

    def in_book() -> str:
        return json.loads((tmp_path / "nonces" / f"{7:012d}.json").read_text())["raw"]

    class Killed(BaseException):
        """The worker's end between two lines (SIGKILL, as far as the book can tell)."""

    seen: list[str] = []
    failure: list[BaseException] = []

    class StandIn:
        w3 = type("W3", (), {"eth": type("Eth", (), {"gas_price": 10**9})()})()
        config = type("Config", (), {"chain_id": 31337})()

        def fee_caps(self, raw: bytes) -> tuple[int, int]:
            return 2 * 10**9, 10**8

        def send_raw(self, raw: bytes) -> str:
            seen.append(in_book())  # what the book holds as the transfer goes out
            raise failure[0]

    sender = SessionSender(StandIn(), account, book, "a" * 16)  # type: ignore[arg-type]
    failure.append(Killed())
    with pytest.raises(Killed):
        sender.cancel(7, push)
    transfer = in_book()
    assert seen == [transfer] and transfer != push.hex()
    assert Account.recover_transaction(bytes.fromhex(transfer)) == account.address

    book.record(7, push)
    failure[0] = RpcUnavailable("sending a transaction: the endpoint did not answer")
    with pytest.raises(RpcUnavailable):
        sender.cancel(7, push)
    assert in_book() != push.hex()  # it may be at the endpoint: the transfer stays

    book.record(7, push)
    failure[0] = ChainRefused("INSUFFICIENT_FUNDS")
    with pytest.raises(ChainRefused):
        sender.cancel(7, push)
    assert in_book() == push.hex() and seen[-1] != push.hex()
