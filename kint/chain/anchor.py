"""The EpochAnchor contract as kint uses it: the head, the rights check, sending a push,
and walking epochs back by exact-block log queries (DESIGN §7).

Every call is bounded (see rpc.py). Gas is always estimated: anvil silently drops a
transaction below the calldata floor. Every receipt wait has a deadline. Low-level errors
(a timeout, a refused connection, a malformed answer) become `RpcUnavailable` here, in one
place.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import requests
from eth_account.signers.local import LocalAccount
from eth_hash.auto import keccak
from web3 import Web3
from web3.logs import DISCARD
from web3.exceptions import (ContractCustomError, ContractLogicError, TimeExhausted, Web3Exception,
                             Web3RPCError)

from kint.chain.artifact import load_artifact
from kint.chain.config import ChainConfig
from kint.chain.rpc import RpcTracker, RpcUnavailable, connect

T = TypeVar("T")
RECEIPT_TIMEOUT_S = 60.0
# ChainRefused.error when the sender cannot pay for the gas.
INSUFFICIENT_FUNDS = "InsufficientFunds"


class ChainRefused(Exception):
    """The contract reverted: `error` is the custom error's name (BadPrev, BadSeq,
    NotAuthorized) when known."""

    def __init__(self, error: str, detail: str = "") -> None:
        super().__init__(f"{error}{': ' + detail if detail else ''}")
        self.error = error


@dataclass(frozen=True)
class Head:
    seq: int
    digest: str  # 64 hex, no 0x
    block: int


@dataclass(frozen=True)
class EpochLog:
    owner: str
    space: str
    seq: int
    digest: str
    prev: str
    prev_block: int
    writer: str
    block: int
    tx: str


def _hex(value: bytes | str) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return value[2:] if value.startswith("0x") else value


def _b32(hex64: str) -> bytes:
    return bytes.fromhex(hex64)


def bounded(fn: Callable[[], T], what: str) -> T:
    """Run one chain call, mapping every transport failure to RpcUnavailable."""
    try:
        return fn()
    except (requests.exceptions.RequestException, TimeExhausted, ConnectionError,
            OSError) as err:
        raise RpcUnavailable(f"{what}: {type(err).__name__}") from None
    except Web3RPCError as err:
        # The node refused the call. Too little ETH for the gas is the sender's to fix, not
        # the endpoint's: it comes back as a refusal the ops can explain.
        if "insufficient funds" in str(err).lower():
            raise ChainRefused(INSUFFICIENT_FUNDS, str(err)[:200]) from None
        raise RpcUnavailable(f"{what}: the endpoint answered with an error ({err})") from None
    except ValueError as err:
        # web3 raises ValueError for JSON-RPC error objects it does not map.
        raise RpcUnavailable(f"{what}: the endpoint answered with an error ({err})") from None


class Anchor:
    def __init__(self, config: ChainConfig, tracker: RpcTracker, url_index: int = 0) -> None:
        self.config = config
        self.url = config.rpc_urls[url_index]
        self.w3: Web3 = connect(self.url, config.rpc_timeout_s, tracker)
        art = load_artifact()
        self.address = Web3.to_checksum_address(config.anchor)
        self.contract = self.w3.eth.contract(address=self.address, abi=art["abi"])
        self._errors = {keccak(f"{e['name']}({','.join(i['type'] for i in e['inputs'])})"
                               .encode())[:4].hex(): e["name"]
                        for e in art["abi"] if e.get("type") == "error"}

    # -- reads -------------------------------------------------------------------------

    def balance(self, address: str) -> int:
        """Wei held by `address` at the latest block."""
        return int(bounded(lambda: self.w3.eth.get_balance(Web3.to_checksum_address(address)),
                           "reading a balance"))

    def head(self, owner: str, space_id: str) -> Head:
        seq, digest, block = bounded(
            lambda: self.contract.functions.head(Web3.to_checksum_address(owner),
                                                 _b32(space_id)).call(), "reading the head")
        return Head(int(seq), _hex(digest), int(block))

    def can_write(self, owner: str, caller: str) -> bool:
        return bool(bounded(lambda: self.contract.functions.canWrite(
            Web3.to_checksum_address(owner), Web3.to_checksum_address(caller)).call(),
            "checking write rights"))

    def block_number(self) -> int:
        return int(bounded(lambda: self.w3.eth.block_number, "reading the block number"))

    def epoch_log(self, owner: str, space_id: str, seq: int, block: int) -> EpochLog | None:
        """The Epoch event for (owner, space, seq) in exactly `block`: one eth_getLogs with
        fromBlock = toBlock and all three topics."""
        event = self.contract.events.Epoch()
        topics = [
            "0x" + keccak(b"Epoch(address,bytes32,uint64,bytes32,bytes32,uint64,address)").hex(),
            "0x" + bytes(12).hex() + Web3.to_checksum_address(owner)[2:].lower(),
            "0x" + space_id,
            "0x" + seq.to_bytes(32, "big").hex(),
        ]
        logs = bounded(lambda: self.w3.eth.get_logs({"fromBlock": block, "toBlock": block,
                                                      "address": self.address,
                                                      "topics": topics}), "reading an epoch log")
        for raw in logs:
            ev = event.process_log(raw)
            args = ev["args"]
            return EpochLog(owner=args["owner"], space=_hex(args["space"]), seq=int(args["seq"]),
                            digest=_hex(args["digest"]), prev=_hex(args["prev"]),
                            prev_block=int(args["prevBlock"]), writer=args["writer"],
                            block=int(raw["blockNumber"]), tx=_hex(raw["transactionHash"]))
        return None

    def push_calldata(self, tx_hash: str, owner: str, space_id: str, seq: int, prev: str
                      ) -> bytes | None:
        """The ciphertext argument of the push transaction `tx_hash`, if that transaction is
        a push to this contract whose owner, space, seq and prev match the event."""
        tx = bounded(lambda: self.w3.eth.get_transaction("0x" + tx_hash), "reading a push")
        if tx is None or tx.get("to") is None or Web3.to_checksum_address(tx["to"]) != self.address:
            return None
        try:
            fn, args = self.contract.decode_function_input(tx["input"])
        except (ValueError, Web3Exception):
            return None
        if fn.fn_name != "push":
            return None
        if (Web3.to_checksum_address(args["owner"]) != Web3.to_checksum_address(owner)
                or _hex(args["space"]) != space_id or int(args["seq"]) != seq
                or _hex(args["prev"]) != prev):
            return None
        return bytes(args["ciphertext"])

    def latest_wraps(self, owner: str, space_id: str) -> bytes | None:
        version, block = bounded(lambda: self.contract.functions.wraps(
            Web3.to_checksum_address(owner), _b32(space_id)).call(), "reading the wraps")
        if int(version) == 0:
            return None
        event = self.contract.events.Wraps()
        logs = bounded(lambda: event.get_logs(
            from_block=int(block), to_block=int(block),
            argument_filters={"owner": Web3.to_checksum_address(owner),
                              "space": _b32(space_id)}), "reading the wraps log")
        best = None
        for ev in logs:
            if best is None or int(ev["args"]["version"]) > int(best["args"]["version"]):
                best = ev
        return bytes(best["args"]["blob"]) if best is not None else None

    # -- writes ------------------------------------------------------------------------

    def _decode_revert(self, err: Exception) -> ChainRefused:
        data = getattr(err, "data", None)
        if isinstance(data, str) and data.startswith("0x") and len(data) >= 10:
            name = self._errors.get(data[2:10])
            if name:
                return ChainRefused(name)
        return ChainRefused("reverted", str(err)[:200])

    def build(self, account: LocalAccount, call: Any, value: int = 0,
              nonce: int | None = None) -> bytes:
        """A signed transaction for `call`, gas estimated (a revert surfaces here)."""
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
        from eth_account._utils.legacy_transactions import Transaction
        from eth_account.typed_transactions import TypedTransaction
        from hexbytes import HexBytes

        if raw and raw[0] <= 0x7F:  # EIP-2718 typed (EIP-1559 and friends)
            tx = TypedTransaction.from_bytes(HexBytes(raw)).as_dict()
            price = int(tx.get("maxFeePerGas", tx.get("gasPrice", 0)))
        else:
            tx = Transaction.from_bytes(HexBytes(raw)).as_dict()
            price = int(tx["gasPrice"])
        return int(tx["gas"]) * price + int(tx.get("value", 0))

    def send_raw(self, raw: bytes) -> str:
        try:
            return _hex(bounded(lambda: self.w3.eth.send_raw_transaction(raw),
                                "sending a transaction"))
        except (ContractCustomError, ContractLogicError) as err:
            raise self._decode_revert(err) from None

    def wait(self, tx_hash: str, timeout_s: float = RECEIPT_TIMEOUT_S) -> Any:
        """The receipt once it has `confirmations` blocks on top (counting its own), or
        RpcUnavailable when the deadline passes first."""
        deadline = time.monotonic() + timeout_s
        receipt = None
        while time.monotonic() < deadline:
            try:
                receipt = self.w3.eth.get_transaction_receipt("0x" + tx_hash)
            except Web3Exception:
                receipt = None
            except (requests.exceptions.RequestException, OSError) as err:
                raise RpcUnavailable(f"waiting for a receipt: {type(err).__name__}") from None
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
            "from": sender, "to": Web3.to_checksum_address(to), "value": value,
            "chainId": self.config.chain_id, "gas": 21_000,
            "gasPrice": self.w3.eth.gas_price,
            "nonce": self.w3.eth.get_transaction_count(sender, "pending")}, "preparing a transfer")
        raw = bytes(account.sign_transaction(tx).raw_transaction)
        return self.wait(self.send_raw(raw))

    def epoch_from_receipt(self, receipt: Any) -> EpochLog | None:
        for ev in self.contract.events.Epoch().process_receipt(receipt, errors=DISCARD):
            a = ev["args"]
            return EpochLog(owner=a["owner"], space=_hex(a["space"]), seq=int(a["seq"]),
                            digest=_hex(a["digest"]), prev=_hex(a["prev"]),
                            prev_block=int(a["prevBlock"]), writer=a["writer"],
                            block=int(receipt["blockNumber"]), tx=_hex(receipt["transactionHash"]))
        return None
