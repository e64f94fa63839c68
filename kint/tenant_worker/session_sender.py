"""Sending from the machine's one session key, for one space (README, "What works today").

Every transaction the session key sends (a push, `authorize submit`) takes its nonce from
the machine-wide nonce book, is signed and recorded in the book before it is sent, and
waits for its receipt with `unstick` as the slow path: when it is not mined within
KINT_NONCE_RETRY_SECONDS (by half the receipt wait at the latest), the worker re-broadcasts
(or fills) the nonces below its own that hold it back, through its own endpoint. So another
space's stuck transaction delays this one by about one retry interval, not for ever.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from web3.exceptions import TransactionNotFound

from kint.chain.anchor import Anchor
from kint.chain.calls import ChainRefused, answer_int, bounded, spent_nonce
from kint.chain.config import ChainConfig
from kint.chain.nonces import NonceBook, retry_seconds, unstick
from kint.chain.rpc import RpcUnavailable
from kint.chain.units import eth_text
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import FUND_DEVCHAIN_KEY_HINT, FUND_SESSION_KEY_HINT

log = logging.getLogger("kint.worker")

_TRANSFER_GAS = 21_000


def mined_count(anchor: Anchor, address: str) -> int:
    """How many transactions of `address` the chain has mined: its next nonce."""
    return bounded(lambda: answer_int(anchor.w3.eth.get_transaction_count(address, "latest")),
                   "reading the session key's nonce")


def replacement(anchor: Anchor, account: Any, nonce: int, replaced: bytes) -> bytes:
    """A zero-value transfer to self at `nonce`, signed by `account`, bidding enough to
    replace `replaced` at the endpoint (`SessionSender.cancel` says why and how much)."""
    cap, tip = anchor.fee_caps(replaced)
    price = max(-(-max(cap, tip) * 5 // 4), _gas_price(anchor) * 2)
    return _transfer_to_self(anchor, account, nonce, price)


def filler(anchor: Anchor, account: Any, nonce: int) -> bytes:
    """A zero-value transfer to self at `nonce`, signed by `account`: it spends a nonce that
    nothing else will (nonces.unstick's fill), and nothing else, at twice the current price
    so it is mined at once."""
    return _transfer_to_self(anchor, account, nonce, _gas_price(anchor) * 2)


def _gas_price(anchor: Anchor) -> int:
    return bounded(lambda: answer_int(anchor.w3.eth.gas_price), "reading the gas price")


def _transfer_to_self(anchor: Anchor, account: Any, nonce: int, price: int) -> bytes:
    """The one transaction a cancel and a fill send: 21,000 gas, zero value, to self."""
    address = account.address
    tx = {"from": address, "to": address, "value": 0, "gas": _TRANSFER_GAS,
          "gasPrice": price, "nonce": nonce, "chainId": anchor.config.chain_id}
    return bytes(account.sign_transaction(tx).raw_transaction)


def fund_hint(config: ChainConfig, address: str) -> str:
    """The hint of a session key `address` too poor for its next transaction on the chain of
    `config`: on the devchain no wallet holds its ETH, so the command that gives it is named
    (as join's next: line, doctor and authorize name it); elsewhere the chain and the
    address to send ETH to, Base's words as they were."""
    if config.devchain:
        return FUND_DEVCHAIN_KEY_HINT.format(address=address)
    return FUND_SESSION_KEY_HINT.format(chain_id=config.chain_id, address=address)


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
        return mined_count(self.anchor, self.account.address)

    def give_back(self, nonce: int) -> None:
        """`nonce` will never be sent: the machine's book forgets it (NonceBook.give_back)."""
        self.book.give_back(nonce)

    def sign(self, calldata: bytes, nothing_dropped: str) -> Signed:
        """A signed transaction for `calldata` at the next machine-wide nonce, gas estimated
        (a revert refuses here) and affordable (else NOT_CONNECTED naming the address to
        fund). Every chain call comes first; the nonce is taken and the transaction signed
        and written to the book in one step after them (NonceBook.allocate), so a push
        killed or failing on its way there leaves no nonce behind."""
        count = self.mined_count()
        self._free_dropped(count)
        tx = self.anchor.prepare(self.account, calldata)
        need = self.anchor.max_cost(tx)
        has = self.anchor.balance(self.account.address)
        if has < need:
            raise ProtocolError(
                ErrorCode.NOT_CONNECTED,
                f"this machine's session key {self.account.address} holds {eth_text(has)} "
                f"ETH, too little for the next transaction ({eth_text(need)} ETH at most); "
                f"{nothing_dropped}",
                fund_hint(self.anchor.config, self.account.address))
        signed: list[bytes] = []

        def sign_at(nonce: int) -> bytes:
            signed.append(bytes(self.account.sign_transaction({**tx, "nonce": nonce})
                                .raw_transaction))
            return signed[0]

        nonce = self.book.allocate(self.account.address, count, self.space16, sign_at)
        return Signed(nonce, signed[0])

    def signed_before(self, tx_hash: str) -> Signed | None:
        """Transaction `tx_hash` as the nonce book holds it, signed and never mined, at a
        nonce the chain has not spent: one a run cut short signed (and perhaps never
        sent), to be sent as it is rather than signed again at the next nonce."""
        entry = self.book.signed_as(self.account.address, tx_hash)
        if entry is None or entry.raw is None or entry.nonce < self.mined_count():
            return None
        return Signed(entry.nonce, bytes.fromhex(entry.raw))

    def send(self, signed: Signed) -> str:
        """Send `signed`; a refusal gives its nonce back, unless the refusal is that the
        nonce is spent: then it may be this very transaction that spent it, and the book
        keeps the entry until the chain's count passes it."""
        try:
            return self.anchor.send_raw(signed.raw)
        except ChainRefused as err:
            if not spent_nonce(err):
                self.book.give_back(signed.nonce)
            raise

    def wait(self, tx_hash: str, signed: Signed, until: float | None = None) -> Any:
        """The receipt, `unstick` running every KINT_NONCE_RETRY_SECONDS meanwhile, the
        first by half the wait at the latest (as a former key's wait, former_key.py): with
        the setting at the receipt wait (60 s) or more it never ran, and a push held back by
        another space's stuck transaction timed out, as did every later one. `until`: the
        exit push's bound (AnchorWrites.wait, push._push_epochs)."""
        receipt = self.anchor.wait(tx_hash, on_slow=lambda: self.unstick(signed.nonce),
                                   slow_after_s=retry_seconds(), first_slow_within=True,
                                   until=until)
        block = receipt.get("blockNumber")
        self.book.landed(signed.nonce, tx_hash, int(block) if block is not None else None)
        return receipt

    def _free_dropped(self, chain_count: int) -> None:
        """Give back the nonces whose mined transaction the chain no longer has. A block
        that a reorganisation dropped takes its transactions with it, and the sender's
        count falls back below them; their entries, still marked mined, would put the next
        transaction past a hole that nothing fills (unstick leaves a mined entry alone),
        so it would wait out the whole receipt timeout and fail. The endpoint is asked for
        each one: a transaction it still knows (in a block, or waiting to be mined again)
        keeps its nonce, and a lookup that fails changes nothing. An endpoint not yet at
        the block that mined it (one behind a load balancer, a block late) neither counts
        nor knows the transaction, yet nothing was dropped: taking its nonce again would
        send a transaction the chain refuses as a spent nonce, so it is asked again once
        it has caught up (as a push tells a lagging endpoint from a reorganisation,
        behind_head.reorganised_at)."""
        at: int | None = None
        for entry in self.book.mined_uncounted(self.account.address, chain_count):
            tx_hash = "0x" + str(entry.tx)
            if entry.block is not None:
                try:
                    at = self.anchor.block_number() if at is None else at
                except RpcUnavailable:
                    return
                if at < entry.block:
                    continue

            def lookup() -> Any:
                try:
                    return self.anchor.w3.eth.get_transaction(tx_hash)
                except TransactionNotFound:  # an answer: the endpoint has no such transaction
                    return None

            try:
                known = bounded(lookup, "looking up a mined transaction")
            except RpcUnavailable:
                return
            if known is not None:
                continue
            self.book.give_back(entry.nonce)
            log.warning("space %s: nonce %d's transaction %s is no longer on the chain (a "
                        "dropped block); the nonce is free again", self.space16, entry.nonce,
                        tx_hash[:14])

    def unstick(self, own_nonce: int) -> list[int]:
        """Re-broadcast or fill what holds `own_nonce` back (see kint.chain.nonces)."""
        count = self.mined_count()
        # A nonce below this one whose block the chain dropped since it was taken is a hole
        # too: given back here, it is filled below like any nonce never sent.
        self._free_dropped(count)
        acted = unstick(self.book, self.account.address, own_nonce, count,
                        self.anchor.send_raw,
                        lambda nonce: filler(self.anchor, self.account, nonce))
        if acted:
            log.info("space %s: nonce %d waited on nonce(s) %s; pushed them through",
                     self.space16, own_nonce, acted)
        return acted

    def cancel(self, nonce: int, replaced: bytes) -> bytes:
        """Replace `replaced`, a transaction of this key waiting at the endpoint at `nonce`
        that can only revert now, with a zero-value transfer to self at the same nonce:
        21,000 gas where a push that reverts still pays its whole calldata (about 40 gas a
        byte, the EIP-7623 floor). Endpoints take a replacement only at a higher price
        (geth and anvil ask 10% more of both the price and the tip), so it bids a quarter
        more than the replaced one's highest price, or twice the current price if that is
        more. The book holds the transfer from before it is sent, as every send of the
        key's is recorded first: a worker killed between the two would otherwise leave the
        push in the book while the transfer waits at the endpoint, and a re-broadcast
        would send the push it replaced. Raises what the send raised. An endpoint that
        answered the send and did not take the transfer (ChainRefused: too little ETH for
        its bid, a bid too low, a nonce mined meanwhile; kint.chain.calls.refused_send)
        leaves the push as the nonce's transaction, so the book holds the push again; any
        other failure may have come after the endpoint took it, so the transfer stays
        (either is a valid transaction at that nonce to send again)."""
        raw = replacement(self.anchor, self.account, nonce, replaced)
        self.book.record(nonce, raw)
        try:
            self.anchor.send_raw(raw)
        except ChainRefused:
            self.book.record(nonce, replaced)
            raise
        return raw
