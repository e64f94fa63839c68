"""A push interrupted after it signed, then `kint session-key rotate`, then the journal
settled (kint/tenant_worker/former_key.py): the journal is the old key's transaction, so its
nonce, its receipt and any replacement are the old key's, never the new one's.

One anvil for the session. Per test a fresh machine A with the crash points and the
settlement hold of tests/support/kint_test_faults.py preloaded (its first push's key is the
"old" one), and for the cases where another machine takes the journal's seq, machine B on
the same space. The rotate is kint's own (`rotate_session_key`, what `kint session-key
rotate` runs) called in this process under A's environment at the tests' scrypt cost, as
chain_machines.make_session_key writes the first key; the new key is authorized and funded
by the owner as `kint authorize direct` would. Transactions the new key sends meanwhile
(another space's pushes on a real machine) are transfers to itself signed here. Nothing
leaves 127.0.0.1.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path
from unittest import mock

import pytest
from web3 import Web3
from web3.exceptions import TransactionNotFound

from chain_machines import (SESSION_SCRYPT_N, authorize_machine, devchain_anchor, jdb, kdb,
                            new_machine, owner_account, wallet_signature)
from conftest import write_rules as write
from kint.chain.artifact import load_artifact
from kint.chain.config import devchain_record
from kint.commands.exit_codes import CHAIN_MOVED as CHAIN_MOVED_EXIT
from kint.commands.exit_codes import PUSH_PULL_REFUSED
from kint.custody.session_key import rotate_session_key, session_address, unlock_session_key
from kint.custody.vault_message import canonical_payload
from kint.spaces import space_id as space_id_of


@pytest.fixture
def box(tmp_path, chain_home):
    yield from make_box(tmp_path, chain_home)


def make_box(tmp_path: Path, chain_home: Path, retry_s: str = "1", **env: str):
    """Machine A (`retry_s`: its KINT_NONCE_RETRY_SECONDS; `env`: more of its environment),
    its crash points and hold, and the chain read directly; B is made by the test that
    needs it, and both are stopped."""
    flag, hold = tmp_path / "crash.flag", tmp_path / "hold-settlement"
    record = json.loads(devchain_record(chain_home).read_text())
    w3 = Web3(Web3.HTTPProvider(record["rpc_url"], request_kwargs={"timeout": 10}))
    contract = w3.eth.contract(address=Web3.to_checksum_address(record["anchor"]),
                               abi=load_artifact()["abi"])
    a = new_machine(tmp_path / "a", chain_home, KINT_TEST_CRASH_FLAG=str(flag),
                    KINT_TEST_HOLD_SETTLE=str(hold), KINT_NONCE_RETRY_SECONDS=retry_s, **env)
    made = {"a": a, "flag": flag, "hold": hold, "home": chain_home, "w3": w3,
            "contract": contract, "root": tmp_path}
    try:
        yield made
    finally:
        hold.unlink(missing_ok=True)
        for machine in ("a", "b"):
            if machine in made:
                made[machine].shutdown()


class Space:
    """A's space: connected, its first epoch pushed by A's first key."""

    def __init__(self, box: dict, profile: str, *connect: str) -> None:
        """`connect`: more `kint connect --dev` arguments (`--rpc-urls`)."""
        self.box, self.a, self.w3 = box, box["a"], box["w3"]
        self.db = self.a.profile_db(profile)
        self.profile = profile
        write(self.db, self.a.tenant, first="anchored before the kill")
        connected = jdb(self.a, self.db, "connect", "--dev", *connect)
        self.space16, self.owner = connected["space"], connected["owner"]
        self.sid = bytes.fromhex(space_id_of(self.a.label(self.db)))
        assert jdb(self.a, self.db, "push")["epochs"][-1]["seq"] == 1
        self.pending = self.a.kint_home / f"pending-{self.space16}.json"
        self.old = session_address(self.a.kint_home)

    def kill(self, step: str) -> dict:
        """A's push of a second rule killed at `step`, the restarted worker's settlement
        held until `release`: the journal it left."""
        write(self.db, self.a.tenant, second=f"in the push killed at {step}")
        self.box["hold"].write_text("held")
        self.box["flag"].write_text(f"{step} {self.space16}")
        out = kdb(self.a, self.db, "push")
        assert out.returncode == PUSH_PULL_REFUSED and "[WORKER_DOWN]" in out.stderr, \
            out.stdout + out.stderr
        assert not self.box["flag"].exists(), "the worker did not reach the step"
        journal = json.loads(self.pending.read_text())
        assert journal["sender"] == self.old
        return journal

    def rotate(self, *, authorize: bool = True) -> str:
        """`kint session-key rotate` on A; the new key authorized and funded by the owner."""
        with mock.patch.dict(os.environ, self.a.env, clear=True):
            _, new = rotate_session_key(self.a.kint_home, scrypt_n=SESSION_SCRYPT_N)
        if authorize:
            authorize_machine(self.box["home"], owner_account(self.a, self.owner), new)
        return new

    def key(self, old: bool = False):
        with mock.patch.dict(os.environ, self.a.env, clear=True):
            return unlock_session_key(self.a.kint_home, old=old)

    def release(self) -> None:
        self.box["hold"].unlink(missing_ok=True)

    def settled(self) -> None:
        """The restarted worker's own settlement, once released, done."""
        self.release()
        self.a.wait_for(lambda: not self.pending.exists(), timeout=60,
                        what="the held settlement")

    def chain_head(self) -> tuple[int, str, int]:
        digest, seq, block = self.box["contract"].functions.head(
            Web3.to_checksum_address(self.owner), self.sid).call()
        return int(seq), bytes(digest).hex(), int(block)

    def mirror_head(self) -> tuple[int, str]:
        held = json.loads(gzip.decompress(
            (self.a.kint_home / f"mirror-{self.space16}.json.gz").read_bytes()))
        return held["head"]["seq"], held["head"]["digest"]

    def anchored(self) -> set[str]:
        """The entity names the mirror holds as anchored."""
        held = json.loads(gzip.decompress(
            (self.a.kint_home / f"mirror-{self.space16}.json.gz").read_bytes()))
        return {cid.split("\x00")[2] for cid in held["ids"] if cid.startswith("entity\x00")}

    def meta(self, seq: int) -> dict:
        return json.loads((self.a.kint_home / "epochs" / self.space16 /
                           f"{seq:08d}.meta.json").read_text())

    def spend(self, account, count: int) -> None:
        """`account` sends transfers to itself until the chain counts `count` of its
        transactions (another space's pushes would, on a real machine). Each transfer's
        receipt is waited for before the count is read again: anvil answers a send before it
        has mined it, and a count read in between sent the same nonce twice ("transaction
        already imported", or "nonce too low" at a gas price read anew)."""
        while self.w3.eth.get_transaction_count(account.address) < count:
            sent = self.transfer(account, self.w3.eth.get_transaction_count(account.address))
            self.w3.eth.wait_for_transaction_receipt(sent, timeout=30, poll_latency=0.05)

    def transfer(self, account, nonce: int) -> str:
        signed = account.sign_transaction({"to": account.address, "value": 0, "gas": 21_000,
                                           "nonce": nonce, "chainId": 31337,
                                           "gasPrice": 2 * self.w3.eth.gas_price})
        sent = self.w3.eth.send_raw_transaction(signed.raw_transaction)
        return sent.hex()

    def other_machine_takes_seq_2(self) -> None:
        """Machine B connects to the space (the owner's wallet signing), is authorized, and
        pushes seq 2 before A's journal is settled."""
        b = self.box["b"] = new_machine(self.box["root"] / "b", self.box["home"])
        db = b.profile_db(self.profile)
        owner = owner_account(self.a, self.owner)
        signature = wallet_signature(owner, canonical_payload(self.owner).decode()) + "\n"
        jdb(b, db, "connect", "--owner", self.owner, "--signature", "-", input=signature)
        authorize_machine(self.box["home"], owner, session_address(b.kint_home))
        assert jdb(b, db, "pull")["applied"] == [1]
        write(db, b.tenant, other="anchored by machine B")
        assert jdb(b, db, "push")["epochs"][-1]["seq"] == 2

    def hole(self, address: str) -> tuple[int, Path]:
        """A nonce of `address` held in A's nonce book by a live process and never sent:
        A's next transaction of that key waits at the endpoint behind it."""
        at = self.w3.eth.get_transaction_count(address)
        entry = self.a.kint_home / "nonces" / f"{at:012d}.json"
        entry.write_text(json.dumps({"nonce": at, "address": address.lower(),
                                     "space16": "f" * 16, "pid": os.getpid(),
                                     "allocated_at": time.monotonic()}))
        return at, entry

    def mined_at(self, address: str, nonce: int, since: int) -> dict:
        head = self.w3.eth.block_number
        found = [tx for n in range(since, head + 1)
                 for tx in self.w3.eth.get_block(n, full_transactions=True)["transactions"]
                 if tx["from"] == address and tx["nonce"] == nonce]
        if len(found) != 1:  # once in a full run (not alone): what the chain held, said
            everything = [(n, tx["nonce"], tx["hash"].hex(), tx["to"])
                          for n in range(0, head + 1)
                          for tx in self.w3.eth.get_block(n, full_transactions=True)[
                              "transactions"] if tx["from"] == address]
            pytest.fail(f"{len(found)} transactions of {address} at nonce {nonce} in blocks "
                        f"{since}..{head}; its count {self.w3.eth.get_transaction_count(address)}"
                        f"; all of its mined transactions (block, nonce, hash, to): "
                        f"{everything}")
        return found[0]


def test_a_push_signed_before_a_rotate_is_sent_again_from_its_own_key(box):
    """Killed before its send, then a rotate, and the new key has sent more transactions
    than the old key's nonce: the journal's nonce is read from the old key (not spent), so
    its signed transaction is sent again and epoch 2 is recorded. It was read from the new
    key, taken as spent by another transaction, and the journal dropped."""
    s = Space(box, "resent-after-rotate")
    journal = s.kill("before_send")
    new = s.rotate()
    s.spend(s.key(), journal["nonce"] + 1)
    try:  # doctor names the key the journal waits on
        doctor = kdb(s.a, s.db, "doctor").stdout
        line = next(ln for ln in doctor.splitlines() if "interrupted push" in ln)
        assert f"signed by the previous session key {s.old}" in line, doctor
    finally:
        s.settled()
    assert s.chain_head()[:2] == s.mirror_head() and s.mirror_head()[0] == 2
    sent = s.w3.eth.get_transaction("0x" + s.meta(2)["tx"])
    assert sent["from"] == s.old and sent["nonce"] == journal["nonce"]
    assert s.anchored() == {"first", "second"}
    write(s.db, s.a.tenant, third="written after the settlement")
    third = jdb(s.a, s.db, "push")["epochs"]
    assert [e["seq"] for e in third] == [3]
    assert s.w3.eth.get_transaction(third[0]["tx"])["from"] == new


def test_a_push_of_a_revoked_old_key_is_dropped_and_its_rows_go_with_the_new_key(box):
    """The owner revoked the old key (docs/authorize.md) before the journal was settled:
    its transaction is not sent again (it would revert NotAuthorized and spend the old
    key's gas), the journal is dropped, the push says so naming the old key, and the next
    push anchors its rows signed by the new key. Read from the new key, the nonce was never
    spent: the journal stayed, and every push and pull refused RPC_UNAVAILABLE for ever;
    then, read from the old key, it was sent again and reverted, spending a nonce of the
    revoked key."""
    s = Space(box, "revoked-after-rotate")
    journal = s.kill("before_send")
    new = s.rotate()
    anchor = devchain_anchor(s.box["home"])
    owner = owner_account(s.a, s.owner)
    anchor.transact(owner, anchor.encode_revoke_session_key(s.old))
    assert not anchor.can_write(owner.address, s.old)
    try:
        out = kdb(s.a, s.db, "push")
        assert out.returncode == PUSH_PULL_REFUSED and "[NOT_CONNECTED]" in out.stderr, \
            out.stdout + out.stderr
        assert (f"the interrupted push of epoch 2 was not sent again: the previous session "
                f"key {s.old} (rotated since) is not authorized for owner {s.owner}"
                ) in out.stderr, out.stderr
        assert ("hint: run `kint push` again: it anchors them with this machine's current "
                "session key") in out.stderr, out.stderr
        assert not s.pending.exists()
    finally:
        s.release()
    assert s.mirror_head() == s.chain_head()[:2] and s.mirror_head()[0] == 1
    assert s.w3.eth.get_transaction_count(s.old, "pending") == journal["nonce"]  # not sent
    write(s.db, s.a.tenant, third="written after the settlement")
    pushed = jdb(s.a, s.db, "push")["epochs"]
    assert [e["seq"] for e in pushed] == [2]
    assert s.w3.eth.get_transaction(pushed[0]["tx"])["from"] == new
    assert s.chain_head()[:2] == s.mirror_head()
    assert s.anchored() == {"first", "second", "third"}


def test_a_push_the_old_key_cannot_pay_for_names_that_key(box):
    """The old key holds no ETH when the journal is settled: its re-send is refused and its
    nonce is not spent, so the journal is kept, and the push says whose transaction waits
    and which address to fund (it said "fund the session key", the new one). Funded, the
    next settlement sends it and records it."""
    s = Space(box, "unpaid-after-rotate")
    s.kill("before_send")
    s.rotate()
    balance = s.w3.eth.get_balance(s.old)
    s.w3.provider.make_request("anvil_setBalance", [s.old, "0x0"])
    try:
        out = kdb(s.a, s.db, "push")
        assert out.returncode == PUSH_PULL_REFUSED and "[RPC_UNAVAILABLE]" in out.stderr, \
            out.stdout + out.stderr
        assert (f"the interrupted push of epoch 2 (signed by the previous session key "
                f"{s.old}) is not on the chain and its nonce is not spent") in out.stderr, \
            out.stderr
        assert f"hint: fund {s.old} if the refusal says so" in out.stderr, out.stderr
        assert s.pending.exists()
    finally:
        s.w3.provider.make_request("anvil_setBalance", [s.old, hex(balance)])
        s.settled()
    assert s.chain_head()[:2] == s.mirror_head() and s.mirror_head()[0] == 2
    assert s.w3.eth.get_transaction("0x" + s.meta(2)["tx"])["from"] == s.old


def test_the_new_keys_nonce_book_is_left_alone(box):
    """The same, the new key's count not past the old nonce, and the new key's entry at the
    same nonce number in the machine's book (another space's push, signed, being sent): the
    old key's transaction sent again lands and is recorded, and that entry stays as it was.
    It was marked mined with the old key's hash, so nothing would re-broadcast it and every
    later transaction of the new key waited behind it."""
    s = Space(box, "book-after-rotate")
    journal = s.kill("before_send")
    nonce = journal["nonce"]
    s.rotate()
    key = s.key()
    s.spend(key, nonce)
    signed = key.sign_transaction({"to": key.address, "value": 0, "gas": 21_000,
                                   "nonce": nonce, "chainId": 31337,
                                   "gasPrice": 2 * s.w3.eth.gas_price})
    entry = s.a.kint_home / "nonces" / f"{nonce:012d}.json"
    book = {"nonce": nonce, "address": key.address.lower(), "space16": "f" * 16,
            "pid": os.getpid(), "allocated_at": time.monotonic(),
            "raw": bytes(signed.raw_transaction).hex(), "abandoned": False, "mined": False,
            "tx": None, "block": None}
    entry.write_text(json.dumps(book))
    s.settled()
    assert s.chain_head()[:2] == s.mirror_head() and s.mirror_head()[0] == 2
    assert s.w3.eth.get_transaction("0x" + s.meta(2)["tx"])["from"] == s.old
    assert json.loads(entry.read_text()) == book
    # The new key's next push re-broadcasts that entry (its slow path) and lands after it.
    write(s.db, s.a.tenant, third="written after the settlement")
    assert [e["seq"] for e in jdb(s.a, s.db, "push")["epochs"]] == [3]
    assert s.w3.eth.get_transaction_receipt(signed.hash)["status"] == 1


def _waiting_behind_hole(box, profile: str) -> tuple[Space, int, Path, bytes, int]:
    """A's push sent and waiting at the endpoint behind a hole of the old key: (space, the
    hole, its book entry, the waiting transaction's hash, a block from before)."""
    s = Space(box, profile)
    since = s.w3.eth.block_number
    hole, entry = s.hole(s.old)
    journal = s.kill("after_send")
    assert journal["nonce"] == hole + 1
    waiting = Web3.keccak(hexstr=journal["raw_tx"])
    assert s.w3.eth.get_transaction(waiting)["blockNumber"] is None
    return s, hole, entry, waiting, since


def _waiting_push_overtaken(box, profile: str) -> tuple[Space, int, Path, bytes, int]:
    """The same, then B takes seq 2."""
    s, hole, entry, waiting, since = _waiting_behind_hole(box, profile)
    s.other_machine_takes_seq_2()
    return s, hole, entry, waiting, since


def _fill_hole(s: Space, old_key, hole: int, entry: Path) -> None:
    entry.unlink(missing_ok=True)
    s.transfer(old_key, hole)
    s.a.wait_for(lambda: s.w3.eth.get_transaction_count(s.old) == hole + 2, timeout=30,
                 what="the hole and the nonce after it mined")


def test_a_dropped_push_of_the_old_key_is_replaced_by_the_old_key(box):
    """The journal dropped (another machine's epoch holds its seq) while its transaction
    waits at the endpoint: session.key.old is the key that signed it, so the replacement
    (a transfer to self at its nonce) is signed by it. It was signed by the new key at the
    old key's nonce: a transaction of the new key stuck behind its own gap, while the push
    waited on to revert."""
    s, hole, entry, waiting, since = _waiting_push_overtaken(box, "replaced-after-rotate")
    new = s.rotate()
    try:
        out = kdb(s.a, s.db, "push")
        assert out.returncode == CHAIN_MOVED_EXIT and "[CHAIN_MOVED]" in out.stderr, out.stderr
        assert "was replaced by a transfer to self at its nonce" in out.stderr, out.stderr
        assert not s.pending.exists()
    finally:
        s.release()
    assert s.w3.eth.get_transaction_count(new, "pending") == 0  # nothing sent from the new key
    _fill_hole(s, s.key(old=True), hole, entry)
    replaced = s.mined_at(s.old, hole + 1, since)
    assert (replaced["to"], replaced["value"], replaced["gas"]) == (s.old, 0, 21_000)
    with pytest.raises(TransactionNotFound):
        s.w3.eth.get_transaction_receipt(waiting)


def test_a_dropped_push_whose_key_is_gone_is_left_to_the_chain_and_named(box):
    """The same after two rotates: session.key.old is the middle key, the one that signed
    the journal is not here any more. Nothing is signed for it; the push says the
    transaction waits from that address and will revert. It was replaced by a transfer of
    the current key at the old key's nonce, and the push said it was replaced."""
    s, hole, entry, waiting, since = _waiting_push_overtaken(box, "gone-after-rotate")
    old_key = s.key()
    s.rotate(authorize=False)
    current = s.rotate()
    try:
        out = kdb(s.a, s.db, "push")
        assert out.returncode == CHAIN_MOVED_EXIT and "[CHAIN_MOVED]" in out.stderr, out.stderr
        assert (f"its transaction is still waiting at the endpoint, from the previous "
                f"session key {s.old}, which this machine can no longer open") in out.stderr, \
            out.stderr
        assert "replaced" not in out.stderr, out.stderr
        assert not s.pending.exists()
    finally:
        s.release()
    assert s.w3.eth.get_transaction_count(current, "pending") == 0
    _fill_hole(s, old_key, hole, entry)
    assert s.w3.eth.get_transaction_receipt(waiting)["status"] == 0  # it reverted, as said


def test_a_hole_below_the_old_keys_push_is_filled_by_the_old_key(box):
    """A's push sent and waiting behind a nonce of the old key that nothing sent (another
    space's push killed after it took the nonce), then a rotate, whose first allocation
    deletes the old key's entries from the nonce book: the settlement's receipt wait fills
    the hole with a transfer to self signed by session.key.old, and the push lands and is
    recorded. Nothing filled it: the wait ran out its 60 s and failed, at every push and
    pull, for ever."""
    s, hole, entry, waiting, since = _waiting_behind_hole(box, "hole-filled-after-rotate")
    new = s.rotate()
    entry.unlink()  # as the new key's first allocation does
    s.settled()
    assert s.chain_head()[:2] == s.mirror_head() and s.mirror_head()[0] == 2
    assert "0x" + s.meta(2)["tx"] == waiting.to_0x_hex()
    filled = s.mined_at(s.old, hole, since)
    assert (filled["to"], filled["value"], filled["gas"]) == (s.old, 0, 21_000)
    assert s.w3.eth.get_transaction_count(new, "pending") == 0  # nothing from the new key
    write(s.db, s.a.tenant, third="written after the settlement")
    assert [e["seq"] for e in jdb(s.a, s.db, "push")["epochs"]] == [3]


@pytest.mark.parametrize("remedy", ["keystore", "transfer", "aside"])
def test_a_hole_below_the_old_keys_push_that_no_key_here_can_fill_is_named_at_once(box,
                                                                                  remedy):
    """The same after two rotates: session.key.old is the middle key, and the one whose
    nonce is missing is not here. Push and pull refuse at once, naming the address, the
    missing nonce and what to do, and keep the journal; the receipt wait ran out its 60 s
    at each of them and said only that no receipt came. Each way the hint gives works: the
    keystore put back as session.key.old (the settlement fills the hole), a transaction
    from that key at the nonce (the push lands), or the journal moved out of KINT_HOME
    (its rows go with the current key)."""
    s, hole, entry, waiting, since = _waiting_behind_hole(box, f"hole-{remedy}-after-rotate")
    old_key = s.key()
    keystore = (s.a.kint_home / "session.key").read_bytes()
    s.rotate(authorize=False)
    current = s.rotate()
    entry.unlink()
    try:
        for command in ("push", "pull"):
            out = kdb(s.a, s.db, command)
            assert out.returncode == PUSH_PULL_REFUSED and "[RPC_UNAVAILABLE]" in out.stderr, \
                out.stdout + out.stderr
            assert (f"nonce {hole + 1} of the previous session key {s.old}, cannot be mined: "
                    f"nonce {hole} of that key was never sent, and this machine can no longer "
                    f"open that key") in out.stderr, out.stderr
            assert ("put that key's keystore back as session.key.old under KINT_HOME and "
                    "run `kint pull`") in out.stderr, out.stderr
            assert f"send any transaction from {s.old} at nonce {hole}" in out.stderr, \
                out.stderr
            assert f"move pending-{s.space16}.json out of KINT_HOME" in out.stderr, out.stderr
        assert s.pending.exists()
        if remedy == "keystore":
            old_file = s.a.kint_home / "session.key.old"
            old_file.unlink()
            old_file.write_bytes(keystore)
            old_file.chmod(0o600)
            jdb(s.a, s.db, "pull")
            assert not s.pending.exists()
            filled = s.mined_at(s.old, hole, since)
            assert (filled["to"], filled["value"], filled["gas"]) == (s.old, 0, 21_000)
        elif remedy == "transfer":
            s.transfer(old_key, hole)
        else:
            s.pending.rename(s.box["root"] / s.pending.name)
            jdb(s.a, s.db, "pull")
    finally:
        s.release()
    write(s.db, s.a.tenant, third="written after the hole")

    def past_the_settlement():
        """The push, once the settlement the release let go has let go of the head lock
        (after the transfer nothing waited for it, and a push meanwhile was BUSY)."""
        out = kdb(s.a, s.db, "push", "--json")
        return None if '"error": "BUSY"' in out.stdout else out

    out = s.a.wait_for(past_the_settlement, timeout=60, interval=0.5, what="the push")
    assert out.returncode == 0, out.stdout + out.stderr
    pushed = json.loads(out.stdout)["epochs"]
    assert s.chain_head()[:2] == s.mirror_head()
    assert s.anchored() == {"first", "second", "third"}
    if remedy == "aside":  # the second rule went with the current key, in one epoch
        assert [e["seq"] for e in pushed] == [2]
        assert s.w3.eth.get_transaction(pushed[0]["tx"])["from"] == current
    else:
        assert [e["seq"] for e in pushed] == [3]
        assert "0x" + s.meta(2)["tx"] == waiting.to_0x_hex()


@pytest.mark.parametrize("rotates", [1, 2])
def test_a_hole_that_another_spaces_journal_holds_is_sent_from_that_journal(box, rotates):
    """Two spaces of one machine: X's push killed after it took the old key's nonce N-1 and
    signed, before it sent; Y's push, at N, sent and killed waiting behind it. Then one
    rotate (session.key.old opens) or two (it does not), and the old key's book entries
    gone with the new key's first allocation. Y's push, X's settlement still held, sends
    X's signed push from X's journal at N-1 (no key needed), so both epochs land, X's
    recorded by X's own settlement. With one rotate, N-1 was filled by a transfer and X's
    epoch dropped; with two, Y refused, naming N-1 as never sent."""
    x = Space(box, f"journal-hole-x-{rotates}")
    y = Space(box, f"journal-hole-y-{rotates}")
    held = x.kill("before_send")
    waiting = y.kill("after_send")
    assert waiting["nonce"] == held["nonce"] + 1
    assert x.w3.eth.get_transaction_count(x.old, "pending") == held["nonce"]
    for _ in range(rotates - 1):
        y.rotate(authorize=False)
    new = y.rotate()
    for entry in (x.a.kint_home / "nonces").glob("*.json"):
        entry.unlink()  # as the new key's first allocation does
    try:
        write(y.db, y.a.tenant, third="written after the rotate")
        pushed = jdb(y.a, y.db, "push")["epochs"]
        assert [e["seq"] for e in pushed] == [3]
        assert y.w3.eth.get_transaction(pushed[0]["tx"])["from"] == new
        assert y.meta(2)["tx"] == Web3.keccak(hexstr=waiting["raw_tx"]).hex().removeprefix("0x")
        assert x.chain_head()[0] == 2 and x.pending.exists()  # landed, X not yet settled
    finally:
        x.release()
    x.settled()
    assert x.chain_head()[:2] == x.mirror_head() and x.mirror_head()[0] == 2
    assert x.meta(2)["tx"] == Web3.keccak(hexstr=held["raw_tx"]).hex().removeprefix("0x")
    assert x.anchored() == {"first", "second"}
