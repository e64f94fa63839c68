"""Sending from the machine's one session key, for one space (README, "What works today").

Every transaction the session key sends (a push, `authorize submit`) takes its nonce from
the machine-wide nonce book, is signed and recorded in the book before it is sent, and
waits for its receipt with `unstick` as the slow path: when it is not mined within
KINT_NONCE_RETRY_SECONDS, the worker re-broadcasts (or fills) the nonces below its own
that hold it back, through its own endpoint. So another space's stuck transaction delays
this one by about one retry interval, not for ever.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kint.chain.anchor import Anchor
from kint.chain.calls import ChainRefused, answer_int, bounded
from kint.chain.nonces import NonceBook, retry_seconds, unstick
from kint.chain.units import eth_text
from kint.protocol import ErrorCode, ProtocolError

log = logging.getLogger("kint.worker")

_TRANSFER_GAS = 21_000


@dataclass(frozen=True)
class Signed:
    nonce: int
    raw: bytes


class SessionSender:
    def __init__(self, anchor: Anchor, account: Any, book: NonceBook, space16: str) -> None:
        self.anchor = anchor
        self.account = account
        self.book = book
        self.space16 = space16

    def mined_count(self) -> int:
        address = self.account.address
        return bounded(lambda: answer_int(self.anchor.w3.eth.get_transaction_count(address,
                                                                                 "latest")),
                       "reading the session key's nonce")

    def sign(self, calldata: bytes, nothing_dropped: str) -> Signed:
        """A signed transaction for `calldata` at the next machine-wide nonce, gas estimated
        (a revert refuses here, nonce given back) and affordable (else NOT_CONNECTED naming
        the address to fund)."""
        nonce = self.book.allocate(self.account.address, self.mined_count(), self.space16)
        try:
            raw = self.anchor.build(self.account, calldata, nonce=nonce)
            need = self.anchor.max_cost(raw)
            has = self.anchor.balance(self.account.address)
        except BaseException:
            self.book.give_back(nonce)
            raise
        if has < need:
            self.book.give_back(nonce)
            raise ProtocolError(
                ErrorCode.NOT_CONNECTED,
                f"this machine's session key {self.account.address} holds {eth_text(has)} "
                f"ETH, too little for the next transaction ({eth_text(need)} ETH at most); "
                f"{nothing_dropped}",
                f"send ETH on chain {self.anchor.config.chain_id} to {self.account.address} "
                f"(`kint status` names it), then try again")
        self.book.record(nonce, raw)
        return Signed(nonce, raw)

    def send(self, signed: Signed) -> str:
        try:
            return self.anchor.send_raw(signed.raw)
        except ChainRefused:
            self.book.give_back(signed.nonce)
            raise

    def wait(self, tx_hash: str, signed: Signed) -> Any:
        receipt = self.anchor.wait(tx_hash, on_slow=lambda: self.unstick(signed.nonce),
                                   slow_after_s=retry_seconds())
        self.book.landed(signed.nonce)
        return receipt

    def unstick(self, own_nonce: int) -> list[int]:
        """Re-broadcast or fill what holds `own_nonce` back (see kint.chain.nonces)."""
        acted = unstick(self.book, self.account.address, own_nonce, self.mined_count(),
                        self.anchor.send_raw, self._filler)
        if acted:
            log.info("space %s: nonce %d waited on nonce(s) %s; pushed them through",
                     self.space16, own_nonce, acted)
        return acted

    def _filler(self, nonce: int) -> bytes:
        """A zero-value transfer to self at `nonce`: it spends the nonce and nothing else."""
        address = self.account.address
        price = bounded(lambda: answer_int(self.anchor.w3.eth.gas_price), "reading the gas price")
        tx = {"from": address, "to": address, "value": 0, "gas": _TRANSFER_GAS,
              "gasPrice": price * 2, "nonce": nonce, "chainId": self.anchor.config.chain_id}
        return bytes(self.account.sign_transaction(tx).raw_transaction)
