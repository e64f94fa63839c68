"""The EpochAnchor contract as kint uses it: the head, the rights check, the session-key
reads, the push a transaction carries, and walking epochs back by exact-block log queries.
Its writes (calldata, transactions, receipts) are kint.chain.anchor_writes, the ABI and
hex forms both use kint.chain.anchor_abi.

The interface is kint v0.3.0's (docs: contract, epochs, keys): `push(owner, space, prev, ct)`
with the seq assigned on chain, `Epoch(owner, space, writer; seq, prev, digest, prevBlock)`,
session keys set by the owner or by its EIP-712 signature, and six custom errors.

Every call is bounded (see rpc.py). The contract's views (the head, the rights check, the
nonces) are one eth_call each, encoded and decoded here from the ABI and sent through the
tracked provider as they are: web3's contract and middleware layers are built only when a
log, a transaction or a transaction's data is needed. Building and running them for each
head read made a worker that only verifies ~4 MiB larger: pages it shares with its
forkserver became its own (the many-tenants bench, bench/README.md). Low-level errors (a
timeout, a refused connection, a malformed answer) become `RpcUnavailable` through
kint.chain.calls, in one place.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_abi.exceptions import DecodingError
from web3 import Web3
from web3.exceptions import TransactionNotFound

from kint.chain.anchor_abi import (EPOCH_DATA, EPOCH_TOPIC, PUSH_ARGS, PUSH_SELECTOR,
                                   address_topic, bare_hex, bytes32_of, checksummed,
                                   custom_errors, view_signatures)
from kint.chain.anchor_writes import AnchorWrites
from kint.chain.artifact import epoch_anchor_artifact
from kint.chain.calls import answer_int, bounded, endpoint_text
from kint.chain.config import ChainConfig
from kint.chain.contract_source import contract_check
from kint.chain.endpoint_source import other_endpoint
from kint.chain.rpc import RpcTracker, RpcUnavailable, TrackedHTTPProvider, connect
from kint.keccak import keccak
from kint.settings.urls import redact_url

ZERO_DIGEST = "00" * 32


class CalldataRefused(Exception):
    """A push transaction does not carry the epoch its Epoch event names: wrong contract,
    not a push, other owner/space/prev, or a ciphertext whose keccak is not the digest."""


class NoContractThere(RpcUnavailable):
    """A view returned no data, or the contract reverted it: no EpochAnchor at the address
    on the endpoint's chain (most often another network than the space's, which the
    message names; EpochAnchor's views never revert). The endpoint answered, so this is
    not an unresponsive one, and verify says which it was.

    What happened (`happened`) and what to do (`step`) are kept apart: a refusal with a
    hint of its own (kint.commands.onchain.chain_errors) says `happened` as its message,
    where the message and the hint gave the same step twice; verify's line and a worker's
    message say both (`str`). `step` is the whole next step, named where the settings it
    sends the user to were set: the space's endpoint where it answers for another chain
    than the space's (`other_chain`), else the contract and the endpoint
    (kint.chain.contract_source). A worker refuses it as it is (tenant_worker.chain_refusal),
    never under the hint of an endpoint that did not answer."""

    def __init__(self, happened: str, step: str, other_chain: bool = False) -> None:
        super().__init__(f"{happened}; {step}")
        self.happened, self.step, self.other_chain = happened, step, other_chain

    def __reduce__(self) -> tuple[Any, ...]:
        # Its own fields, not the one joined message: an exception is rebuilt from its
        # args, and NoContractThere(message) lacked the step.
        return type(self), (self.happened, self.step, self.other_chain)


def no_contract_there(config: ChainConfig, what: str, url: str, address: str,
                      answered: int | None, label: str | None = None,
                      reverted: bool = False) -> NoContractThere:
    """The failure of view `what` that returned no data from `url` (redacted) at `address`
    (`reverted`: that the contract reverted it), the endpoint's chain id `answered` (None:
    not read): another chain than the space's, whose endpoint is to change, or no
    EpochAnchor at the address on the space's chain. `label`: the space's, for its table's
    name where this process is no worker of it."""
    expected = config.chain_id
    if answered is not None and answered != expected:
        return NoContractThere(
            f"{what}: {url} answers for chain {answered}, not {expected}, the chain this "
            f"space is on",
            f"point the space's endpoint at chain {expected} "
            f"({other_endpoint(config, label=label)})", other_chain=True)
    if reverted:
        return NoContractThere(f"{what}: the contract at {address} reverted the call on {url} "
                               f"(EpochAnchor's views never revert)", contract_check(config))
    return NoContractThere(f"{what}: {url} has no contract at {address} (its call returned "
                           f"no data)", contract_check(config))


def _reverted(error: object) -> bool:
    """Whether an eth_call's error object says the contract reverted the call (EIP-1474's
    code 3, or the message nodes give with -32000), not that the endpoint failed."""
    if not isinstance(error, dict):
        return False
    message = str(error.get("message", "")).lower()
    return error.get("code") == 3 or message.startswith("execution reverted")


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


class Anchor(AnchorWrites):
    """One endpoint's view of the contract: its reads here, its writes inherited
    (kint.chain.anchor_writes)."""

    def __init__(self, config: ChainConfig, tracker: RpcTracker, url_index: int = 0, *,
                 label: str | None = None) -> None:
        self.config = config
        # The space's label where this process is no worker of it (a command's own chain
        # calls: kint.commands.onchain.open_anchor), for the hint that names its table.
        self.label = label
        self.tracker = tracker  # for an Anchor of another of the space's endpoints
        self.url = config.rpc_urls[url_index]
        self.provider = TrackedHTTPProvider(self.url, config.rpc_timeout_s, tracker)
        if not config.rpc_retries:
            self.provider.retry_pauses = ()
        self.address = checksummed(config.anchor)
        self._errors = custom_errors()

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
        selector, inputs, outputs = view_signatures()[fn]
        data = "0x" + (selector + abi_encode(inputs, args)).hex()

        def call() -> bytes:
            answer = self.provider.make_request("eth_call", [{"to": self.address, "data": data},
                                                             "latest"])
            if "error" in answer:
                if _reverted(answer["error"]):  # EpochAnchor's views never revert
                    raise self._no_contract(what, reverted=True)
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

    def _no_contract(self, what: str, reverted: bool = False) -> NoContractThere:
        """A view that returned no data (`reverted`: that the contract reverted): no
        EpochAnchor at the address on the endpoint's chain. Most often the endpoint now
        serves another network (a URL changed under a running worker, a provider's default
        network), which one eth_chainId read says; "does not decode (Tried to read 32
        bytes)" said neither, nor "the endpoint answered with an error (execution
        reverted)" under the hint of an endpoint that did not answer."""
        try:
            answered: int | None = self.chain_id()
        except RpcUnavailable:
            answered = None
        return no_contract_there(self.config, what, redact_url(self.url), self.address,
                                 answered, label=self.label, reverted=reverted)

    def balance(self, address: str) -> int:
        """Wei held by `address` at the latest block."""
        return bounded(lambda: answer_int(self.w3.eth.get_balance(checksummed(address))),
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
        digest, seq, block = self._view("reading the head", "head", checksummed(owner),
                                        bytes32_of(space_hex))
        return Head(bare_hex(digest), int(seq), int(block))

    def can_write(self, owner: str, writer: str) -> bool:
        """True when `writer` may push for `owner` now (the owner, or an unexpired key)."""
        return bool(self._view("checking write rights", "canWrite", checksummed(owner),
                               checksummed(writer)))

    def session_key_expiry(self, owner: str, key: str) -> int:
        """The unix expiry `owner` gave `key`; 0 when revoked or never set."""
        return int(self._view("reading a session key's expiry", "sessionKeyExpiry",
                              checksummed(owner), checksummed(key)))

    def auth_nonce(self, owner: str) -> int:
        """The nonce the owner's next setSessionKeyBySig signature must be made over."""
        return int(self._view("reading the authorization nonce", "authNonce", checksummed(owner)))

    def start_seq(self, owner: str, space_hex: str) -> int:
        """The owner's reader hint for `space`: the lowest seq it still vouches for (0: none)."""
        return int(self._view("reading the start seq", "startSeq", checksummed(owner),
                              bytes32_of(space_hex)))

    def domain_separator(self) -> str:
        """The contract's EIP-712 domain separator on this chain (64 hex)."""
        return bare_hex(self._view("reading the domain separator", "DOMAIN_SEPARATOR"))

    def authorization_digest(self, owner: str, key: str, expiry: int, nonce: int,
                             deadline: int) -> str:
        """The digest (64 hex) the owner signs to authorize `key`, as the contract computes
        it: a client never rebuilds the domain by hand to find out what it must sign."""
        return bare_hex(self._view("reading the authorization digest", "authorizationDigest",
                                   checksummed(owner), checksummed(key), int(expiry),
                                   int(nonce), int(deadline)))

    def epoch_log(self, owner: str, space_hex: str, seq: int, block: int) -> EpochLog | None:
        """The Epoch event of (owner, space, seq) in exactly `block`, or None.

        One eth_getLogs with fromBlock = toBlock = block, filtered on this contract, the Epoch
        topic, the owner and the space, so no RPC block-range cap is ever hit. What comes
        back is checked against the filter too: an endpoint's answer is not trusted blindly."""
        space = bare_hex(bytes32_of(space_hex))
        query = {"fromBlock": int(block), "toBlock": int(block), "address": self.address,
                 "topics": ["0x" + EPOCH_TOPIC.hex(), address_topic(owner), "0x" + space]}
        logs = bounded(lambda: self.w3.eth.get_logs(query), "reading an epoch log")
        for raw in logs:
            if raw.get("blockNumber") is None:  # pending: not in `block` yet
                continue
            ev = self._decode_epoch(raw, int(raw["blockNumber"]))
            if (ev is not None and ev.seq == seq and ev.block == block
                    and ev.owner == checksummed(owner) and ev.space == space):
                return ev
        return None

    def push_calldata(self, tx_hash: str, owner: str, space_hex: str, prev: str,
                      digest: str) -> bytes:
        """The ciphertext carried by push transaction `tx_hash`, after checking that it is
        the epoch the Epoch event describes: addressed to this contract, calling push, for
        the same owner, space and prev, with keccak256(ct) equal to the event's digest.
        Anything else raises CalldataRefused; nothing unchecked is ever returned."""
        shown = "0x" + bare_hex(tx_hash)

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
        if to is None or checksummed(to) != self.address:
            raise CalldataRefused(f"transaction {shown} is addressed to {to}, not EpochAnchor "
                                  f"{self.address}")
        data = bytes(tx.get("input") or b"")
        if data[:4] != PUSH_SELECTOR:
            raise CalldataRefused(f"transaction {shown} does not call push "
                                  f"(selector 0x{data[:4].hex()})")
        try:
            got_owner, got_space, got_prev, ct = abi_decode(PUSH_ARGS, data[4:])
        except (DecodingError, ValueError) as err:
            raise CalldataRefused(f"push calldata of {shown} does not decode ({err})") from None
        if checksummed(got_owner) != checksummed(owner):
            raise CalldataRefused(f"push {shown} is for owner {checksummed(got_owner)}, "
                                  f"not {checksummed(owner)}")
        if bytes(got_space) != bytes32_of(space_hex):
            raise CalldataRefused(f"push {shown} is for space {bytes(got_space).hex()}, "
                                  f"not {bare_hex(space_hex)}")
        if bytes(got_prev) != bytes32_of(prev):
            raise CalldataRefused(f"push {shown} names prev {bytes(got_prev).hex()}, "
                                  f"not {bare_hex(prev)}")
        if keccak(bytes(ct)) != bytes32_of(digest):
            raise CalldataRefused("ciphertext digest does not match the Epoch event")
        return bytes(ct)

    def _decode_epoch(self, raw: Any, block: int) -> EpochLog | None:
        """An Epoch event of this contract from a raw log, or None for any other log."""
        topics = [bytes(t) for t in raw.get("topics") or []]
        if (raw.get("removed") or checksummed(raw["address"]) != self.address or len(topics) != 4
                or topics[0] != EPOCH_TOPIC):
            return None
        try:
            seq, prev, digest, prev_block = abi_decode(EPOCH_DATA, bytes(raw["data"]))
        except (DecodingError, ValueError):
            return None
        return EpochLog(owner=checksummed(topics[1][12:]), space=topics[2].hex(), seq=int(seq),
                        prev=bytes(prev).hex(), digest=bytes(digest).hex(),
                        prev_block=int(prev_block), writer=checksummed(topics[3][12:]),
                        block=block, tx_hash=bare_hex(raw["transactionHash"]))

    def epoch_from_receipt(self, receipt: Any) -> EpochLog | None:
        """The Epoch event a push receipt carries (this contract's only), or None."""
        for raw in receipt["logs"]:
            ev = self._decode_epoch(raw, int(receipt["blockNumber"]))
            if ev is not None:
                return ev
        return None

