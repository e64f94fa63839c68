"""The EpochAnchor contract's interface as bytes, with no I/O: selectors, the Epoch
topic, the types of a push's arguments and an Epoch's data, the EIP-712 authorization an
owner signs, and the hex and address forms every call and answer is put in.

Why a module of its own: kint.chain.anchor (the reads) and kint.chain.anchor_writes (the
calldata, the transactions) encode and decode against the same ABI, read once from the
compiled artifact (kint.chain.artifact), and a test can check a selector or a typed-data
digest without an endpoint. The interface is kint v0.3.0's (docs: contract, epochs, keys).

Hex conventions: digests, spaces and transaction hashes are lowercase hex without 0x
(either form is accepted as input); addresses are checksummed.
"""

from __future__ import annotations

import functools
from typing import Any

from web3 import Web3

from kint.chain.artifact import epoch_anchor_artifact
from kint.keccak import keccak

PUSH_SELECTOR = keccak(b"push(address,bytes32,bytes32,bytes)")[:4]  # 0xa2483825
EPOCH_TOPIC = keccak(b"Epoch(address,bytes32,address,uint64,bytes32,bytes32,uint64)")
EPOCH_DATA = ("uint64", "bytes32", "bytes32", "uint64")
PUSH_ARGS = ("address", "bytes32", "bytes32", "bytes")

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


def bare_hex(value: bytes | str) -> str:
    """Lowercase hex without 0x, from bytes or from hex in either form."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return (value[2:] if value.startswith(("0x", "0X")) else value).lower()


def bytes32_of(value: str | bytes) -> bytes:
    """32 bytes from 64 hex (with or without 0x) or from bytes; anything else is a bug."""
    raw = bytes(value) if isinstance(value, (bytes, bytearray)) else bytes.fromhex(bare_hex(value))
    if len(raw) != 32:
        raise ValueError(f"expected 32 bytes, got {len(raw)}")
    return raw


def checksummed(value: str) -> str:
    """`value` as a checksummed address (a malformed one is refused by web3)."""
    return Web3.to_checksum_address(value)


def address_topic(address: str) -> str:
    """An address as an indexed topic of a log filter: 32 bytes, left-padded with zeros."""
    return "0x" + bytes(12).hex() + checksummed(address)[2:].lower()


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
                   "chainId": int(chain_id), "verifyingContract": checksummed(contract)},
        "message": {"owner": checksummed(owner), "key": checksummed(key),
                    "expiry": int(expiry), "nonce": int(nonce), "deadline": int(deadline)},
    }


@functools.lru_cache(maxsize=None)
def view_signatures() -> dict[str, tuple[bytes, tuple[str, ...], tuple[str, ...]]]:
    """name -> (selector, input types, output types) of every view of the contract."""
    out = {}
    for e in epoch_anchor_artifact()["abi"]:
        if e.get("type") == "function" and e.get("stateMutability") in ("view", "pure"):
            inputs = tuple(i["type"] for i in e["inputs"])
            out[e["name"]] = (keccak(f"{e['name']}({','.join(inputs)})".encode())[:4], inputs,
                              tuple(o["type"] for o in e["outputs"]))
    return out


@functools.lru_cache(maxsize=None)
def custom_errors() -> dict[bytes, tuple[str, list[tuple[str, str]]]]:
    """selector -> (name, [(arg name, arg type)]) for every custom error in the ABI."""
    return {
        keccak(f"{e['name']}({','.join(i['type'] for i in e['inputs'])})".encode())[:4]:
            (e["name"], [(i["name"], i["type"]) for i in e["inputs"]])
        for e in epoch_anchor_artifact()["abi"] if e.get("type") == "error"}

