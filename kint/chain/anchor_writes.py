"""What kint sends to the EpochAnchor contract: the calldata of its writes, the signed
transaction (gas always estimated), its fee caps, its sending, and the wait for its receipt.

Why a module of its own: a write is where a revert shows up (in the estimate, so without
spending gas: anvil silently drops a transaction below the calldata floor) and must be told
by the contract's custom error, and where a deadline bounds the wait for a receipt; the
reads (kint.chain.anchor) need none of it. web3's contract layer is built here only, on
first need.

`AnchorWrites` is one of the parts kint.chain.anchor.Anchor is made of; the attributes it
reads are the Anchor's, named below.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import requests
from eth_abi import decode as abi_decode
from eth_abi.exceptions import DecodingError
from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.exceptions import (ContractCustomError, ContractLogicError, Web3Exception,
                             Web3RPCError)

from kint.chain.anchor_abi import bare_hex, bytes32_of, checksummed
from kint.chain.calls import (AlreadyHeld, ChainRefused, bounded, refused_send,
                              transport_words)
from kint.chain.config import ChainConfig
from kint.chain.rpc import ReceiptTimedOut, RpcUnavailable, WaitCut
from kint.keccak import keccak
from kint.seconds_text import seconds_text

RECEIPT_TIMEOUT_S = 60.0
# With `first_slow_within`, the share of the receipt wait by which its first slow step runs
# at the latest: half leaves the other half for what that step sent to be mined.
FIRST_SLOW_SHARE = 0.5


def _highest_price(tx: dict[str, Any]) -> int:
    """The most per gas a transaction accepts: its fee cap (EIP-1559), else its gas price."""
    return int(tx.get("maxFeePerGas", tx.get("gasPrice", 0)))


class AnchorWrites:
    """The writes of an Anchor: calldata, signed transactions, receipts."""

    # The Anchor's, set in its __init__ (w3 and contract built on first use).
    config: ChainConfig
    w3: Web3
    contract: Any
    _errors: dict[bytes, tuple[str, list[tuple[str, str]]]]
    block_number: Callable[[], int]

    # -- calldata ----------------------------------------------------------------------

    def _encode(self, fn: str, *args: Any) -> bytes:
        return bytes.fromhex(bare_hex(self.contract.encode_abi(fn, args=list(args))))

    def encode_push(self, owner: str, space_hex: str, prev: str, ct: bytes) -> bytes:
        """Calldata of push(owner, space, prev, ct); prev is the current head digest."""
        return self._encode("push", checksummed(owner), bytes32_of(space_hex), bytes32_of(prev),
                            bytes(ct))

    def encode_set_session_key(self, key: str, expiry: int) -> bytes:
        """Calldata of setSessionKey(key, expiry), sent by the owner (0 revokes)."""
        return self._encode("setSessionKey", checksummed(key), int(expiry))

    def encode_revoke_session_key(self, key: str) -> bytes:
        """Calldata of revokeSessionKey(key), sent by the owner."""
        return self._encode("revokeSessionKey", checksummed(key))

    def encode_set_session_key_by_sig(self, owner: str, key: str, expiry: int, deadline: int,
                                      signature: bytes) -> bytes:
        """Calldata of setSessionKeyBySig: anyone (normally the key) submits the owner's
        signature over authorization_digest(owner, key, expiry, authNonce(owner), deadline)."""
        return self._encode("setSessionKeyBySig", checksummed(owner), checksummed(key),
                            int(expiry), int(deadline), bytes(signature))

    def encode_set_start_seq(self, space_hex: str, seq: int) -> bytes:
        """Calldata of setStartSeq(space, seq), sent by the owner."""
        return self._encode("setStartSeq", bytes32_of(space_hex), int(seq))

    # -- reverts -----------------------------------------------------------------------

    def decode_revert(self, data: bytes | str | None) -> ChainRefused:
        """A ChainRefused naming the custom error in revert `data` and its arguments
        (bytes32 as 64 hex, addresses checksummed), or "reverted" when the data names none."""
        raw = b""
        if isinstance(data, (bytes, bytearray)):
            raw = bytes(data)
        elif isinstance(data, str) and data.startswith("0x"):
            try:
                raw = bytes.fromhex(data[2:])
            except ValueError:
                raw = b""
        known = self._errors.get(raw[:4]) if len(raw) >= 4 else None
        if known is None:
            return ChainRefused("reverted", f"revert data 0x{raw.hex()}" if raw else "")
        name, inputs = known
        try:
            values = abi_decode([t for _, t in inputs], raw[4:]) if inputs else ()
        except (DecodingError, ValueError):
            return ChainRefused(name, f"undecodable arguments 0x{raw[4:].hex()}")
        fields = {}
        for (arg, typ), value in zip(inputs, values):
            fields[arg] = (checksummed(value) if typ == "address"
                           else bytes(value).hex() if typ.startswith("bytes") else value)
        return ChainRefused(name, fields=fields)

    def _decode_revert(self, err: Exception) -> ChainRefused:
        refused = self.decode_revert(getattr(err, "data", None))
        if refused.error == "reverted" and not refused.fields:
            return ChainRefused("reverted", str(err)[:200])
        return refused


    # -- writes ------------------------------------------------------------------------

    def prepare(self, account: LocalAccount, call: Any, value: int = 0) -> dict[str, Any]:
        """The transaction for `call` (a contract function call, or calldata from one of the
        encode_* builders) from `account`, gas estimated and fees set, without its nonce:
        every chain call a transaction needs but the nonce, so that the session key takes
        its nonce only once they have gone through (SessionSender.sign). A revert surfaces
        here as ChainRefused."""
        if isinstance(call, (bytes, bytearray)):
            fn, args = self.contract.decode_function_input(bytes(call))
            call = fn(**args)
        sender = account.address
        try:
            return dict(bounded(lambda: call.build_transaction({
                "from": sender, "value": value, "chainId": self.config.chain_id}),
                "estimating gas"))
        except (ContractCustomError, ContractLogicError) as err:
            raise self._decode_revert(err) from None

    def build(self, account: LocalAccount, call: Any, value: int = 0) -> bytes:
        """`prepare`'s transaction signed at the sender's next nonce as the endpoint counts
        it: the owner's sends, which no nonce book orders."""
        tx = self.prepare(account, call, value)
        sender = account.address
        tx["nonce"] = bounded(lambda: self.w3.eth.get_transaction_count(sender, "pending"),
                              "reading the nonce")
        return bytes(account.sign_transaction(tx).raw_transaction)

    @staticmethod
    def max_cost(tx: dict[str, Any]) -> int:
        """The most a transaction (`prepare`'s) can charge its sender: gas limit times the
        highest price it accepts, plus the value it sends."""
        return int(tx["gas"]) * _highest_price(tx) + int(tx.get("value", 0))

    @staticmethod
    def fee_caps(raw: bytes) -> tuple[int, int]:
        """A signed transaction's highest price per gas and highest tip (a legacy one's
        gas price is both): what a transaction replacing it at its nonce must outbid."""
        from eth_account._utils.legacy_transactions import Transaction
        from eth_account.typed_transactions import TypedTransaction
        from hexbytes import HexBytes

        if raw and raw[0] <= 0x7F:  # EIP-2718 typed (EIP-1559 and friends)
            tx = TypedTransaction.from_bytes(HexBytes(raw)).as_dict()
            price = _highest_price(tx)
            return price, int(tx.get("maxPriorityFeePerGas", price))
        price = int(Transaction.from_bytes(HexBytes(raw)).as_dict()["gasPrice"])
        return price, price

    def send_raw(self, raw: bytes) -> str:
        """Broadcast `raw`; its hash (hex, no 0x) once the endpoint holds it. An error object
        naming why the node did not take it is ChainRefused, one saying it holds it already
        the send done, any other the endpoint's failure, the transaction possibly passed on
        (calls.refused_send)."""
        def send() -> Any:
            try:
                return self.w3.eth.send_raw_transaction(raw)
            except Web3RPCError as err:
                raise refused_send(err) from None

        try:
            return bare_hex(bounded(send, "sending a transaction"))
        except AlreadyHeld:
            return keccak(raw).hex()
        except (ContractCustomError, ContractLogicError) as err:
            raise self._decode_revert(err) from None

    def wait(self, tx_hash: str, timeout_s: float = RECEIPT_TIMEOUT_S,
             on_slow: Callable[[], None] | None = None, slow_after_s: float = 15.0,
             first_slow_within: bool = False, until: float | None = None) -> Any:
        """The receipt once it has `confirmations` blocks on top (counting its own), or
        ReceiptTimedOut when the deadline passes first (RpcUnavailable when the endpoint
        fails). `on_slow` runs each `slow_after_s` while the transaction is not mined (the
        nonce book's unstick); `first_slow_within`: its first run comes by FIRST_SLOW_SHARE
        of the wait at the latest, for a caller whose wait only that step can end (a
        `slow_after_s` as long as the wait ran it never). `until` (time.monotonic(), the
        exit push's bound: push._push_epochs): the wait starts no call once it has come,
        not even the depth read of a receipt just found, and ends WaitCut, so a wait begun
        late ends at its caller's bound, not its own 60 s on (with the deadline looked at
        only at the loop's top, an epoch begun inside the bound outlasted it); a call begun
        before it (a look, or an unstick: its read and what it sends) may end after it.
        Those early stops are `until`'s only: a wait without one (or one whose `until` is
        past its own deadline) makes its look after an unstick that ran past the deadline,
        and the depth read of a receipt a look found after it, and returns what they find,
        as a wait only the unstick can end needs (first_slow_within)."""
        deadline = time.monotonic() + timeout_s
        cut_at = until if until is not None and until < deadline else None
        ends = deadline if cut_at is None else cut_at
        first = min(slow_after_s, timeout_s * FIRST_SLOW_SHARE) if first_slow_within \
            else slow_after_s
        next_slow = time.monotonic() + first
        receipt = None
        while time.monotonic() < ends:
            if on_slow is not None and receipt is None and time.monotonic() >= next_slow:
                on_slow()
                next_slow = time.monotonic() + slow_after_s
                if cut_at is not None and time.monotonic() >= cut_at:
                    break
            try:
                receipt = self.w3.eth.get_transaction_receipt("0x" + bare_hex(tx_hash))
            except Web3Exception:
                receipt = None
            except (requests.exceptions.RequestException, OSError) as err:
                raise RpcUnavailable(f"waiting for a receipt: {transport_words(err)}") from None
            if receipt is not None:
                if receipt["status"] != 1:
                    raise ChainRefused("reverted", f"transaction {tx_hash} failed")
                if cut_at is not None and time.monotonic() >= cut_at:
                    break
                depth = self.block_number() - int(receipt["blockNumber"]) + 1
                if depth >= self.config.confirmations:
                    return receipt
            time.sleep(max(0.0, min(0.2, ends - time.monotonic())))
        if cut_at is not None:
            waited = max(0.0, cut_at - (deadline - timeout_s))
            raise WaitCut(f"no confirmed receipt for {tx_hash} by its caller's bound, "
                          f"{seconds_text(waited)} into its wait")
        raise ReceiptTimedOut(f"no confirmed receipt for {tx_hash} within "
                              f"{seconds_text(timeout_s)}")

    def transact(self, account: LocalAccount, call: Any, value: int = 0) -> Any:
        return self.wait(self.send_raw(self.build(account, call, value)))

    def transfer(self, account: LocalAccount, to: str, value: int) -> Any:
        sender = account.address
        tx = bounded(lambda: {
            "from": sender, "to": checksummed(to), "value": value,
            "chainId": self.config.chain_id, "gas": 21_000,
            "gasPrice": self.w3.eth.gas_price,
            "nonce": self.w3.eth.get_transaction_count(sender, "pending")}, "preparing a transfer")
        raw = bytes(account.sign_transaction(tx).raw_transaction)
        return self.wait(self.send_raw(raw))
