"""Keeping a space's writer able to pay for its pushes (DESIGN §7: the session key delegates
to writers and funds them).

A writer starts with WRITER_FUNDING_WEI from the session key. A push checks, before each
epoch is signed into the pending file, that the writer can pay that transaction's highest
possible cost; when it cannot, the session key tops it up. When the session key cannot
either, the push refuses with the address to fund, before anything is sent: a push that
runs dry halfway must not look like a fault in kint.
"""

from __future__ import annotations

from typing import Any

from web3 import Web3

from kint.chain.anchor import Anchor
from kint.protocol import ErrorCode, ProtocolError

WRITER_FUNDING_WEI = 5 * 10**16  # 0.05 ETH of the session key's funds per top-up
# What the top-up transfer itself may cost the session key (21,000 gas), at most.
_TRANSFER_GAS = 21_000


def _eth(wei: int) -> str:
    return f"{Web3.from_wei(wei, 'ether'):.6f} ETH"


def insufficient_funds(address: str, has: int, needs: int, chain_id: int,
                       nothing_dropped: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.NOT_CONNECTED,
        f"this machine's session key {address} holds {_eth(has)}, too little to fund this "
        f"space's writer for the next epoch ({_eth(needs)} needed); {nothing_dropped}",
        f"send ETH on chain {chain_id} to {address}, then push again")


def ensure_writer_funds(anchor: Anchor, session: Any, writer: str, need_wei: int,
                        nothing_dropped: str) -> None:
    """Make sure `writer` holds at least `need_wei`, topping it up from `session`."""
    held = anchor.balance(writer)
    if held >= need_wei:
        return
    top_up = max(WRITER_FUNDING_WEI, need_wei - held)
    gas_price = int(anchor.w3.eth.gas_price)
    session_needs = top_up + _TRANSFER_GAS * gas_price
    session_has = anchor.balance(session.address)
    if session_has < session_needs:
        raise insufficient_funds(session.address, session_has, session_needs,
                                 anchor.config.chain_id, nothing_dropped)
    anchor.transfer(session, writer, top_up)
