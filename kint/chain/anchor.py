"""The EpochAnchor contract as kint uses it: the head, the rights check, the session-key
authorization, sending a push, and walking epochs back by exact-block log queries.

The interface is kint v0.3.0's (docs: contract, epochs, keys): `push(owner, space, prev, ct)`
with the seq assigned on chain, `Epoch(owner, space, writer; seq, prev, digest, prevBlock)`,
session keys set by the owner or by its EIP-712 signature, and six custom errors.

Every call is bounded (see rpc.py). The contract's views (the head, the rights check, the
nonces) are one eth_call each, encoded and decoded here from the ABI and sent through the
tracked provider as they are: web3's contract and middleware layers are built only when a
log, a transaction or a transaction's data is needed. Building and running them for each
head read made a worker that only verifies ~4 MiB larger: pages it shares with its
forkserver became its own (the many-tenants bench, bench/README.md). Gas is always
estimated: anvil silently drops a transaction below the calldata floor, and an estimate is
where a revert shows up without spending gas. Every receipt wait has a deadline. Low-level
errors (a timeout, a refused connection, a malformed answer) become `RpcUnavailable`
through kint.chain.calls, in one place.

Hex conventions: digests, spaces and transaction hashes are lowercase hex without 0x
(either form is accepted as input); addresses are checksummed.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, Callable

import requests
from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_abi.exceptions import DecodingError
from eth_account.signers.local import LocalAccount
from eth_hash.auto import keccak
from web3 import Web3
from web3.exceptions import (ContractCustomError, ContractLogicError, TransactionNotFound,
                             Web3Exception)

from kint.chain.artifact import epoch_anchor_artifact
from kint.chain.calls import (ChainRefused, answer_int, bounded, endpoint_text,
                              transport_words)
from kint.chain.config import ChainConfig
from kint.chain.rpc import RpcTracker, RpcUnavailable, TrackedHTTPProvider, connect
from kint.settings.urls import redact_url

RECEIPT_TIMEOUT_S = 60.0
ZERO_DIGEST = "00" * 32

PUSH_SELECTOR = keccak(b"push(address,bytes32,bytes32,bytes)")[:4]  # 0xa2483825
EPOCH_TOPIC = keccak(b"Epoch(address,bytes32,address,uint64,bytes32,bytes32,uint64)")
_EPOCH_DATA = ("uint64", "bytes32", "bytes32", "uint64")
_PUSH_ARGS = ("address", "bytes32", "bytes32", "bytes")

# The EIP-712 type an owner signs to authorize a session key (setSessionKeyBySig).
EIP712_DOMAIN_NAME = "kint EpochAnchor"
EIP712_DOMAIN_VERSION = "1"
AUTHORIZATION_TYPE = [
    {"name": "owner", "type": "address"},
    {"name": "key", "type": "address"},
    {"name": "expiry", "type": "uint64"},
    {"name": "nonce", "type": "uint256"},
    {"name": "deadline", "type": "uint256"},
]




class CalldataRefused(Exception):
    """A push transaction does not carry the epoch its Epoch event names: wrong contract,
    not a push, other owner/space/prev, or a ciphertext whose keccak is not the digest."""


class NoContractThere(RpcUnavailable):
    """A view returned no data: no contract at the address on the endpoint's chain (most
    often another network than the space's, which the message names). The endpoint
    answered, so this is not an unresponsive one, and verify says which it was."""


class TransactionNotServed(CalldataRefused):
    """The endpoint answers that it has no such transaction: a pruned node, or one that
    keeps no transaction index (a node that lost it never serves the older ones either)."""


@dataclass(frozen=True)
class Head:
    """head(owner, space) on chain: all zeros (ZERO_DIGEST, 0, 0) before the first push."""

    digest: str  # 64 hex, no 0x
    seq: int
    block: int


@dataclass(frozen=True)
class EpochLog:
    """One decoded Epoch event and where it was emitted."""

    owner: str
    space: str  # 64 hex
    seq: int
    prev: str  # 64 hex
    digest: str  # 64 hex: keccak256 of the ciphertext
    prev_block: int  # the previous head's block, 0 for seq 1
    writer: str  # msg.sender of the push: the owner or a session key
    block: int
    tx_hash: str  # 64 hex


def _hex(value: bytes | str) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return (value[2:] if value.startswith(("0x", "0X")) else value).lower()


def _b32(value: str | bytes) -> bytes:
    """32 bytes from 64 hex (with or without 0x) or from bytes; anything else is a bug."""
    raw = bytes(value) if isinstance(value, (bytes, bytearray)) else bytes.fromhex(_hex(value))
    if len(raw) != 32:
        raise ValueError(f"expected 32 bytes, got {len(raw)}")
    return raw


def _addr(value: str) -> str:
    return Web3.to_checksum_address(value)


def _addr_topic(address: str) -> str:
    return "0x" + bytes(12).hex() + _addr(address)[2:].lower()


def authorization_typed_data(chain_id: int, contract: str, owner: str, key: str, expiry: int,
                             nonce: int, deadline: int) -> dict[str, Any]:
    """The EIP-712 typed data an owner signs so `key` may push until `expiry`
    (setSessionKeyBySig). Its digest is what the contract's authorizationDigest returns on
    `chain_id` at `contract`; `nonce` must be authNonce(owner) when it is submitted."""
    return {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"},
                {"name": "verifyingContract", "type": "address"},
            ],
            "SessionKeyAuthorization": AUTHORIZATION_TYPE,
        },
        "primaryType": "SessionKeyAuthorization",
        "domain": {"name": EIP712_DOMAIN_NAME, "version": EIP712_DOMAIN_VERSION,
                   "chainId": int(chain_id), "verifyingContract": _addr(contract)},
        "message": {"owner": _addr(owner), "key": _addr(key), "expiry": int(expiry),
                    "nonce": int(nonce), "deadline": int(deadline)},
    }


@functools.lru_cache(maxsize=None)
def _views() -> dict[str, tuple[bytes, tuple[str, ...], tuple[str, ...]]]:
    """name -> (selector, input types, output types) of every view of the contract."""
    out = {}
    for e in epoch_anchor_artifact()["abi"]:
        if e.get("type") == "function" and e.get("stateMutability") in ("view", "pure"):
            inputs = tuple(i["type"] for i in e["inputs"])
            out[e["name"]] = (keccak(f"{e['name']}({','.join(inputs)})".encode())[:4], inputs,
                              tuple(o["type"] for o in e["outputs"]))
    return out


@functools.lru_cache(maxsize=None)
def _custom_errors() -> dict[bytes, tuple[str, list[tuple[str, str]]]]:
    """selector -> (name, [(arg name, arg type)]) for every custom error in the ABI."""
    return {
        keccak(f"{e['name']}({','.join(i['type'] for i in e['inputs'])})".encode())[:4]:
            (e["name"], [(i["name"], i["type"]) for i in e["inputs"]])
        for e in epoch_anchor_artifact()["abi"] if e.get("type") == "error"}


def _fees(raw: bytes) -> tuple[dict[str, Any], int, int]:
    """A signed transaction's fields, its highest price per gas and its highest tip."""
    from eth_account._utils.legacy_transactions import Transaction
    from eth_account.typed_transactions import TypedTransaction
    from hexbytes import HexBytes

    if raw and raw[0] <= 0x7F:  # EIP-2718 typed (EIP-1559 and friends)
        tx = TypedTransaction.from_bytes(HexBytes(raw)).as_dict()
        price = int(tx.get("maxFeePerGas", tx.get("gasPrice", 0)))
        return tx, price, int(tx.get("maxPriorityFeePerGas", price))
    tx = Transaction.from_bytes(HexBytes(raw)).as_dict()
    return tx, int(tx["gasPrice"]), int(tx["gasPrice"])


class Anchor:
    def __init__(self, config: ChainConfig, tracker: RpcTracker, url_index: int = 0) -> None:
        self.config = config
        self.url = config.rpc_urls[url_index]
        self.provider = TrackedHTTPProvider(self.url, config.rpc_timeout_s, tracker)
        if not config.rpc_retries:
            self.provider.retry_pauses = ()
        self.address = _addr(config.anchor)
        self._errors = _custom_errors()

    @functools.cached_property
    def w3(self) -> Web3:
        """web3 over this Anchor's provider, built on first need (never for views)."""
        return connect(self.provider)

    @functools.cached_property
    def contract(self) -> Any:
        return self.w3.eth.contract(address=self.address, abi=epoch_anchor_artifact()["abi"])

    # -- reads -------------------------------------------------------------------------

    def _view(self, what: str, fn: str, *args: Any) -> Any:
        """View `fn` at the latest block: its one value, or a tuple of its values."""
        selector, inputs, outputs = _views()[fn]
        data = "0x" + (selector + abi_encode(inputs, args)).hex()

        def call() -> bytes:
            answer = self.provider.make_request("eth_call", [{"to": self.address, "data": data},
                                                             "latest"])
            if "error" in answer:
                raise RpcUnavailable(f"{what}: the endpoint answered with an error "
                                     f"({endpoint_text(answer['error'])})")
            result = answer.get("result")
            if not isinstance(result, str) or not result.startswith("0x"):
                raise RpcUnavailable(f"{what}: the endpoint's answer has no result")
            if result == "0x":  # a view of a contract always returns data
                raise self._no_contract(what)
            return bytes.fromhex(result[2:])

        try:
            values = abi_decode(outputs, bounded(call, what))
        except (DecodingError, ValueError) as err:
            raise RpcUnavailable(f"{what}: the endpoint's answer does not decode ({err})") from None
        return values[0] if len(values) == 1 else values

    def _no_contract(self, what: str) -> NoContractThere:
        """A view that returned no data: no contract at the address on the endpoint's
        chain. Most often the endpoint now serves another network (a URL changed under a
        running worker, a provider's default network), which one eth_chainId read says;
        "does not decode (Tried to read 32 bytes)" said neither."""
        expected = self.config.chain_id
        try:
            answered: int | None = self.chain_id()
        except RpcUnavailable:
            answered = None
        if answered is not None and answered != expected:
            return NoContractThere(
                f"{what}: {redact_url(self.url)} answers for chain {answered}, not {expected}, "
                f"the chain this space is on; point the space's endpoint at chain {expected} "
                f"(rpc_url in config.toml, or `kint connect --rpc-urls`)")
        return NoContractThere(
            f"{what}: {redact_url(self.url)} has no contract at {self.address} (its call "
            f"returned no data); check the contract setting and that the endpoint serves "
            f"chain {expected}")

    def balance(self, address: str) -> int:
        """Wei held by `address` at the latest block."""
        return bounded(lambda: answer_int(self.w3.eth.get_balance(_addr(address))),
                       "reading a balance")

    def block_number(self) -> int:
        return bounded(lambda: answer_int(self.w3.eth.block_number), "reading the block number")

    def chain_id(self) -> int:
        """The chain id this endpoint answers for (eth_chainId): which chain it really is."""
        return bounded(lambda: answer_int(self.w3.eth.chain_id), "reading the chain id")

    def code(self) -> bytes:
        """The runtime code at the contract's address (empty: no contract there)."""
        return bounded(lambda: bytes(self.w3.eth.get_code(self.address)), "reading the code")

    def head(self, owner: str, space_hex: str) -> Head:
        """The newest epoch of (owner, space): digest, seq and the block it landed in."""
        digest, seq, block = self._view("reading the head", "head", _addr(owner), _b32(space_hex))
        return Head(_hex(digest), int(seq), int(block))

    def can_write(self, owner: str, writer: str) -> bool:
        """True when `writer` may push for `owner` now (the owner, or an unexpired key)."""
        return bool(self._view("checking write rights", "canWrite", _addr(owner), _addr(writer)))

    def session_key_expiry(self, owner: str, key: str) -> int:
        """The unix expiry `owner` gave `key`; 0 when revoked or never set."""
        return int(self._view("reading a session key's expiry", "sessionKeyExpiry",
                              _addr(owner), _addr(key)))

    def auth_nonce(self, owner: str) -> int:
        """The nonce the owner's next setSessionKeyBySig signature must be made over."""
        return int(self._view("reading the authorization nonce", "authNonce", _addr(owner)))

    def start_seq(self, owner: str, space_hex: str) -> int:
        """The owner's reader hint for `space`: the lowest seq it still vouches for (0: none)."""
        return int(self._view("reading the start seq", "startSeq", _addr(owner), _b32(space_hex)))

    def domain_separator(self) -> str:
        """The contract's EIP-712 domain separator on this chain (64 hex)."""
        return _hex(self._view("reading the domain separator", "DOMAIN_SEPARATOR"))

    def authorization_digest(self, owner: str, key: str, expiry: int, nonce: int,
                             deadline: int) -> str:
        """The digest (64 hex) the owner signs to authorize `key`, as the contract computes
        it: a client never rebuilds the domain by hand to find out what it must sign."""
        return _hex(self._view("reading the authorization digest", "authorizationDigest",
                               _addr(owner), _addr(key), int(expiry), int(nonce), int(deadline)))

    def epoch_log(self, owner: str, space_hex: str, seq: int, block: int) -> EpochLog | None:
        """The Epoch event of (owner, space, seq) in exactly `block`, or None.

        One eth_getLogs with fromBlock = toBlock = block, filtered on this contract, the Epoch
        topic, the owner and the space, so no RPC block-range cap is ever hit. What comes
        back is checked against the filter too: an endpoint's answer is not trusted blindly."""
        space = _hex(_b32(space_hex))
        query = {"fromBlock": int(block), "toBlock": int(block), "address": self.address,
                 "topics": ["0x" + EPOCH_TOPIC.hex(), _addr_topic(owner), "0x" + space]}
        logs = bounded(lambda: self.w3.eth.get_logs(query), "reading an epoch log")
        for raw in logs:
            if raw.get("blockNumber") is None:  # pending: not in `block` yet
                continue
            ev = self._decode_epoch(raw, int(raw["blockNumber"]))
            if (ev is not None and ev.seq == seq and ev.block == block
                    and ev.owner == _addr(owner) and ev.space == space):
                return ev
        return None

    def push_calldata(self, tx_hash: str, owner: str, space_hex: str, prev: str,
                      digest: str) -> bytes:
        """The ciphertext carried by push transaction `tx_hash`, after checking that it is
        the epoch the Epoch event describes: addressed to this contract, calling push, for
        the same owner, space and prev, with keccak256(ct) equal to the event's digest.
        Anything else raises CalldataRefused; nothing unchecked is ever returned."""
        shown = "0x" + _hex(tx_hash)

        def fetch() -> Any:
            try:
                return self.w3.eth.get_transaction(shown)
            except TransactionNotFound:  # an answer, not a failure: bounded must not see it
                return None

        tx = bounded(fetch, "reading a push transaction")
        if tx is None:
            raise TransactionNotServed(f"transaction {shown} is not served by the RPC "
                                  f"(pruned, or the endpoint has no transaction index)")
        to = tx.get("to")
        if to is None or _addr(to) != self.address:
            raise CalldataRefused(f"transaction {shown} is addressed to {to}, not EpochAnchor "
                                  f"{self.address}")
        data = bytes(tx.get("input") or b"")
        if data[:4] != PUSH_SELECTOR:
            raise CalldataRefused(f"transaction {shown} does not call push "
                                  f"(selector 0x{data[:4].hex()})")
        try:
            got_owner, got_space, got_prev, ct = abi_decode(_PUSH_ARGS, data[4:])
        except (DecodingError, ValueError) as err:
            raise CalldataRefused(f"push calldata of {shown} does not decode ({err})") from None
        if _addr(got_owner) != _addr(owner):
            raise CalldataRefused(f"push {shown} is for owner {_addr(got_owner)}, not {_addr(owner)}")
        if bytes(got_space) != _b32(space_hex):
            raise CalldataRefused(f"push {shown} is for space {bytes(got_space).hex()}, "
                                  f"not {_hex(space_hex)}")
        if bytes(got_prev) != _b32(prev):
            raise CalldataRefused(f"push {shown} names prev {bytes(got_prev).hex()}, "
                                  f"not {_hex(prev)}")
        if keccak(bytes(ct)) != _b32(digest):
            raise CalldataRefused("ciphertext digest does not match the Epoch event")
        return bytes(ct)

    # -- calldata ----------------------------------------------------------------------

    def _encode(self, fn: str, *args: Any) -> bytes:
        return bytes.fromhex(_hex(self.contract.encode_abi(fn, args=list(args))))

    def encode_push(self, owner: str, space_hex: str, prev: str, ct: bytes) -> bytes:
        """Calldata of push(owner, space, prev, ct); prev is the current head digest."""
        return self._encode("push", _addr(owner), _b32(space_hex), _b32(prev), bytes(ct))

    def encode_set_session_key(self, key: str, expiry: int) -> bytes:
        """Calldata of setSessionKey(key, expiry), sent by the owner (0 revokes)."""
        return self._encode("setSessionKey", _addr(key), int(expiry))

    def encode_revoke_session_key(self, key: str) -> bytes:
        """Calldata of revokeSessionKey(key), sent by the owner."""
        return self._encode("revokeSessionKey", _addr(key))

    def encode_set_session_key_by_sig(self, owner: str, key: str, expiry: int, deadline: int,
                                      signature: bytes) -> bytes:
        """Calldata of setSessionKeyBySig: anyone (normally the key) submits the owner's
        signature over authorization_digest(owner, key, expiry, authNonce(owner), deadline)."""
        return self._encode("setSessionKeyBySig", _addr(owner), _addr(key), int(expiry),
                            int(deadline), bytes(signature))

    def encode_set_start_seq(self, space_hex: str, seq: int) -> bytes:
        """Calldata of setStartSeq(space, seq), sent by the owner."""
        return self._encode("setStartSeq", _b32(space_hex), int(seq))

    # -- decoding ----------------------------------------------------------------------

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
            fields[arg] = (_addr(value) if typ == "address"
                           else bytes(value).hex() if typ.startswith("bytes") else value)
        return ChainRefused(name, fields=fields)

    def _decode_revert(self, err: Exception) -> ChainRefused:
        refused = self.decode_revert(getattr(err, "data", None))
        if refused.error == "reverted" and not refused.fields:
            return ChainRefused("reverted", str(err)[:200])
        return refused

    def _decode_epoch(self, raw: Any, block: int) -> EpochLog | None:
        """An Epoch event of this contract from a raw log, or None for any other log."""
        topics = [bytes(t) for t in raw.get("topics") or []]
        if (raw.get("removed") or _addr(raw["address"]) != self.address or len(topics) != 4
                or topics[0] != EPOCH_TOPIC):
            return None
        try:
            seq, prev, digest, prev_block = abi_decode(_EPOCH_DATA, bytes(raw["data"]))
        except (DecodingError, ValueError):
            return None
        return EpochLog(owner=_addr(topics[1][12:]), space=topics[2].hex(), seq=int(seq),
                        prev=bytes(prev).hex(), digest=bytes(digest).hex(),
                        prev_block=int(prev_block), writer=_addr(topics[3][12:]), block=block,
                        tx_hash=_hex(raw["transactionHash"]))

    def epoch_from_receipt(self, receipt: Any) -> EpochLog | None:
        """The Epoch event a push receipt carries (this contract's only), or None."""
        for raw in receipt["logs"]:
            ev = self._decode_epoch(raw, int(receipt["blockNumber"]))
            if ev is not None:
                return ev
        return None

    # -- writes ------------------------------------------------------------------------

    def build(self, account: LocalAccount, call: Any, value: int = 0,
              nonce: int | None = None) -> bytes:
        """A signed transaction for `call` (a contract function call, or calldata from one of
        the encode_* builders), gas estimated: a revert surfaces here as ChainRefused."""
        if isinstance(call, (bytes, bytearray)):
            fn, args = self.contract.decode_function_input(bytes(call))
            call = fn(**args)
        sender = account.address
        try:
            tx = bounded(lambda: call.build_transaction({
                "from": sender, "value": value, "chainId": self.config.chain_id,
                "nonce": nonce if nonce is not None else self.w3.eth.get_transaction_count(
                    sender, "pending")}), "estimating gas")
        except (ContractCustomError, ContractLogicError) as err:
            raise self._decode_revert(err) from None
        return bytes(account.sign_transaction(tx).raw_transaction)

    @staticmethod
    def max_cost(raw: bytes) -> int:
        """The most a signed transaction can charge its sender: gas limit times the highest
        price it accepts, plus the value it sends."""
        tx, price, _ = _fees(raw)
        return int(tx["gas"]) * price + int(tx.get("value", 0))

    @staticmethod
    def fee_caps(raw: bytes) -> tuple[int, int]:
        """A signed transaction's highest price per gas and highest tip (a legacy one's
        gas price is both): what a transaction replacing it at its nonce must outbid."""
        _, price, tip = _fees(raw)
        return price, tip

    def send_raw(self, raw: bytes) -> str:
        try:
            return _hex(bounded(lambda: self.w3.eth.send_raw_transaction(raw),
                                "sending a transaction"))
        except (ContractCustomError, ContractLogicError) as err:
            raise self._decode_revert(err) from None

    def wait(self, tx_hash: str, timeout_s: float = RECEIPT_TIMEOUT_S,
             on_slow: Callable[[], None] | None = None, slow_after_s: float = 15.0) -> Any:
        """The receipt once it has `confirmations` blocks on top (counting its own), or
        RpcUnavailable when the deadline passes first. `on_slow` runs each `slow_after_s`
        while the transaction is not mined (the nonce book's unstick)."""
        deadline = time.monotonic() + timeout_s
        next_slow = time.monotonic() + slow_after_s
        receipt = None
        while time.monotonic() < deadline:
            if on_slow is not None and receipt is None and time.monotonic() >= next_slow:
                on_slow()
                next_slow = time.monotonic() + slow_after_s
            try:
                receipt = self.w3.eth.get_transaction_receipt("0x" + _hex(tx_hash))
            except Web3Exception:
                receipt = None
            except (requests.exceptions.RequestException, OSError) as err:
                raise RpcUnavailable(f"waiting for a receipt: {transport_words(err)}") from None
            if receipt is not None:
                if receipt["status"] != 1:
                    raise ChainRefused("reverted", f"transaction {tx_hash} failed")
                if self.block_number() - int(receipt["blockNumber"]) + 1 >= self.config.confirmations:
                    return receipt
            time.sleep(0.2)
        raise RpcUnavailable(f"no confirmed receipt for {tx_hash} within {timeout_s:.0f}s")

    def transact(self, account: LocalAccount, call: Any, value: int = 0) -> Any:
        return self.wait(self.send_raw(self.build(account, call, value)))

    def transfer(self, account: LocalAccount, to: str, value: int) -> Any:
        sender = account.address
        tx = bounded(lambda: {
            "from": sender, "to": _addr(to), "value": value,
            "chainId": self.config.chain_id, "gas": 21_000,
            "gasPrice": self.w3.eth.gas_price,
            "nonce": self.w3.eth.get_transaction_count(sender, "pending")}, "preparing a transfer")
        raw = bytes(account.sign_transaction(tx).raw_transaction)
        return self.wait(self.send_raw(raw))
