"""EpochAnchor against kint v0.3.0's documented interface.

Three things are pinned here: the ABI is exactly the published one (every selector and topic
of the contract reference's table, computed from the canonical signatures); the artifacts in
the package are what the pinned solc makes of the committed source; and the contract,
deployed from that artifact on the session's devchain (a real anvil on 127.0.0.1), behaves as
documented, driven through kint's own binding (kint.chain.anchor). Every test uses fresh
owners and spaces, so nothing here depends on, or disturbs, what other modules anchored.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import requests
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount
from eth_utils import keccak
from web3 import Web3
from web3.exceptions import TransactionNotFound

from kint.chain import devchain
from kint.chain.anchor import ZERO_DIGEST, Anchor, CalldataRefused, EpochLog, Head
from kint.chain.anchor_abi import EPOCH_TOPIC, PUSH_SELECTOR, authorization_typed_data
from kint.chain.calls import ChainRefused
from kint.chain.artifact import epoch_anchor_artifact, load_artifact
from kint.chain.config import ChainConfig, devchain_record
from kint.chain.rpc import RpcTracker
from kint.epochs.envelope import Header
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.head_header import HEADER_WALK_EPOCHS, newest_readable_header

# Sets the next block's time and moves the chain's clock on: alone on the run's devchain.
pytestmark = pytest.mark.chain_exclusive

ROOT = Path(__file__).resolve().parents[1]
CHAIN_ID = devchain.CHAIN_ID
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
ARTIFACT_KEYS = ["contractName", "source", "abi", "bytecode", "deployedBytecode", "compiler",
                 "settings", "source_sha256"]

# The contract reference's "Selectors and topics" table, verbatim.
SELECTORS = {
    "push(address,bytes32,bytes32,bytes)": "0xa2483825",
    "setSessionKey(address,uint64)": "0x580da310",
    "revokeSessionKey(address)": "0x84f4fc6a",
    "setSessionKeyBySig(address,address,uint64,uint256,bytes)": "0x5247dcff",
    "setStartSeq(bytes32,uint64)": "0x15e2058b",
    "head(address,bytes32)": "0x24e8393d",
    "canWrite(address,address)": "0xedf2c387",
    "sessionKeyExpiry(address,address)": "0x6844536f",
    "startSeq(address,bytes32)": "0x1408deb9",
    "authNonce(address)": "0x8b524b7a",
    "DOMAIN_SEPARATOR()": "0x3644e515",
    "authorizationDigest(address,address,uint64,uint256,uint256)": "0x09c9881f",
}
ERRORS = {
    "NotAuthorized()": "0xea8e4eb5",
    "StaleHead(bytes32,bytes32)": "0x7fe83496",
    "BadSignature()": "0x5cd5d233",
    "AuthorizationExpired()": "0x0f05f5bf",
    "SeqNotMonotone()": "0x4863002e",
    "EmptyCiphertext()": "0xdbe0cd78",
}
TOPICS = {
    "Epoch(address,bytes32,address,uint64,bytes32,bytes32,uint64)":
        "0x86da9d02e15b0a4ed66c7fca89e82bdb54f4f39993c59a4c9a5256f0eedf86bc",
    "SessionKeySet(address,address,uint64)":
        "0x0775f7c38a29f43cd7fbc9f49b6e6ce64501452fd077c83ed52fa3e847da5625",
    "StartSeqSet(address,bytes32,uint64)":
        "0x429767075b5fba88ebcab612058dbfc8613825fa68a59fa886f002c46636fa3e",
}


VECTORS = json.loads((ROOT / "tests" / "vectors" / "kint-v0.3.0.json").read_text("utf-8"))
# Epoch 1 of kint v0.3.0's vectors: a real envelope, whose header parses whoever pushes it.
KINT_BLOB = bytes.fromhex(VECTORS["epoch1"]["blob"])


def _signature(item: dict[str, Any]) -> str:
    return f"{item['name']}({','.join(i['type'] for i in item['inputs'])})"


# --- the ABI is the published one ----------------------------------------------------------


@pytest.mark.parametrize("kind, table", [("function", SELECTORS), ("error", ERRORS),
                                         ("event", TOPICS)])
def test_abi_is_exactly_the_documented_interface(kind, table):
    abi = epoch_anchor_artifact()["abi"]
    ours = {_signature(e) for e in abi if e["type"] == kind}
    assert ours == set(table), f"{kind}s differ from the documented table"
    for sig, expected in table.items():
        digest = keccak(text=sig)
        assert "0x" + (digest if kind == "event" else digest[:4]).hex() == expected, sig
    # No constructor arguments, no receive, no fallback: nothing but the table.
    assert {e["type"] for e in abi} == {"function", "error", "event"}


def test_abi_shapes_match_the_reference():
    abi = {(e["type"], e["name"]): e for e in epoch_anchor_artifact()["abi"]}
    outputs = {name: [o["type"] for o in e["outputs"]] for (t, name), e in abi.items()
               if t == "function"}
    assert outputs["head"] == ["bytes32", "uint64", "uint64"]
    assert [o["name"] for o in abi[("function", "head")]["outputs"]] == [
        "digest", "seq", "blockNumber"]
    assert outputs["push"] == ["bytes32", "uint64"]
    assert outputs["canWrite"] == ["bool"] and outputs["authNonce"] == ["uint256"]
    views = {n for (t, n), e in abi.items() if t == "function" and e["stateMutability"] == "view"}
    assert views == {"head", "canWrite", "sessionKeyExpiry", "startSeq", "authNonce",
                     "DOMAIN_SEPARATOR", "authorizationDigest"}
    assert not any(e.get("stateMutability") == "payable" for e in abi.values())
    indexed = {n: [i["name"] for i in e["inputs"] if i["indexed"]] for (t, n), e in abi.items()
               if t == "event"}
    assert indexed == {"Epoch": ["owner", "space", "writer"], "SessionKeySet": ["owner", "key"],
                       "StartSeqSet": ["owner", "space"]}
    assert [i["name"] for i in abi[("event", "Epoch")]["inputs"]] == [
        "owner", "space", "writer", "seq", "prev", "digest", "prevBlock"]
    assert [i["name"] for i in abi[("error", "StaleHead")]["inputs"]] == ["expected", "got"]
    assert PUSH_SELECTOR.hex() == "a2483825" and "0x" + EPOCH_TOPIC.hex() == TOPICS[
        "Epoch(address,bytes32,address,uint64,bytes32,bytes32,uint64)"]


# --- the artifacts are what the pinned compiler makes of the source ------------------------


def test_artifacts_match_a_fresh_compile():
    node = shutil.which("node")
    assert node, "node is not on PATH (make node installs the npm tools; node itself is required)"
    out = subprocess.run([node, "contracts/compile.mjs", "--check"], cwd=ROOT, text=True,
                         capture_output=True, timeout=180)
    assert out.returncode == 0, f"stdout:\n{out.stdout}\nstderr:\n{out.stderr}"

    for name in ("EpochAnchor", "TestSmartAccount"):
        art = load_artifact(name)
        path = ROOT / "kint" / "chain" / "artifacts" / f"{name}.json"
        assert json.loads(path.read_text()) == art and path.read_text().endswith("}\n")
        assert list(art) == ARTIFACT_KEYS
        source = ROOT / "contracts" / f"{name}.sol"
        assert art["source"] == f"contracts/{name}.sol"
        assert art["source_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
        assert art["settings"] == {"evmVersion": "cancun",
                                   "optimizer": {"enabled": True, "runs": 200},
                                   "metadata": {"bytecodeHash": "none"}}
        assert art["compiler"].startswith("0.8.37+")
        for code in (art["bytecode"], art["deployedBytecode"]):
            assert code.startswith("0x60") and len(code) > 100 and bytes.fromhex(code[2:])
    assert not (ROOT / "contracts" / "EpochAnchor.json").exists(), "the old artifact is back"


def test_artifacts_ship_as_package_data():
    """A wheel carries kint/chain/artifacts/*.json: declared, and found through importlib."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "artifacts/*.json" in project["tool"]["setuptools"]["package-data"]["kint.chain"]
    packaged = resources.files("kint.chain").joinpath("artifacts", "EpochAnchor.json")
    assert json.loads(packaged.read_bytes()) == epoch_anchor_artifact()


# --- the devchain ---------------------------------------------------------------------------


@dataclass
class Dev:
    url: str
    w3: Web3
    anchor: Anchor

    def rpc(self, method: str, params: list[Any]) -> Any:
        return devchain.dev_rpc(self.url, method, params)

    def now(self) -> int:
        return int(self.w3.eth.get_block("latest")["timestamp"])

    def actor(self, wei: int = 10**18) -> LocalAccount:
        """A fresh, funded EOA: every test owns its actors, so no state leaks between them."""
        account = Account.create()
        if wei:
            devchain.fund(self.url, account.address, wei)
        return account

    def send(self, account: LocalAccount, data: bytes) -> Any:
        """Send calldata to EpochAnchor the way kint does (estimated, then waited for)."""
        return self.anchor.transact(account, data)

    def refused(self, account: LocalAccount, data: bytes) -> ChainRefused:
        """The refusal kint sees when it estimates `data` from `account`."""
        with pytest.raises(ChainRefused) as info:
            self.anchor.build(account, data)
        return info.value

    def mined(self, account: LocalAccount, data: bytes, to: str | None = None,
              timestamp: int | None = None) -> Any:
        """Mine `data` with a fixed gas limit (no estimate) and return its receipt, status 0
        or 1: what the chain itself does, not what a simulation predicts."""
        if timestamp is not None:
            self.rpc("evm_setNextBlockTimestamp", [timestamp])
        tx = {"to": to or self.anchor.address, "data": data, "gas": 400_000, "value": 0,
              "gasPrice": 2 * int(self.w3.eth.gas_price), "chainId": CHAIN_ID,
              "nonce": self.w3.eth.get_transaction_count(account.address, "pending")}
        tx_hash = self.w3.eth.send_raw_transaction(account.sign_transaction(tx).raw_transaction)
        return self.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30)


@pytest.fixture(scope="module")
def dev(chain_home) -> Dev:
    record = json.loads(devchain_record(chain_home).read_text())
    config = ChainConfig(rpc_urls=(record["rpc_url"],), chain_id=CHAIN_ID, anchor=record["anchor"],
                         confirmations=1, rpc_timeout_s=10.0, devchain=True)
    anchor = Anchor(config, RpcTracker())
    w3 = Web3(Web3.HTTPProvider(record["rpc_url"], request_kwargs={"timeout": 10}))
    return Dev(record["rpc_url"], w3, anchor)


def _space() -> str:
    return keccak(b"kint-space-v1" + os.urandom(8).hex().encode()).hex()


def _sign(signer: LocalAccount, dev: Dev, owner: str, key: str, expiry: int, nonce: int,
          deadline: int, chain_id: int = CHAIN_ID) -> bytes:
    typed = authorization_typed_data(chain_id, dev.anchor.address, owner, key, expiry, nonce,
                                     deadline)
    return bytes(Account.sign_typed_data(signer.key, full_message=typed).signature)


def test_devchain_runs_the_packaged_bytecode(dev):
    code = bytes(dev.w3.eth.get_code(dev.anchor.address)).hex()
    assert code == epoch_anchor_artifact()["deployedBytecode"][2:]


# --- push: chaining, prevBlock, the walk and the calldata ---------------------------------


def test_push_chains_and_records_prev_block(dev):
    owner, space = dev.actor(), _space()
    assert dev.anchor.head(owner.address, space) == Head(ZERO_DIGEST, 0, 0)
    ct1, ct2 = b"\x01epoch one" + os.urandom(200), b"\x01epoch two" + os.urandom(200)
    d1, d2 = keccak(ct1).hex(), keccak(ct2).hex()

    r1 = dev.send(owner, dev.anchor.encode_push(owner.address, space, ZERO_DIGEST, ct1))
    assert dev.anchor.head(owner.address, space) == Head(d1, 1, r1["blockNumber"])
    r2 = dev.send(owner, dev.anchor.encode_push(owner.address, space, d1, ct2))
    assert dev.anchor.head(owner.address, space) == Head(d2, 2, r2["blockNumber"])
    assert r2["blockNumber"] > r1["blockNumber"]

    e2 = dev.anchor.epoch_from_receipt(r2)
    assert e2 == EpochLog(owner=owner.address, space=space, seq=2, prev=d1, digest=d2,
                          prev_block=r1["blockNumber"], writer=owner.address,
                          block=r2["blockNumber"], tx_hash=bytes(r2["transactionHash"]).hex())
    # The walk: one exact-block query per epoch, following prevBlock back to 0.
    head = dev.anchor.head(owner.address, space)
    walked, seq, block = [], head.seq, head.block
    while block:
        ev = dev.anchor.epoch_log(owner.address, space, seq, block)
        assert ev is not None
        walked.append(ev)
        seq, block = seq - 1, ev.prev_block
    assert [e.seq for e in walked] == [2, 1] and walked[0] == e2
    assert walked[1].prev == ZERO_DIGEST and walked[1].prev_block == 0 and walked[1].digest == d1
    assert dev.anchor.epoch_log(owner.address, space, 1, r2["blockNumber"]) is None
    assert dev.anchor.epoch_log(owner.address, _space(), 2, r2["blockNumber"]) is None
    # The ciphertext is in the calldata, never in the event.
    for ev, ct in ((walked[0], ct2), (walked[1], ct1)):
        got = dev.anchor.push_calldata(ev.tx_hash, owner.address, space, ev.prev, ev.digest)
        assert got == ct
    assert ct2 not in bytes(r2["logs"][0]["data"])
    # Heads are per owner and per space.
    assert dev.anchor.head(owner.address, _space()).seq == 0
    assert dev.anchor.head(dev.actor(0).address, space).seq == 0


def test_push_calldata_is_byte_for_byte_the_vectors(dev):
    """kint's own encoder (what push sends) against v0.3.0's push calldata of epoch 1, and
    the devchain's contract takes those very bytes and stores keccak(ct) as the digest."""
    call = VECTORS["push_calldata"]
    data = dev.anchor.encode_push(call["owner"], call["space"], call["prev"], KINT_BLOB)
    assert "0x" + data.hex() == call["data"] and data[:4].hex() == call["selector"][2:]
    assert len(KINT_BLOB) == call["ct_length"]
    owner, space = dev.actor(), _space()
    r = dev.send(owner, dev.anchor.encode_push(owner.address, space, ZERO_DIGEST, KINT_BLOB))
    assert dev.anchor.epoch_from_receipt(r).digest == call["ct_keccak"]
    assert dev.anchor.head(owner.address, space).digest == call["ct_keccak"]


def test_push_calldata_refuses_what_the_event_does_not_describe(dev):
    owner, space = dev.actor(), _space()
    ct = b"the epoch" + os.urandom(64)
    r = dev.send(owner, dev.anchor.encode_push(owner.address, space, ZERO_DIGEST, ct))
    ev = dev.anchor.epoch_from_receipt(r)
    get = dev.anchor.push_calldata
    with pytest.raises(CalldataRefused, match="^ciphertext digest does not match the Epoch event$"):
        get(ev.tx_hash, owner.address, space, ev.prev, keccak(b"other").hex())
    with pytest.raises(CalldataRefused, match="names prev"):
        get(ev.tx_hash, owner.address, space, ev.digest, ev.digest)
    with pytest.raises(CalldataRefused, match="for owner"):
        get(ev.tx_hash, dev.actor(0).address, space, ev.prev, ev.digest)
    with pytest.raises(CalldataRefused, match="for space"):
        get(ev.tx_hash, owner.address, _space(), ev.prev, ev.digest)
    # Addressed elsewhere, or to the contract but not a push.
    stray = dev.mined(owner, PUSH_SELECTOR + b"\x00" * 160, to=dev.actor(0).address)
    with pytest.raises(CalldataRefused, match="not EpochAnchor"):
        get(bytes(stray["transactionHash"]).hex(), owner.address, space, ev.prev, ev.digest)
    other = dev.send(owner, dev.anchor.encode_set_start_seq(space, 1))
    with pytest.raises(CalldataRefused, match="does not call push"):
        get(bytes(other["transactionHash"]).hex(), owner.address, space, ev.prev, ev.digest)
    with pytest.raises(CalldataRefused, match="not served"):
        get("ab" * 32, owner.address, space, ev.prev, ev.digest)


def test_stale_head_names_expected_and_got(dev):
    owner, space = dev.actor(), _space()
    ct = b"first"
    dev.send(owner, dev.anchor.encode_push(owner.address, space, ZERO_DIGEST, ct))
    d1 = keccak(ct).hex()
    err = dev.refused(owner, dev.anchor.encode_push(owner.address, space, ZERO_DIGEST, b"again"))
    assert (err.error, err.fields) == ("StaleHead", {"expected": d1, "got": ZERO_DIGEST})
    wrong = keccak(b"not the head").hex()
    err = dev.refused(owner, dev.anchor.encode_push(owner.address, space, wrong, b"again"))
    assert (err.error, err.fields) == ("StaleHead", {"expected": d1, "got": wrong})
    assert str(err) == f"StaleHead(expected={d1}, got={wrong})"
    assert dev.mined(owner,
                     dev.anchor.encode_push(owner.address, space, wrong, b"x"))["status"] == 0
    assert dev.anchor.head(owner.address, space).seq == 1


def test_check_order_is_authorization_then_empty_then_head(dev):
    owner, stranger, space = dev.actor(), dev.actor(), _space()
    dev.send(owner, dev.anchor.encode_push(owner.address, space, ZERO_DIGEST, b"one"))
    stale = ZERO_DIGEST  # no longer the head
    # A stranger with an empty payload on a stale head: authorization is checked first.
    assert dev.refused(stranger, dev.anchor.encode_push(owner.address, space, stale, b"")
                       ).error == "NotAuthorized"
    assert dev.refused(stranger, dev.anchor.encode_push(owner.address, space, keccak(b"one").hex(),
                                                        b"x")).error == "NotAuthorized"
    # The owner with an empty payload on a stale head: the empty payload comes before the head.
    assert dev.refused(owner, dev.anchor.encode_push(owner.address, space, stale, b"")
                       ).error == "EmptyCiphertext"
    assert dev.refused(owner, dev.anchor.encode_push(owner.address, _space(), ZERO_DIGEST, b"")
                       ).error == "EmptyCiphertext"
    # Mined without an estimate, the chain refuses too.
    assert dev.mined(stranger,
                     dev.anchor.encode_push(owner.address, space, stale, b""))["status"] == 0


# --- session keys ---------------------------------------------------------------------------


def test_session_key_writes_until_its_expiry_strictly(dev):
    owner, key, space = dev.actor(), dev.actor(), _space()
    assert not dev.anchor.can_write(owner.address, key.address)
    expiry = dev.now() + 50
    r = dev.send(owner, dev.anchor.encode_set_session_key(key.address, expiry))
    assert dev.anchor.session_key_expiry(owner.address, key.address) == expiry
    assert dev.anchor.auth_nonce(owner.address) == 1
    (log,) = r["logs"]
    assert bytes(log["topics"][0]).hex() == TOPICS["SessionKeySet(address,address,uint64)"][2:]
    assert int.from_bytes(bytes(log["data"]), "big") == expiry
    assert dev.anchor.can_write(owner.address, key.address)

    # One second before the expiry the key pushes (as writer); at the expiry it cannot.
    ok = dev.mined(key, dev.anchor.encode_push(owner.address, space, ZERO_DIGEST, b"by key"),
                   timestamp=expiry - 1)
    assert ok["status"] == 1
    assert dev.anchor.epoch_from_receipt(ok).writer == key.address
    late = dev.mined(key, dev.anchor.encode_push(owner.address, space, keccak(b"by key").hex(),
                                                 b"late"), timestamp=expiry)
    assert late["status"] == 0
    at = late["blockNumber"]
    c = dev.anchor.contract.functions.canWrite(owner.address, key.address)
    assert c.call(block_identifier=at - 1) is True and c.call(block_identifier=at) is False
    assert dev.refused(key, dev.anchor.encode_push(owner.address, space, keccak(b"by key").hex(),
                                                   b"late")).error == "NotAuthorized"
    # The owner itself always writes; a key is the owner's, for no one else.
    assert dev.anchor.can_write(owner.address, owner.address)
    assert not dev.anchor.can_write(dev.actor(0).address, key.address)


def test_revoke_ends_the_key_in_the_same_block_and_consumes_the_nonce(dev):
    owner, key, space = dev.actor(), dev.actor(), _space()
    dev.send(owner, dev.anchor.encode_set_session_key(key.address, dev.now() + 3600))
    dev.send(key, dev.anchor.encode_push(owner.address, space, ZERO_DIGEST, b"one"))
    r = dev.send(owner, dev.anchor.encode_revoke_session_key(key.address))
    assert dev.anchor.session_key_expiry(owner.address, key.address) == 0
    assert dev.anchor.auth_nonce(owner.address) == 2
    assert int.from_bytes(bytes(r["logs"][0]["data"]), "big") == 0
    c = dev.anchor.contract.functions.canWrite(owner.address, key.address)
    assert c.call(block_identifier=r["blockNumber"]) is False
    assert dev.refused(key, dev.anchor.encode_push(owner.address, space, keccak(b"one").hex(),
                                                   b"two")).error == "NotAuthorized"


def test_a_session_key_can_only_append_to_its_owners_spaces(dev):
    """v0.3.0's judge claim "the session key can only append; the contract enforces it".
    Everything else a key sends acts on the key's own address (msg.sender), never on its
    owner's: it cannot add a key for the owner, lengthen or revoke its own grant, spend the
    owner's authorization nonce, or move the owner's startSeq hint. And its push extends
    the head it names: an epoch already anchored is never replaced."""
    owner, key, rogue, space = dev.actor(), dev.actor(), dev.actor(), _space()
    expiry = dev.now() + 3600
    dev.send(owner, dev.anchor.encode_set_session_key(key.address, expiry))
    dev.send(owner, dev.anchor.encode_set_start_seq(space, 3))
    dev.send(key, dev.anchor.encode_push(owner.address, space, ZERO_DIGEST, b"one"))
    nonce = dev.anchor.auth_nonce(owner.address)

    dev.send(key, dev.anchor.encode_set_session_key(rogue.address, expiry))
    dev.send(key, dev.anchor.encode_set_session_key(key.address, expiry + 10**6))
    dev.send(key, dev.anchor.encode_revoke_session_key(key.address))
    dev.send(key, dev.anchor.encode_set_start_seq(space, 9))
    assert not dev.anchor.can_write(owner.address, rogue.address)
    assert dev.anchor.can_write(key.address, rogue.address)  # the key's own, for itself
    assert dev.anchor.session_key_expiry(owner.address, key.address) == expiry
    assert dev.anchor.can_write(owner.address, key.address)
    assert dev.anchor.auth_nonce(owner.address) == nonce
    assert dev.anchor.start_seq(owner.address, space) == 3
    assert dev.anchor.start_seq(key.address, space) == 9
    assert dev.refused(rogue, dev.anchor.encode_push(owner.address, space, keccak(b"one").hex(),
                                                     b"x")).error == "NotAuthorized"

    # Appending is all a push does: naming the anchored epoch's prev again to replace it is
    # StaleHead, and the head moves only forward from the digest it names.
    replace = dev.refused(key, dev.anchor.encode_push(owner.address, space, ZERO_DIGEST,
                                                      b"one, rewritten"))
    assert replace.error == "StaleHead"
    dev.send(key, dev.anchor.encode_push(owner.address, space, keccak(b"one").hex(), b"two"))
    head = dev.anchor.head(owner.address, space)
    assert (head.seq, head.digest) == (2, keccak(b"two").hex())


# --- setSessionKeyBySig ---------------------------------------------------------------------


def test_eoa_signature_authorizes_once(dev):
    owner, key = dev.actor(0), dev.actor()  # the owner never needs ETH on this lane
    expiry, deadline = dev.now() + 86400, dev.now() + 300
    nonce = dev.anchor.auth_nonce(owner.address)
    assert nonce == 0
    typed = authorization_typed_data(CHAIN_ID, dev.anchor.address, owner.address, key.address,
                                     expiry, nonce, deadline)
    signable = encode_typed_data(full_message=typed)
    assert signable.header.hex() == dev.anchor.domain_separator()
    digest = keccak(b"\x19" + signable.version + signable.header + signable.body).hex()
    assert digest == dev.anchor.authorization_digest(owner.address, key.address, expiry, nonce,
                                                     deadline)
    sig = _sign(owner, dev, owner.address, key.address, expiry, nonce, deadline)
    call = dev.anchor.encode_set_session_key_by_sig(owner.address, key.address, expiry,
                                                    deadline, sig)

    r = dev.send(key, call)
    assert dev.anchor.session_key_expiry(owner.address, key.address) == expiry
    assert dev.anchor.auth_nonce(owner.address) == 1
    assert dev.anchor.can_write(owner.address, key.address)
    (log,) = r["logs"]
    assert [bytes(t) for t in log["topics"][1:]] == [
        bytes(12) + bytes.fromhex(owner.address[2:]), bytes(12) + bytes.fromhex(key.address[2:])]
    # Replayed, it was made over a nonce that has moved on.
    assert dev.refused(key, call).error == "BadSignature"


def test_the_authorization_digest_is_the_documented_eip712(dev):
    """11-contract.md: domain `name "kint EpochAnchor"`, `version "1"`, `chainId`,
    `verifyingContract`, and the type written out there. Hashed here by hand from those
    strings, so the contract and kint's typed data cannot drift together."""
    owner, key = dev.actor(0).address, dev.actor(0).address
    expiry, nonce, deadline = 1_900_000_000, 7, 1_800_000_000
    def word(n: int) -> bytes:
        return n.to_bytes(32, "big")

    def address(a: str) -> bytes:
        return bytes(12) + bytes.fromhex(a[2:])

    domain = keccak(keccak(b"EIP712Domain(string name,string version,uint256 chainId,"
                           b"address verifyingContract)")
                    + keccak(b"kint EpochAnchor") + keccak(b"1") + word(CHAIN_ID)
                    + address(dev.anchor.address))
    struct = keccak(keccak(b"SessionKeyAuthorization(address owner,address key,uint64 expiry,"
                           b"uint256 nonce,uint256 deadline)")
                    + address(owner) + address(key) + word(expiry) + word(nonce) + word(deadline))
    digest = keccak(b"\x19\x01" + domain + struct)
    assert dev.anchor.domain_separator() == domain.hex()
    assert dev.anchor.authorization_digest(owner, key, expiry, nonce, deadline) == digest.hex()
    typed = authorization_typed_data(CHAIN_ID, dev.anchor.address, owner, key, expiry, nonce,
                                     deadline)
    signable = encode_typed_data(full_message=typed)
    assert (signable.header, signable.body) == (domain, struct)


def test_eoa_signature_encodings(dev):
    owner, key = dev.actor(0), dev.actor()
    expiry, deadline = dev.now() + 86400, dev.now() + 300
    sig = _sign(owner, dev, owner.address, key.address, expiry, 0, deadline)
    r, s, v = sig[:32], int.from_bytes(sig[32:64], "big"), sig[64]
    assert v in (27, 28) and s <= SECP256K1_N // 2

    def refused(signature: bytes) -> str:
        return dev.refused(key, dev.anchor.encode_set_session_key_by_sig(
            owner.address, key.address, expiry, deadline, signature)).error

    # The malleated twin (n - s, other parity) recovers to the owner too; high s is refused.
    high = r + (SECP256K1_N - s).to_bytes(32, "big") + bytes([55 - v])
    assert Account._recover_hash(bytes.fromhex(dev.anchor.authorization_digest(
        owner.address, key.address, expiry, 0, deadline)), vrs=(55 - v, int.from_bytes(r, "big"),
                                                                 SECP256K1_N - s)) == owner.address
    assert refused(high) == "BadSignature"
    assert refused(sig + b"\x00") == "BadSignature"  # 66 bytes
    assert refused(sig[:64]) == "BadSignature"  # 64 bytes (compact form) is not accepted
    assert refused(b"") == "BadSignature"
    assert refused(sig[:64] + bytes([v + 2])) == "BadSignature"  # v 29/30
    assert refused(sig[:64] + bytes([v - 27 + 2])) == "BadSignature"  # v 2/3
    stranger_sig = _sign(dev.actor(0), dev, owner.address, key.address, expiry, 0, deadline)
    assert refused(stranger_sig) == "BadSignature"
    other_chain = _sign(owner, dev, owner.address, key.address, expiry, 0, deadline, chain_id=8453)
    assert refused(other_chain) == "BadSignature"
    assert refused(_sign(owner, dev, owner.address, key.address, expiry + 1, 0, deadline)
                   ) == "BadSignature"  # signed another expiry
    assert refused(_sign(owner, dev, owner.address, key.address, expiry, 1, deadline)
                   ) == "BadSignature"  # signed a future nonce
    assert dev.anchor.auth_nonce(owner.address) == 0

    # v as 0/1 is the same signature.
    dev.send(key, dev.anchor.encode_set_session_key_by_sig(
        owner.address, key.address, expiry, deadline, sig[:64] + bytes([v - 27])))
    assert dev.anchor.session_key_expiry(owner.address, key.address) == expiry
    assert dev.anchor.auth_nonce(owner.address) == 1


def test_past_deadline_is_refused_before_the_signature(dev):
    owner, key = dev.actor(0), dev.actor()
    expiry, deadline = dev.now() + 86400, dev.now() + 5
    sig = _sign(owner, dev, owner.address, key.address, expiry, 0, deadline)
    dev.rpc("evm_increaseTime", [60])
    dev.rpc("evm_mine", [])
    assert dev.now() > deadline
    for signature in (sig, b"garbage"):
        assert dev.refused(key, dev.anchor.encode_set_session_key_by_sig(
            owner.address, key.address, expiry, deadline,
            signature)).error == "AuthorizationExpired"
    assert dev.anchor.auth_nonce(owner.address) == 0


def test_an_authorization_is_good_through_the_second_of_its_deadline(dev):
    """AuthorizationExpired when block.timestamp > deadline (11-contract.md): mined in the
    deadline's own second it lands, one second later it reverts and consumes nothing."""
    owner, key = dev.actor(0), dev.actor()
    deadline = dev.now() + 30
    expiry = deadline + 86400
    sig = _sign(owner, dev, owner.address, key.address, expiry, 0, deadline)
    at = dev.mined(key, dev.anchor.encode_set_session_key_by_sig(
        owner.address, key.address, expiry, deadline, sig), timestamp=deadline)
    assert at["status"] == 1 and dev.anchor.session_key_expiry(owner.address, key.address) == expiry
    assert dev.anchor.auth_nonce(owner.address) == 1
    deadline = dev.now() + 30
    sig = _sign(owner, dev, owner.address, key.address, expiry + 1, 1, deadline)
    late = dev.mined(key, dev.anchor.encode_set_session_key_by_sig(
        owner.address, key.address, expiry + 1, deadline, sig), timestamp=deadline + 1)
    assert late["status"] == 0
    assert dev.anchor.auth_nonce(owner.address) == 1
    assert dev.anchor.session_key_expiry(owner.address, key.address) == expiry


@pytest.mark.parametrize("action", ["revokeSessionKey", "setSessionKey"])
def test_owner_action_kills_an_unspent_authorization(dev, action):
    owner, key = dev.actor(), dev.actor()
    expiry, deadline = dev.now() + 86400, dev.now() + 3600
    withheld = _sign(owner, dev, owner.address, key.address, expiry, 0, deadline)
    if action == "revokeSessionKey":
        dev.send(owner, dev.anchor.encode_revoke_session_key(key.address))
    else:  # the burn-nonce lane: re-set the key's current expiry (0 here)
        dev.send(owner, dev.anchor.encode_set_session_key(key.address, 0))
    assert dev.anchor.auth_nonce(owner.address) == 1
    assert dev.refused(key, dev.anchor.encode_set_session_key_by_sig(
        owner.address, key.address, expiry, deadline, withheld)).error == "BadSignature"
    assert not dev.anchor.can_write(owner.address, key.address)


def test_smart_account_owner_uses_erc1271(dev):
    signer, key, key2, space = dev.actor(), dev.actor(), dev.actor(), _space()
    account = devchain.deploy_test_smart_account(dev.url, signer.address)
    assert dev.w3.eth.get_code(account) != b""
    expiry, deadline = dev.now() + 86400, dev.now() + 300

    # Someone else's signature: the account answers 0xffffffff, the contract BadSignature.
    wrong = _sign(dev.actor(0), dev, account, key.address, expiry, 0, deadline)
    assert dev.refused(key, dev.anchor.encode_set_session_key_by_sig(
        account, key.address, expiry, deadline, wrong)).error == "BadSignature"
    good = _sign(signer, dev, account, key.address, expiry, 0, deadline)
    dev.send(key, dev.anchor.encode_set_session_key_by_sig(account, key.address, expiry,
                                                           deadline, good))
    assert dev.anchor.session_key_expiry(account, key.address) == expiry
    assert dev.anchor.auth_nonce(account) == 1
    assert dev.refused(key, dev.anchor.encode_set_session_key_by_sig(
        account, key.address, expiry, deadline, good)).error == "BadSignature"  # replay

    # The account as an owner, through its own transactions.
    sa = dev.w3.eth.contract(address=account, abi=load_artifact("TestSmartAccount")["abi"])

    def execute(data: bytes) -> Any:
        return dev.anchor.transact(signer, sa.functions.execute(dev.anchor.address, data))

    execute(dev.anchor.encode_set_session_key(key2.address, expiry))
    assert dev.anchor.can_write(account, key2.address) and dev.anchor.auth_nonce(account) == 2
    r = execute(dev.anchor.encode_push(account, space, ZERO_DIGEST, b"by the account"))
    ev = dev.anchor.epoch_from_receipt(r)
    assert (ev.owner, ev.writer, ev.seq) == (account, account, 1)
    dev.send(key2, dev.anchor.encode_push(account, space, ev.digest, b"by its key"))
    assert dev.anchor.head(account, space).seq == 2
    # Only the signer drives the account; the contract's own error comes through execute.
    with pytest.raises(ChainRefused):
        dev.anchor.build(key, sa.functions.execute(dev.anchor.address, b""))
    assert dev.refused(signer, sa.functions.execute(dev.anchor.address, dev.anchor.encode_push(
        account, space, ZERO_DIGEST, b"stale"))).error == "StaleHead"


def test_an_owner_with_code_that_reverts_is_bad_signature(dev):
    """EpochAnchor itself has code and no isValidSignature: the call reverts inside the
    'account', and the contract reports BadSignature rather than passing the revert on."""
    key = dev.actor()
    owner = dev.anchor.address
    expiry, deadline = dev.now() + 86400, dev.now() + 300
    sig = _sign(dev.actor(0), dev, owner, key.address, expiry, 0, deadline)
    assert dev.refused(key, dev.anchor.encode_set_session_key_by_sig(
        owner, key.address, expiry, deadline, sig)).error == "BadSignature"


def _owner_with_code(dev: Dev, runtime: bytes) -> str:
    """A fresh address holding `runtime` as its code (anvil_setCode): an 'account' whose
    isValidSignature answer the test chooses byte for byte."""
    address = Account.create().address
    dev.rpc("anvil_setCode", [address, "0x" + runtime.hex()])
    return address


# Runtimes for the ERC-1271 call: answer the magic value as a full ABI word, answer only its
# first two bytes, answer nothing at all (STOP).
_MAGIC_WORD = (b"\x7f" + bytes.fromhex("1626ba7e") + bytes(28) + b"\x60\x00\x52"
               + b"\x60\x20\x60\x00\xf3")
_TWO_BYTES = (b"\x7f" + bytes.fromhex("1626ba7e") + bytes(28) + b"\x60\x00\x52"
              + b"\x60\x02\x60\x00\xf3")
_SILENT = b"\x00"


def test_an_erc1271_reply_that_is_not_a_bytes4_reverts_without_an_error_name(dev):
    """11-contract.md, "The signature setSessionKeyBySig checks": an answer that does not
    decode as a bytes4 is not caught as BadSignature; the call reverts with no error name.
    The same account shape answering a full word with the magic value authorizes, so what
    the refusals pin is the reply's length and nothing else."""
    key = dev.actor()
    expiry, deadline = dev.now() + 86400, dev.now() + 300
    signature = b"\x01" * 65
    for runtime in (_TWO_BYTES, _SILENT):
        owner = _owner_with_code(dev, runtime)
        call = dev.anchor.encode_set_session_key_by_sig(owner, key.address, expiry, deadline,
                                                        signature)
        err = dev.refused(key, call)
        assert (err.error, err.fields) == ("reverted", {}), runtime.hex()
        assert dev.mined(key, call)["status"] == 0
        assert dev.anchor.auth_nonce(owner) == 0
        assert dev.anchor.session_key_expiry(owner, key.address) == 0
    owner = _owner_with_code(dev, _MAGIC_WORD)
    dev.send(key, dev.anchor.encode_set_session_key_by_sig(owner, key.address, expiry,
                                                           deadline, signature))
    assert dev.anchor.session_key_expiry(owner, key.address) == expiry
    assert dev.anchor.auth_nonce(owner) == 1


def test_a_signature_that_recovers_to_no_one_never_speaks_for_the_zero_address(dev):
    """ecrecover answers the zero address for a signature it cannot recover; the contract
    must never read that as the owner address(0) having signed (11-contract.md, "No code":
    ecrecover must return the owner and never the zero address)."""
    key = dev.actor()
    zero = "0x" + "00" * 20
    expiry, deadline = dev.now() + 86400, dev.now() + 300
    for v in (27, 28):
        unrecoverable = bytes(32) + (1).to_bytes(32, "big") + bytes([v])  # r = 0
        err = dev.refused(key, dev.anchor.encode_set_session_key_by_sig(
            zero, key.address, expiry, deadline, unrecoverable))
        assert err.error == "BadSignature"
    assert dev.anchor.auth_nonce(zero) == 0
    assert not dev.anchor.can_write(zero, key.address)


# --- startSeq -------------------------------------------------------------------------------


def test_start_seq_is_monotone_per_owner_and_space(dev):
    owner, space = dev.actor(), _space()
    assert dev.anchor.start_seq(owner.address, space) == 0
    r = dev.send(owner, dev.anchor.encode_set_start_seq(space, 5))
    (log,) = r["logs"]
    assert "0x" + bytes(log["topics"][0]).hex() == TOPICS["StartSeqSet(address,bytes32,uint64)"]
    assert bytes(log["topics"][2]).hex() == space
    dev.send(owner, dev.anchor.encode_set_start_seq(space, 5))  # the same value again is fine
    err = dev.refused(owner, dev.anchor.encode_set_start_seq(space, 4))
    assert (err.error, err.fields, str(err)) == ("SeqNotMonotone", {}, "SeqNotMonotone")
    dev.send(owner, dev.anchor.encode_set_start_seq(space, 7))
    assert dev.anchor.start_seq(owner.address, space) == 7
    assert dev.anchor.start_seq(owner.address, _space()) == 0
    # It is a hint and nothing more: push ignores it.
    dev.send(owner, dev.anchor.encode_push(owner.address, space, ZERO_DIGEST, b"seq 1"))
    assert dev.anchor.head(owner.address, space).seq == 1


# --- connect's walk back to a header that parses --------------------------------------------



def _push_chain(dev: Dev, owner: LocalAccount, space: str, blobs: list[bytes]) -> list[Any]:
    """Anchor `blobs` in order as owner's epochs in `space`; their receipts."""
    receipts, prev = [], dev.anchor.head(owner.address, space).digest
    for blob in blobs:
        receipts.append(dev.send(owner, dev.anchor.encode_push(owner.address, space, prev, blob)))
        prev = keccak(blob).hex()
    return receipts


def test_connect_looks_at_the_head_and_the_31_epochs_before_it(dev, caplog):
    """v0.3.0's connect and rekey take the wraps from the newest epoch whose header parses,
    looking at 32 epochs at most, the head included (12-kint-core.md: at most 31 before the
    head). One more epoch that does not parse puts the readable one out of reach."""
    assert HEADER_WALK_EPOCHS == 32
    owner, space = dev.actor(), _space()
    junk = [b"not a kint epoch " + os.urandom(40) + bytes([i]) for i in range(32)]
    (good,) = _push_chain(dev, owner, space, [KINT_BLOB])
    _push_chain(dev, owner, space, junk[:31])
    head = dev.anchor.head(owner.address, space)
    assert head.seq == 32
    with caplog.at_level("WARNING", logger="kint.worker"):
        found = newest_readable_header(dev.anchor, owner.address, space, head,
                                       command="connect")
    assert (found.seq, found.block, found.blob) == (1, good["blockNumber"], KINT_BLOB)
    assert found.header == Header.decode(KINT_BLOB)
    assert (f"connect: using epoch 1 at block {good['blockNumber']}, the newest readable one"
            in caplog.text)

    _push_chain(dev, owner, space, junk[31:])
    head = dev.anchor.head(owner.address, space)
    with pytest.raises(ProtocolError) as info:
        newest_readable_header(dev.anchor, owner.address, space, head, command="connect")
    assert info.value.code is ErrorCode.RPC_UNAVAILABLE
    assert str(info.value) == ("cannot read the head epoch: none of the 32 newest epochs "
                               "(seq 33 down to 2) has a header that parses, and connect "
                               "looks at 32 at most")


def test_a_chain_where_no_epoch_parses_is_refused_in_the_asking_commands_name(dev, caplog):
    """Connect, rekey and recovery-code all walk the headers: the refusal and the log lines
    name the one that asked, not always connect."""
    owner, space = dev.actor(), _space()
    _push_chain(dev, owner, space, [b"\x02 a header from the future " + bytes(80), b"junk"])
    with caplog.at_level("WARNING", logger="kint.worker"), \
            pytest.raises(ProtocolError) as info:
        newest_readable_header(dev.anchor, owner.address, space,
                               dev.anchor.head(owner.address, space), command="rekey")
    assert str(info.value) == ("cannot read the head epoch: none of the 2 newest epochs (seq 2 "
                               "down to 1) has a header that parses, and rekey looks at 32 "
                               "at most")
    # The chain answered every read: the hint must not call it a transport failure (it
    # did, and sent a user whose tenant holds another tool's epochs to retry or change RPC).
    assert "transport" not in info.value.hint and "--over-skipped" in info.value.hint, \
        info.value.hint
    assert info.value.hint.startswith("the chain answered: those epochs are none of them an "
                                      "envelope this kint reads (another tool, a newer kint")
    assert "rekey: the head epoch 2 at block" in caplog.text
    assert "connect" not in caplog.text


@pytest.mark.parametrize("fault", ["calldata-altered", "tx-not-served", "tx-transport",
                                   "no-event"])
def test_the_header_walk_never_steps_past_an_epoch_it_could_not_fetch(dev, fault, monkeypatch,
                                                                      caplog):
    """The walk steps over a header that does not parse and nothing else: a head whose
    calldata the RPC will not serve, or serves altered, or whose Epoch event the RPC does not
    return, stops it where it is (frontend-contract.md section 6, item 7; 06-epochs.md, "An
    epoch nobody can open"). Epoch 1 below is a readable kint epoch and epoch 2 is junk, so
    a walk that stepped past the fault would come back with epoch 1."""
    owner, space = dev.actor(), _space()
    _push_chain(dev, owner, space, [KINT_BLOB, b"not a kint epoch " + os.urandom(40)])
    anchor = Anchor(dev.anchor.config, RpcTracker())
    head = anchor.head(owner.address, space)
    assert newest_readable_header(anchor, owner.address, space, head,
                                  command="connect").seq == 1
    real_tx, eth = anchor.w3.eth.get_transaction, anchor.w3.eth

    def served(tx_hash: Any) -> Any:
        tx = real_tx(tx_hash)
        if fault == "calldata-altered":
            data = bytearray(bytes(tx["input"]))
            data[4 + 5 * 32] ^= 1  # ct's first byte, after four head words and its length
            return {**tx, "input": bytes(data)}
        if fault == "tx-not-served":
            raise TransactionNotFound(f"transaction {tx_hash} not found")
        raise requests.exceptions.ConnectionError("the endpoint hung up")

    if fault == "no-event":
        monkeypatch.setattr(eth, "get_logs", lambda query: [])
    else:
        monkeypatch.setattr(eth, "get_transaction", served)
    caplog.clear()
    with caplog.at_level("WARNING", logger="kint.worker"), pytest.raises(ProtocolError) as info:
        newest_readable_header(anchor, owner.address, space, head, command="connect")
    err = info.value
    if fault == "calldata-altered":
        assert err.code is ErrorCode.STALE_RPC
        assert str(err) == "ciphertext digest does not match the Epoch event"
    elif fault == "tx-not-served":
        assert err.code is ErrorCode.STALE_RPC and "is not served by the RPC" in str(err)
    elif fault == "tx-transport":
        assert err.code is ErrorCode.RPC_UNAVAILABLE
        assert str(err).startswith("cannot fetch the calldata of epoch 2: ")
    else:
        assert err.code is ErrorCode.RPC_UNAVAILABLE
        assert str(err) == (f"cannot read the head epoch: no Epoch event for seq 2 at block "
                            f"{head.block}; the RPC may be pruned or lying")
    assert "using epoch 1" not in caplog.text and "not a readable kint epoch" not in caplog.text


# --- revert decoding ------------------------------------------------------------------------


def test_decode_revert_names_every_error(dev):
    decode = dev.anchor.decode_revert
    for sig, selector in ERRORS.items():
        name = sig.split("(")[0]
        if name == "StaleHead":
            continue
        assert decode(selector).error == name
    a, b = "11" * 32, "22" * 32
    got = decode(bytes.fromhex(ERRORS["StaleHead(bytes32,bytes32)"][2:] + a + b))
    assert (got.error, got.fields) == ("StaleHead", {"expected": a, "got": b})
    assert decode("0xdeadbeef").error == "reverted" and decode(None).error == "reverted"


def test_a_revert_at_send_time_becomes_the_push_refusal_it_names(dev):
    """11-contract.md: every send is estimated first, so a push the chain would revert
    fails before it costs gas: StaleHead as the chain having moved (another machine pushed
    between the head read and the send), NotAuthorized as this machine's key not being
    authorized, and anything else as `transaction would revert: ...`; each says nothing
    was dropped."""
    from kint.tenant_worker.push_refusals import refused

    a, b = "11" * 32, "22" * 32
    stale = refused(dev.anchor.decode_revert(bytes.fromhex(
        ERRORS["StaleHead(bytes32,bytes32)"][2:] + a + b)))
    assert stale.code is ErrorCode.CHAIN_MOVED
    assert str(stale).startswith(f"the chain refused the epoch (StaleHead(expected={a}, "
                                 f"got={b})): another machine pushed first; ")
    unauthorized = refused(dev.anchor.decode_revert(ERRORS["NotAuthorized()"]))
    assert unauthorized.code is ErrorCode.NOT_CONNECTED
    assert "session key is not authorized for the owner" in str(unauthorized)
    for raw in (ERRORS["EmptyCiphertext()"], "0xdeadbeef"):
        other = refused(dev.anchor.decode_revert(raw))
        assert other.code is ErrorCode.INTERNAL
        assert str(other).startswith("transaction would revert: ")
    for err in (stale, unauthorized, other):
        assert "nothing was dropped" in str(err) + str(err.hint)


def test_views_read_the_same_values_without_building_web3(dev):
    """A view (verify's head read among them) is one eth_call encoded from the ABI and sent
    through the tracked provider: web3's contract and middleware layers are built only for
    logs and transactions. Running them for each head read made a worker that only verifies
    ~4 MiB larger (issue 15; bench/bench_memory.py, the restarted connected worker). Every
    view gives what web3's own contract call gives, after real state changes."""
    owner, key, space = dev.actor(), dev.actor(0), _space()
    r = dev.send(owner, dev.anchor.encode_push(owner.address, space, ZERO_DIGEST, b"\x01ct"))
    dev.send(owner, dev.anchor.encode_set_start_seq(space, 1))
    expiry = dev.now() + 3600
    dev.send(owner, dev.anchor.encode_set_session_key(key.address, expiry))

    fresh = Anchor(dev.anchor.config, RpcTracker())
    space_b = bytes.fromhex(space)
    web3_views = dev.w3.eth.contract(address=dev.anchor.address,
                                     abi=epoch_anchor_artifact()["abi"]).functions
    digest, seq, block = web3_views.head(owner.address, space_b).call()
    assert fresh.head(owner.address, space) == Head(bytes(digest).hex(), seq, block)
    assert (seq, block) == (1, r["blockNumber"])
    assert fresh.can_write(owner.address, key.address) is True
    assert fresh.can_write(owner.address, dev.actor(0).address) is False
    assert fresh.session_key_expiry(owner.address, key.address) == expiry == \
        web3_views.sessionKeyExpiry(owner.address, key.address).call()
    assert fresh.auth_nonce(owner.address) == web3_views.authNonce(owner.address).call()
    assert fresh.start_seq(owner.address, space) == 1
    assert fresh.domain_separator() == bytes(web3_views.DOMAIN_SEPARATOR().call()).hex()
    assert fresh.authorization_digest(owner.address, key.address, expiry, 0, 99) == bytes(
        web3_views.authorizationDigest(owner.address, key.address, expiry, 0, 99).call()).hex()
    # None of it built web3 on this Anchor.
    assert "w3" not in vars(fresh) and "contract" not in vars(fresh), sorted(vars(fresh))
