"""AnchorWrites.wait with no `until` (every wait but the exit push's: a normal push's
epochs, compact, rekey, `push --reanchor`, a journal's re-send, FormerKey.wait): a call
that began before the wait's own deadline and ends after it still gets what follows it.

- an unstick (`on_slow`) that runs past the deadline is followed by one more receipt look,
  which returns the receipt its send got mined: a wait only the unstick can end (the case
  `first_slow_within` exists for);
- a receipt look begun before the deadline that finds the mined receipt after it gets its
  depth read, and the receipt is returned.

Both ended ReceiptTimedOut once the exit push's early stops (made for its `until`) applied
to every wait: a push whose epoch had landed was answered "may still land".

The anvil is the test's own, started with no mining (`--no-mining`): a transaction waits in
its pool until the test mines it (`evm_mine`). The session's anvil mines each transaction
as it comes, and turning that off there would need the whole chain's turn
(`chain_exclusive`), holding every other chain test of the run. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import time
from typing import Iterator

import pytest
from eth_account import Account
from web3 import Web3

from rpc_proxy import RpcProxy
from support.own_anvil import own_anvil

from kint.chain.anchor import Anchor
from kint.chain.config import ChainConfig
from kint.chain.rpc import RpcTracker

# The waits' own timeout: short, since each test's call runs past it on purpose.
TIMEOUT_S = 2.0
CHAIN_ID = 31337  # anvil's own


@pytest.fixture(scope="module")
def unmined() -> Iterator[tuple[str, Web3]]:
    """An anvil of this module's own that mines nothing until told: (its URL, web3 on it)."""
    with own_anvil("--chain-id", str(CHAIN_ID)) as (url, w3):
        yield url, w3


def _anchor(url: str) -> Anchor:
    """An Anchor on `url` counting a receipt confirmed in its own block. No contract is
    called: a wait reads receipts and the block number only."""
    return Anchor(ChainConfig(rpc_urls=(url,), chain_id=CHAIN_ID, anchor="0x" + "11" * 20,
                              confirmations=1, rpc_timeout_s=10.0, devchain=True),
                  RpcTracker())


def _sent(w3: Web3) -> str:
    """A transfer to self by a fresh funded key, waiting in the pool: its hash (hex)."""
    key = Account.create()
    assert "error" not in w3.provider.make_request("anvil_setBalance",
                                                   [key.address, hex(10**18)])
    raw = key.sign_transaction({"to": key.address, "value": 1, "gas": 21_000, "nonce": 0,
                                "gasPrice": w3.eth.gas_price, "chainId": CHAIN_ID})
    tx = w3.eth.send_raw_transaction(raw.raw_transaction).hex()
    assert w3.eth.get_transaction(tx)["blockNumber"] is None  # waiting: nothing mined
    return tx


@pytest.mark.parametrize("until_s", [None, 3600.0])
def test_an_unstick_that_runs_past_the_deadline_is_followed_by_a_receipt_look(unmined,
                                                                              until_s):
    """The unstick runs at the wait's first turn (`slow_after_s` 0), mines the transaction,
    then takes longer than the whole wait: begun no earlier than the wait, it ends past the
    deadline whatever the box's load, with no window to hit. The look after it finds the
    receipt, which the wait returns. So too with an `until` past the wait's own deadline:
    it cuts nothing there."""
    url, w3 = unmined
    tx = _sent(w3)
    unsticks: list[float] = []

    def unstick() -> None:
        assert "error" not in w3.provider.make_request("evm_mine", [])
        time.sleep(TIMEOUT_S + 0.5)  # begun after the wait began: ends past its deadline
        unsticks.append(time.monotonic())

    until = None if until_s is None else time.monotonic() + until_s
    receipt = _anchor(url).wait(tx, timeout_s=TIMEOUT_S, on_slow=unstick,
                                slow_after_s=0.0, until=until)
    assert receipt["status"] == 1 and receipt["transactionHash"].hex().endswith(tx[-64:])
    assert len(unsticks) == 1  # the wait's only unstick, the look after it its last call


def test_a_receipt_look_that_ends_past_the_deadline_gets_its_depth_read(unmined):
    """The transaction is mined before the wait; the proxy holds every receipt look for
    longer than the wait, so the first (begun at once) finds the receipt only past the
    deadline. The depth is read and the receipt returned."""
    url, w3 = unmined
    tx = _sent(w3)
    assert "error" not in w3.provider.make_request("evm_mine", [])
    proxy = RpcProxy(url).start()
    try:
        proxy.set_mode("delay_methods", methods=["eth_getTransactionReceipt"],
                       seconds=TIMEOUT_S + 1)
        receipt = _anchor(proxy.url).wait(tx, timeout_s=TIMEOUT_S)
        assert receipt["status"] == 1
        assert proxy.calls.count("eth_getTransactionReceipt") == 1, proxy.calls
        assert "eth_blockNumber" in proxy.calls, proxy.calls  # the depth read, after it
    finally:
        proxy.stop()
