"""EpochAnchor: the committed artifact is what the pinned solc makes of the source, and the
contract, deployed from that artifact on a real anvil (127.0.0.1 only), enforces the hash
chain and the owner -> session key -> writer rights of DESIGN section 7."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from eth_abi import decode as abi_decode
from eth_account import Account
from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.exceptions import ContractCustomError

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "contracts" / "EpochAnchor.sol"
ARTIFACT = ROOT / "contracts" / "EpochAnchor.json"
ANVIL = ROOT / "node_modules" / "@foundry-rs" / "anvil-linux-amd64" / "bin" / "anvil"
CHAIN_ID = 31337
ZERO = b"\x00" * 32
ARTIFACT_KEYS = ["abi", "bytecode", "deployedBytecode", "compiler", "evmVersion", "optimizer",
                 "source_sha256"]


def _key(label: str) -> LocalAccount:
    """A fixed throwaway key (never anvil's), so the test's actors are stable."""
    return Account.from_key(Web3.keccak(text=f"kint test_contract {label}"))


SESSION = _key("session key")
SESSION_2 = _key("second session key")
WRITER = _key("writer")
STRANGER = _key("stranger")


def _artifact() -> dict:
    return json.loads(ARTIFACT.read_text())


# --- the artifact --------------------------------------------------------------------------


def test_artifact_matches_a_fresh_compile():
    node = shutil.which("node")
    assert node, "node is not on PATH (make node installs the npm tools; node itself is required)"
    out = subprocess.run([node, "contracts/compile.mjs", "--check"], cwd=ROOT, text=True,
                         capture_output=True, timeout=120)
    assert out.returncode == 0, f"stdout:\n{out.stdout}\nstderr:\n{out.stderr}"

    art = _artifact()
    assert list(art) == ARTIFACT_KEYS
    assert art["source_sha256"] == hashlib.sha256(SOURCE.read_bytes()).hexdigest()
    assert art["evmVersion"] == "cancun"
    assert art["optimizer"] == {"enabled": True, "runs": 200}
    assert art["compiler"].startswith("0.8.37+")
    assert art["bytecode"].startswith("0x6080") and art["deployedBytecode"].startswith("0x6080")
    assert ARTIFACT.read_text().endswith("}\n")


# --- a real anvil --------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_anvil(log_path: Path) -> tuple[subprocess.Popen, Web3]:
    """Start anvil on a free loopback port and wait until it answers eth_chainId. A port
    taken between probe and bind makes anvil exit; try another."""
    for _ in range(3):
        port = _free_port()
        log = open(log_path, "ab")
        proc = subprocess.Popen(
            [str(ANVIL), "--host", "127.0.0.1", "--port", str(port), "--chain-id", str(CHAIN_ID),
             "--quiet"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()
        w3 = Web3(Web3.HTTPProvider(f"http://127.0.0.1:{port}", request_kwargs={"timeout": 10}))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if w3.eth.chain_id == CHAIN_ID:
                    return proc, w3
            except Exception:  # noqa: BLE001 - not listening yet
                pass
            time.sleep(0.05)
        _stop(proc)
    raise AssertionError(f"anvil did not come up; its log:\n{log_path.read_text(errors='replace')}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def chain():
    assert ANVIL.is_file(), f"anvil binary missing: {ANVIL} (run make node)"
    tmp = Path(tempfile.mkdtemp(prefix="kint-anvil-"))
    proc, w3 = _start_anvil(tmp / "anvil.log")
    try:
        deployer = w3.eth.accounts[0]  # anvil's first dev account, unlocked
        art = _artifact()
        factory = w3.eth.contract(abi=art["abi"], bytecode=art["bytecode"])
        receipt = w3.eth.wait_for_transaction_receipt(
            factory.constructor().transact({"from": deployer}), timeout=30)
        assert receipt.status == 1
        anchor = w3.eth.contract(address=receipt.contractAddress, abi=art["abi"])
        assert w3.eth.get_code(anchor.address).hex() == art["deployedBytecode"][2:]
        for acct in (SESSION, SESSION_2, WRITER, STRANGER):
            w3.provider.make_request("anvil_setBalance", [acct.address, hex(10**18)])
        yield w3, anchor
    finally:
        _stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def anchor(chain):
    """The deployed contract, with the chain rolled back after each test."""
    w3, contract = chain
    snap = w3.provider.make_request("evm_snapshot", [])["result"]
    yield contract
    assert w3.provider.make_request("evm_revert", [snap])["result"] is True


@pytest.fixture
def w3(chain) -> Web3:
    return chain[0]


def _owner(w3: Web3) -> str:
    return w3.eth.accounts[1]


def _address(sender) -> str:
    return sender.address if isinstance(sender, LocalAccount) else sender


def send(w3: Web3, fn, sender, **tx):
    """Send `fn` from `sender` (an unlocked anvil account or a local key), estimating gas
    as kint will; returns the receipt of a successful transaction."""
    if isinstance(sender, LocalAccount):
        built = fn.build_transaction({"from": sender.address, "chainId": CHAIN_ID,
                                      "nonce": w3.eth.get_transaction_count(sender.address, "pending"),
                                      **tx})
        tx_hash = w3.eth.send_raw_transaction(sender.sign_transaction(built).raw_transaction)
    else:
        tx_hash = fn.transact({"from": sender, **tx})
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30)
    assert receipt.status == 1, receipt
    return receipt


def _error_selectors(abi: list[dict]) -> dict[bytes, tuple[str, list[str]]]:
    out = {}
    for item in abi:
        if item["type"] == "error":
            types = [i["type"] for i in item["inputs"]]
            out[bytes(Web3.keccak(text=f"{item['name']}({','.join(types)})")[:4])] = (item["name"], types)
    return out


def reverts(contract, fn, sender) -> tuple[str, tuple]:
    """The custom error `fn` reverts with when `sender` sends it, decoded from the revert data
    (web3 7 raises ContractCustomError carrying the raw hex data, undecoded), checked through
    both eth_call and eth_estimateGas."""
    seen = []
    for how in (fn.call, fn.estimate_gas):
        with pytest.raises(ContractCustomError) as info:
            how({"from": _address(sender)})
        data = bytes.fromhex(info.value.data.removeprefix("0x"))
        name, types = _error_selectors(contract.abi)[data[:4]]
        args = tuple(Web3.to_checksum_address(v) if t == "address" else v
                     for t, v in zip(types, abi_decode(types, data[4:])))
        seen.append((name, args))
    assert seen[0] == seen[1], seen
    return seen[0]


def _now(w3: Web3) -> int:
    return w3.eth.get_block("latest").timestamp


def _push(contract, owner, space, seq, prev, ct):
    return contract.functions.push(owner, space, seq, prev, ct)


SPACE = Web3.keccak(text="space: team/notes")


# --- the hash chain ------------------------------------------------------------------------


def test_first_push_sets_head_and_emits_epoch(w3, anchor):
    owner = _owner(w3)
    assert anchor.functions.head(owner, SPACE).call() == [0, ZERO, 0]
    ct = b"\x01sealed epoch one" + os.urandom(64)

    receipt = send(w3, _push(anchor, owner, SPACE, 1, ZERO, ct), owner)

    digest = Web3.keccak(ct)
    assert anchor.functions.head(owner, SPACE).call() == [1, digest, receipt.blockNumber]
    (event,) = anchor.events.Epoch().process_receipt(receipt)
    assert dict(event.args) == {"owner": owner, "space": SPACE, "seq": 1, "digest": digest,
                                "prev": ZERO, "prevBlock": 0, "writer": owner}
    # The three indexed topics a reader filters on when it walks back.
    log = receipt.logs[0]
    assert log.topics[1] == bytes(12) + bytes.fromhex(owner[2:])
    assert log.topics[2] == SPACE
    assert int.from_bytes(log.topics[3], "big") == 1
    # The ciphertext is recoverable from the transaction input, and only from there.
    tx = w3.eth.get_transaction(receipt.transactionHash)
    _, args = anchor.decode_function_input(tx.input)
    assert args["ciphertext"] == ct
    # Another owner's or another space's head is untouched.
    assert anchor.functions.head(owner, Web3.keccak(text="other")).call() == [0, ZERO, 0]
    assert anchor.functions.head(w3.eth.accounts[2], SPACE).call() == [0, ZERO, 0]


def test_next_push_must_name_the_head_and_the_next_seq(w3, anchor):
    owner = _owner(w3)
    ct1, ct2 = b"epoch one", b"epoch two"
    first = send(w3, _push(anchor, owner, SPACE, 1, ZERO, ct1), owner)
    d1 = Web3.keccak(ct1)

    wrong_prev = Web3.keccak(text="not the head")
    assert reverts(anchor, _push(anchor, owner, SPACE, 2, wrong_prev, ct2), owner) == (
        "BadPrev", (bytes(d1), bytes(wrong_prev)))
    assert reverts(anchor, _push(anchor, owner, SPACE, 2, ZERO, ct2), owner) == (
        "BadPrev", (bytes(d1), ZERO))
    assert reverts(anchor, _push(anchor, owner, SPACE, 3, d1, ct2), owner) == ("BadSeq", (2, 3))
    assert reverts(anchor, _push(anchor, owner, SPACE, 1, d1, ct2), owner) == ("BadSeq", (2, 1))
    # A fresh space starts at seq 1 after the zero digest.
    other = Web3.keccak(text="fresh")
    assert reverts(anchor, _push(anchor, owner, other, 2, ZERO, ct2), owner) == ("BadSeq", (1, 2))

    second = send(w3, _push(anchor, owner, SPACE, 2, d1, ct2), owner)
    d2 = Web3.keccak(ct2)
    assert anchor.functions.head(owner, SPACE).call() == [2, d2, second.blockNumber]
    (event,) = anchor.events.Epoch().process_receipt(second)
    assert event.args.prev == d1 and event.args.digest == d2
    assert event.args.prevBlock == first.blockNumber
    # Walking back: one exact-block getLogs on prevBlock with all three topics finds epoch 1.
    logs = w3.eth.get_logs({"address": anchor.address, "fromBlock": event.args.prevBlock,
                            "toBlock": event.args.prevBlock,
                            "topics": [anchor.events.Epoch().topic,
                                       "0x" + "00" * 12 + owner[2:].lower(), SPACE.to_0x_hex(),
                                       "0x" + (1).to_bytes(32, "big").hex()]})
    assert len(logs) == 1 and logs[0].transactionHash == first.transactionHash


def test_unauthorized_caller_is_refused(w3, anchor):
    owner = _owner(w3)
    assert anchor.functions.canWrite(owner, owner).call() is True
    assert anchor.functions.canWrite(owner, STRANGER.address).call() is False
    refused = ("NotAuthorized", (owner, STRANGER.address))
    assert reverts(anchor, _push(anchor, owner, SPACE, 1, ZERO, b"x"), STRANGER) == refused
    assert reverts(anchor, anchor.functions.publishWraps(owner, SPACE, b"w"), STRANGER) == refused
    # Only a session key may delegate, not a stranger and not the owner itself.
    assert reverts(anchor, anchor.functions.delegate(owner, STRANGER.address, 2**63), STRANGER) \
        == refused
    assert reverts(anchor, anchor.functions.delegate(owner, WRITER.address, 2**63), owner) == (
        "NotAuthorized", (owner, owner))
    # Mined anyway (gas given, no estimate): the chain itself refuses, not just the simulation.
    fn = _push(anchor, owner, SPACE, 1, ZERO, b"x")
    tx = fn.build_transaction({"from": STRANGER.address, "chainId": CHAIN_ID, "gas": 200_000,
                               "nonce": w3.eth.get_transaction_count(STRANGER.address)})
    receipt = w3.eth.wait_for_transaction_receipt(
        w3.eth.send_raw_transaction(STRANGER.sign_transaction(tx).raw_transaction), timeout=30)
    assert receipt.status == 0
    assert anchor.functions.head(owner, SPACE).call() == [0, ZERO, 0]


# --- session keys and writers --------------------------------------------------------------


def test_session_key_and_its_writer_write_until_the_key_is_revoked(w3, anchor):
    owner = _owner(w3)
    expiry = _now(w3) + 3600
    receipt = send(w3, anchor.functions.authorize(SESSION.address, expiry), owner)
    (event,) = anchor.events.Authorized().process_receipt(receipt)
    assert dict(event.args) == {"owner": owner, "sessionKey": SESSION.address, "expiry": expiry}
    assert anchor.functions.sessionExpiry(owner, SESSION.address).call() == expiry
    assert anchor.functions.canWrite(owner, SESSION.address).call() is True
    # The authorization is the owner's: it grants nothing for another owner.
    assert anchor.functions.canWrite(w3.eth.accounts[2], SESSION.address).call() is False

    ct1 = b"by the session key"
    receipt = send(w3, _push(anchor, owner, SPACE, 1, ZERO, ct1), SESSION)
    (epoch,) = anchor.events.Epoch().process_receipt(receipt)
    assert epoch.args.writer == SESSION.address and epoch.args.owner == owner

    assert anchor.functions.canWrite(owner, WRITER.address).call() is False
    w_expiry = _now(w3) + 7 * 86400  # longer than the key's: the key's still bounds it
    receipt = send(w3, anchor.functions.delegate(owner, WRITER.address, w_expiry), SESSION)
    (event,) = anchor.events.Delegated().process_receipt(receipt)
    assert dict(event.args) == {"owner": owner, "sessionKey": SESSION.address,
                                "writer": WRITER.address, "expiry": w_expiry}
    assert anchor.functions.delegations(owner, WRITER.address).call() == [SESSION.address, w_expiry]
    assert anchor.functions.canWrite(owner, WRITER.address).call() is True

    ct2 = b"by the writer"
    receipt = send(w3, _push(anchor, owner, SPACE, 2, Web3.keccak(ct1), ct2), WRITER)
    (epoch,) = anchor.events.Epoch().process_receipt(receipt)
    assert epoch.args.writer == WRITER.address and epoch.args.seq == 2
    assert anchor.functions.head(owner, SPACE).call()[:2] == [2, Web3.keccak(ct2)]

    # Revoking the session key ends the writer's right too: checked at use, not copied.
    send(w3, anchor.functions.authorize(SESSION.address, 0), owner)
    assert anchor.functions.canWrite(owner, SESSION.address).call() is False
    assert anchor.functions.canWrite(owner, WRITER.address).call() is False
    d2 = Web3.keccak(ct2)
    for who in (SESSION, WRITER):
        assert reverts(anchor, _push(anchor, owner, SPACE, 3, d2, b"late"), who) == (
            "NotAuthorized", (owner, who.address))
    assert reverts(anchor, anchor.functions.delegate(owner, STRANGER.address, w_expiry),
                   SESSION) == ("NotAuthorized", (owner, SESSION.address))
    # The owner still writes.
    send(w3, _push(anchor, owner, SPACE, 3, d2, b"by the owner"), owner)

    # Re-authorizing the key revives the writer whose own expiry has not passed.
    send(w3, anchor.functions.authorize(SESSION.address, _now(w3) + 3600), owner)
    assert anchor.functions.canWrite(owner, WRITER.address).call() is True
    # The session key can revoke its writer with expiry 0.
    send(w3, anchor.functions.delegate(owner, WRITER.address, 0), SESSION)
    assert anchor.functions.canWrite(owner, WRITER.address).call() is False
    assert anchor.functions.canWrite(owner, SESSION.address).call() is True


def test_expiry_in_the_past_grants_nothing(w3, anchor):
    owner = _owner(w3)
    now = _now(w3)
    send(w3, anchor.functions.authorize(SESSION.address, now - 1), owner)
    assert anchor.functions.canWrite(owner, SESSION.address).call() is False
    assert reverts(anchor, _push(anchor, owner, SPACE, 1, ZERO, b"x"), SESSION) == (
        "NotAuthorized", (owner, SESSION.address))
    assert reverts(anchor, anchor.functions.delegate(owner, WRITER.address, now + 3600),
                   SESSION) == ("NotAuthorized", (owner, SESSION.address))

    # A valid key delegating with a past expiry grants nothing either.
    send(w3, anchor.functions.authorize(SESSION_2.address, now + 3600), owner)
    send(w3, anchor.functions.delegate(owner, WRITER.address, now - 1), SESSION_2)
    assert anchor.functions.canWrite(owner, WRITER.address).call() is False
    assert reverts(anchor, _push(anchor, owner, SPACE, 1, ZERO, b"x"), WRITER) == (
        "NotAuthorized", (owner, WRITER.address))


def test_rights_lapse_when_time_passes_the_session_keys_expiry(w3, anchor):
    owner = _owner(w3)
    now = _now(w3)
    send(w3, anchor.functions.authorize(SESSION.address, now + 100), owner)
    send(w3, anchor.functions.delegate(owner, WRITER.address, now + 10**6), SESSION)
    assert anchor.functions.canWrite(owner, WRITER.address).call() is True

    w3.provider.make_request("evm_increaseTime", [200])
    w3.provider.make_request("evm_mine", [])
    assert _now(w3) > now + 100
    assert anchor.functions.canWrite(owner, SESSION.address).call() is False
    assert anchor.functions.canWrite(owner, WRITER.address).call() is False
    assert reverts(anchor, _push(anchor, owner, SPACE, 1, ZERO, b"x"), WRITER) == (
        "NotAuthorized", (owner, WRITER.address))


# --- wraps ---------------------------------------------------------------------------------


def test_publish_wraps_counts_versions_and_keeps_the_latest_block(w3, anchor):
    owner = _owner(w3)
    assert anchor.functions.wraps(owner, SPACE).call() == [0, 0]

    blob1 = b"wraps v1 " + os.urandom(96)
    r1 = send(w3, anchor.functions.publishWraps(owner, SPACE, blob1), owner)
    (event,) = anchor.events.Wraps().process_receipt(r1)
    assert dict(event.args) == {"owner": owner, "space": SPACE, "version": 1, "blob": blob1}
    assert anchor.functions.wraps(owner, SPACE).call() == [1, r1.blockNumber]

    send(w3, anchor.functions.authorize(SESSION.address, _now(w3) + 3600), owner)
    blob2 = b"wraps v2 " + os.urandom(96)
    r2 = send(w3, anchor.functions.publishWraps(owner, SPACE, blob2), SESSION)
    (event,) = anchor.events.Wraps().process_receipt(r2)
    assert dict(event.args) == {"owner": owner, "space": SPACE, "version": 2, "blob": blob2}
    assert r2.blockNumber > r1.blockNumber
    assert anchor.functions.wraps(owner, SPACE).call() == [2, r2.blockNumber]
    # Per (owner, space).
    assert anchor.functions.wraps(owner, Web3.keccak(text="other")).call() == [0, 0]


# --- what a push costs ---------------------------------------------------------------------


def _calldata_gas(data: bytes) -> tuple[int, int]:
    """(standard intrinsic gas, EIP-7623 floor) of a plain call carrying `data`."""
    zeros = data.count(0)
    nonzero = len(data) - zeros
    return 21_000 + 4 * zeros + 16 * nonzero, 21_000 + 10 * (zeros + 4 * nonzero)


def test_push_gas_for_1000_bytes(w3, anchor):
    """Measured, printed, not asserted (run with -s to see it): DESIGN says a push costs
    about 21,000 + 40 gas per calldata byte."""
    owner = _owner(w3)
    prev, rows = ZERO, []
    for seq, size in ((1, 1000), (2, 1000), (3, 2000)):
        ct = os.urandom(size)
        fn = _push(anchor, owner, SPACE, seq, prev, ct)
        estimate = fn.estimate_gas({"from": owner})
        receipt = send(w3, fn, owner)
        data = bytes(w3.eth.get_transaction(receipt.transactionHash).input)
        standard, floor = _calldata_gas(data)
        rows.append((seq, size, len(data), estimate, receipt.gasUsed, standard, floor))
        prev = Web3.keccak(ct)
    print()
    print("push gas (anvil default hardfork):")
    for seq, size, calldata, estimate, used, standard, floor in rows:
        print(f"  seq {seq}: ciphertext {size} B, calldata {calldata} B: gasUsed {used}, "
              f"estimate {estimate}, intrinsic {standard}, 7623 floor {floor}, "
              f"(used-21000)/calldata = {(used - 21_000) / calldata:.1f}")
    marginal = (rows[2][4] - rows[1][4]) / (rows[2][2] - rows[1][2])
    print(f"  marginal gas per extra ciphertext byte (seq 3 vs seq 2): {marginal:.1f}")
    assert all(row[4] > 21_000 for row in rows)
