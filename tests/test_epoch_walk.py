"""An epoch's place in the chain: what the pull's walk (kint/tenant_worker/epoch_walk.py),
the recording of an epoch (statefiles.record_epoch) and a push's read-back of its own
Epoch event (pending.record_landed) refuse, as v0.3.0's readers and writer must, on real
epochs anchored on the session's devchain (a real anvil on 127.0.0.1).

06-epochs.md, "The Epoch event and the prevBlock walk": one exact-block query per epoch,
the event with the wanted seq, its digest the one the next epoch chains on, the calldata
checked against the event, then the epoch opened; a missing hop stops the walk with
v0.3.0's words. The epochs are v0.3.0's vector plaintexts sealed by kint for a fresh
owner, so nothing here meets another module's heads; the malformed ones are a version byte
from the future, a ciphertext padded by one byte, and an epoch sealed for another place in
the chain.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_hash.auto import keccak

from anchoring import resealed
from kint.chain import devchain
from kint.chain.anchor import ZERO_DIGEST, Anchor, Head
from kint.chain.config import ChainConfig, devchain_record
from kint.chain.rpc import RpcTracker
from kint.custody.data_key import dek_id
from kint.custody.wraps import Wrap
from kint.epochs.envelope import seal
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.config import WorkerConfig
from kint.epochs.plaintext import parse_plaintext
from kint.tenant_worker.epoch_walk import Fetched, walk
from kint.tenant_worker.pull_plan import epochs_to_apply
from kint.tenant_worker.pending import record_landed
from kint.tenant_worker.pending_journal import PendingEpoch
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import EpochMeta, EpochRejected, record_epoch
from kint.tenant_worker.store import StoreReader

V = json.loads((Path(__file__).parent / "vectors" / "kint-v0.3.0.json").read_text("utf-8"))
DEK = bytes.fromhex(V["dek"])
SPACE = V["space"]
WRAPS = [Wrap.decode(bytes.fromhex(w["bytes"])) for w in V["wraps"]]
E1, E2 = V["epoch1"], V["epoch2"]
HELD = {dek_id(DEK): DEK}


@pytest.fixture(scope="module")
def anchor(chain_home) -> Anchor:
    record = json.loads(devchain_record(chain_home).read_text())
    config = ChainConfig(rpc_urls=(record["rpc_url"],), chain_id=devchain.CHAIN_ID,
                         anchor=record["anchor"], confirmations=1, rpc_timeout_s=10.0,
                         devchain=True)
    return Anchor(config, RpcTracker())


@pytest.fixture
def ctx(tmp_path) -> SpaceContext:
    """The vector space's context as a worker holds it (an empty epoch cache)."""
    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    db = tmp_path / "memory.db"
    config = WorkerConfig(space_id=SPACE, label=V["tenant"], tenant=V["tenant"], db=str(db),
                          kint_home=str(home), back_address="ipc:///unused",
                          supervisor_pid=1, idle_beat_s=2.5)
    return SpaceContext(config=config, store=StoreReader(str(db), V["tenant"]))


def owner(anchor: Anchor) -> LocalAccount:
    account = Account.create()
    devchain.fund(anchor.config.rpc_urls[0], account.address, 10**18)
    return account


def sealed(who: LocalAccount, e: dict, *, seq: int, prev: str) -> bytes:
    """The vector epoch `e`'s plaintext at (seq, prev), sealed for `who` under the vector
    data key and wraps."""
    text = e["plaintext_utf8"].replace(f'"seq":{e["seq"]},', f'"seq":{seq},', 1)
    text = text.replace(f'"prev":"{e["prev"]}"', f'"prev":"{prev}"', 1)
    blob, _ = seal(text.encode("utf-8"), dek=DEK, owner=who.address, space=SPACE, seq=seq,
                   prev=prev, rows_root=e["rows_root"], wraps=WRAPS,
                   snapshot=e["snapshot_flag_set"])
    return blob


def push(anchor: Anchor, who: LocalAccount, blob: bytes) -> int:
    """Anchor `blob` as `who`'s next epoch in the vector space; its block."""
    prev = anchor.head(who.address, SPACE).digest
    receipt = anchor.transact(who, anchor.encode_push(who.address, SPACE, prev, blob))
    return int(receipt["blockNumber"])


def two_epochs(anchor: Anchor) -> tuple[LocalAccount, list[bytes], list[int]]:
    """A diff epoch 1 and a snapshot epoch 2, anchored by a fresh owner."""
    who = owner(anchor)
    one = sealed(who, E1, seq=1, prev=ZERO_DIGEST)
    two = sealed(who, E2, seq=2, prev=keccak(one).hex())
    return who, [one, two], [push(anchor, who, one), push(anchor, who, two)]


def stale(info: pytest.ExceptionInfo[ProtocolError]) -> str:
    assert info.value.code is ErrorCode.STALE_RPC
    return str(info.value)


def test_the_walk_opens_each_epoch_and_stops_at_a_snapshot(anchor, ctx):
    who, blobs, blocks = two_epochs(anchor)
    head = anchor.head(who.address, SPACE)
    assert (head.seq, head.block) == (2, blocks[1])
    (only,) = walk(ctx, anchor, who.address, head, base=0, full=False, held=HELD)
    assert only.log.seq == 2 and only.snapshot and only.envelope == blobs[1]
    newest_first = walk(ctx, anchor, who.address, head, base=0, full=True, held=HELD)
    assert [f.log.seq for f in newest_first] == [2, 1]
    assert [f.log.block for f in newest_first] == [blocks[1], blocks[0]]
    assert newest_first[0].log.prev_block == blocks[0] and newest_first[1].log.prev_block == 0
    assert all(f.opened is not None and f.reason is None for f in newest_first)
    assert newest_first[1].opened.raw == bytes.fromhex(E1["plaintext"])
    # Walking from a base stops above it.
    assert [f.log.seq for f in walk(ctx, anchor, who.address, head, base=1, full=True,
                                    held=HELD)] == [2]


def _todo(walked: list[Fetched], mirror_digest: str) -> list[Fetched]:
    """The epochs a pull applies from `walked` (oldest first), its gap last if it has one."""
    todo, _ = epochs_to_apply(walked, mirror_digest)
    return todo


def _gap_at(todo: list[Fetched], seq: int, reason: str) -> None:
    """`todo` ends at epoch `seq`, made the gap a pull stops at: nothing after it, it
    applies nothing, nothing walks past it, and a discarding pull refuses with `reason`."""
    gap = todo[-1]
    assert gap.log.seq == seq and gap.opened is None and gap.final, gap
    assert gap.reason.startswith(reason), gap.reason
    assert gap.refusal is not None and gap.refusal.code is ErrorCode.STALE_RPC
    assert str(gap.refusal).endswith(f"{gap.reason}; nothing was applied"), gap.refusal


def test_an_epoch_whose_prev_breaks_is_the_gap_after_the_epochs_before_it(anchor, ctx):
    """03-new-machine.md, "What every epoch must pass", 1: an epoch whose prev is not the
    digest of the epoch applied before it is a gap (it used to refuse the whole pull)."""
    who, blobs, _ = two_epochs(anchor)
    head = anchor.head(who.address, SPACE)
    todo = walk(ctx, anchor, who.address, head, base=0, full=True, held=HELD)[::-1]
    assert _todo(todo, ZERO_DIGEST) == todo
    elsewhere = "ab" * 32  # a mirror whose head is not the digest epoch 1 chains on
    gapped = _todo(todo, elsewhere)
    assert len(gapped) == 1  # nothing before it to apply, nothing after it
    _gap_at(gapped, 1, "epoch 1 does not follow the last applied epoch (abababababab)")
    assert [f.opened is not None for f in todo] == [True, True]  # the walk's own untouched
    # epoch 2 first, then epoch 1: the snapshot stands alone and is applied, epoch 1 is not
    swapped = _todo(todo[::-1], ZERO_DIGEST)
    assert swapped[0] is todo[1] and len(swapped) == 2
    _gap_at(swapped, 1, "epoch 1 does not follow the last applied epoch "
                        f"({keccak(blobs[1]).hex()[:12]})")
    # A snapshot stands alone only as the first epoch to apply: after epoch 1 it must chain
    # on it, as the walk reached it through that link.
    assert _todo(todo[1:], elsewhere) == todo[1:]
    other = replace(todo[1], log=replace(todo[1].log, prev="cd" * 32))
    _gap_at(_todo([todo[0], other], ZERO_DIGEST), 2,
            f"epoch 2 does not follow the last applied epoch ({keccak(blobs[0]).hex()[:12]})")


def test_a_head_the_events_do_not_back_is_refused(anchor, ctx):
    who, _, blocks = two_epochs(anchor)
    head = anchor.head(who.address, SPACE)
    with pytest.raises(ProtocolError) as info:  # an endpoint naming the wrong block
        walk(ctx, anchor, who.address, Head(head.digest, 2, blocks[0]), base=0, full=True,
             held=HELD)
    assert stale(info) == (f"no Epoch event for seq 2 at block {blocks[0]}; the RPC may be "
                           "pruned or lying; nothing was applied")
    with pytest.raises(ProtocolError) as info:  # a head from the future: no such seq yet
        walk(ctx, anchor, who.address, Head(head.digest, 3, head.block), base=0, full=True,
             held=HELD)
    assert stale(info).startswith(f"no Epoch event for seq 3 at block {head.block};")
    with pytest.raises(ProtocolError) as info:  # a digest the chain does not hold
        walk(ctx, anchor, who.address, Head("cd" * 32, 2, head.block), base=0, full=True,
             held=HELD)
    assert stale(info) == ("epoch 2: its event digest is not the head's (cdcdcdcdcdcd); "
                           "nothing was applied")


def _only(anchor: Anchor, ctx: SpaceContext, blob: bytes) -> Fetched:
    who = owner(anchor)
    push(anchor, who, blob)
    (fetched,) = walk(ctx, anchor, who.address, anchor.head(who.address, SPACE), base=0,
                      full=True, held=HELD)
    assert fetched.envelope == blob and fetched.opened is None and not fetched.final
    return fetched


def test_what_a_reader_must_refuse_does_not_open(anchor, ctx):
    """Each of these is an epoch this machine cannot open (a later snapshot may supersede
    it, 06-epochs.md), never one it applies."""
    who = owner(anchor)
    good = sealed(who, E1, seq=1, prev=ZERO_DIGEST)
    future = _only(anchor, ctx, b"\x02" + good[1:])
    assert future.header is None
    assert future.reason == "not a kint epoch (unsupported envelope version)"
    # Another owner's epoch (the same key, the same space): its AAD names that owner.
    assert _only(anchor, ctx, good).reason.startswith("AES-GCM refused the epoch")
    padded = _only(anchor, ctx, sealed(who, E1, seq=1, prev=ZERO_DIGEST) + b"\x00")
    assert padded.reason == "ciphertext is 4113 bytes, but lenBucket 4096 makes it 4112"
    truncated = _only(anchor, ctx, good[:-1])
    assert truncated.reason == "ciphertext is 4111 bytes, but lenBucket 4096 makes it 4112"
    # Sealed by this owner for seq 2 but anchored as seq 1: the AAD pins its place.
    stolen = owner(anchor)
    moved = sealed(stolen, E1, seq=2, prev=ZERO_DIGEST)
    push(anchor, stolen, moved)
    (fetched,) = walk(ctx, anchor, stolen.address, anchor.head(stolen.address, SPACE),
                      base=0, full=True, held=HELD)
    assert fetched.opened is None and fetched.reason.startswith("AES-GCM refused the epoch")


def test_an_epoch_that_opens_and_contradicts_the_chain_is_a_gap_nobody_walks_past(anchor, ctx):
    """03-new-machine.md, "What every epoch must pass", 6: a plaintext whose seq, prev or
    space is not what the chain says is a gap (it used to refuse the whole pull), and
    "always stops the pull": no later snapshot supersedes it."""
    who = owner(anchor)
    honest = sealed(who, E1, seq=1, prev=ZERO_DIGEST)
    lying = resealed(honest, lambda raw: raw.replace(b'"seq":1,', b'"seq":3,', 1), dek=DEK,
                     owner=who.address, space=SPACE, seq=1, prev=ZERO_DIGEST)
    push(anchor, who, lying)
    push(anchor, who, sealed(who, E2, seq=2, prev=keccak(lying).hex()))  # a snapshot after it
    fetched = walk(ctx, anchor, who.address, anchor.head(who.address, SPACE), base=0,
                   full=True, held=HELD)[::-1]
    contradicting = fetched[0]
    assert contradicting.envelope == lying and contradicting.header is not None
    assert fetched[1].snapshot
    _gap_at([contradicting], 1, "epoch plaintext seq 3 disagrees with the chain (1)")
    assert str(contradicting.refusal).startswith("epoch 1: epoch plaintext seq 3 disagrees")
    # The pull keeps it (its prev chains) and stops there.
    assert _todo(fetched, ZERO_DIGEST)[0] is contradicting


@pytest.mark.parametrize("claim", ["flag-flipped", "sealed-for-another-owner"])
def test_a_snapshot_claim_that_does_not_open_is_no_place_to_stop(anchor, ctx, claim, caplog):
    """06-epochs.md, "Why the flag and the key must agree": the header's snapshot bit is not
    under the tag, so a walk that would stop at an epoch claiming to be a snapshot stops
    only if it opens as one; otherwise v0.3.0's warning, and the walk goes on to the epochs
    before it. Here epoch 2 claims a snapshot, either a diff epoch whose flag was flipped
    (it opens, and its plaintext says no snapshot) or a real snapshot sealed for another
    owner (it does not open here)."""
    who = owner(anchor)
    one = sealed(who, E1, seq=1, prev=ZERO_DIGEST)
    if claim == "flag-flipped":
        diff = sealed(who, E1, seq=2, prev=keccak(one).hex())
        two = diff[:1] + bytes([0x02]) + diff[2:]
    else:
        two = sealed(owner(anchor), E2, seq=2, prev=keccak(one).hex())
    push(anchor, who, one)
    push(anchor, who, two)
    with caplog.at_level("WARNING", logger="kint.worker"):
        fetched = walk(ctx, anchor, who.address, anchor.head(who.address, SPACE), base=0,
                       full=False, held=HELD)
    assert [f.log.seq for f in fetched] == [2, 1]
    assert fetched[0].header.snapshot and fetched[0].opened is None and not fetched[0].snapshot
    assert fetched[1].opened is not None
    assert ("pull: epoch 2 claims to be a snapshot but cannot be applied; walking the full "
            "history instead") in caplog.text


@pytest.mark.parametrize("inside", ["plaintext-from-the-future", "another-owners-epoch"])
def test_a_plaintext_from_the_future_is_content_no_snapshot_supersedes(anchor, ctx, inside):
    """frontend-contract.md section 6, item 8, and 12-kint-core.md's table: a plaintext
    whose version is not 1 opens under the tag and is then refused as content, which stops
    the pull there even with a snapshot that opens after it; an epoch that does not open at
    all (sealed for another owner) is the one a later snapshot supersedes."""
    who = owner(anchor)
    honest = sealed(who, E1, seq=1, prev=ZERO_DIGEST)
    if inside == "plaintext-from-the-future":
        one = resealed(honest, lambda raw: raw.replace(b'{"v":1,', b'{"v":2,', 1), dek=DEK,
                       owner=who.address, space=SPACE, seq=1, prev=ZERO_DIGEST)
    else:
        one = sealed(owner(anchor), E1, seq=1, prev=ZERO_DIGEST)
    push(anchor, who, one)
    push(anchor, who, sealed(who, E2, seq=2, prev=keccak(one).hex()))
    fetched = walk(ctx, anchor, who.address, anchor.head(who.address, SPACE), base=0,
                   full=True, held=HELD)[::-1]
    first, snapshot = fetched
    assert first.opened is None and first.header is not None and snapshot.snapshot
    todo, skipped = epochs_to_apply(fetched, ZERO_DIGEST)
    if inside == "plaintext-from-the-future":
        assert first.final
        assert first.reason == "its content is not an epoch (plaintext version 2 is not 1)"
        assert (todo, skipped) == (fetched, [])  # the pull stops at epoch 1
    else:
        assert not first.final and first.reason.startswith("AES-GCM refused the epoch")
        assert todo == [snapshot]
        assert [(s["seq"], s["superseded_by"]) for s in skipped] == [(1, 2)]


# --- recording an epoch on this machine's picture ---------------------------------------


def _meta(e: dict, blob: bytes, *, seq: int | None = None, prev: str | None = None) -> EpochMeta:
    return EpochMeta(seq=e["seq"] if seq is None else seq, digest=keccak(blob).hex(),
                     prev=e["prev"] if prev is None else prev, block=7, tx="ee" * 32,
                     bucket=e["bucket"], rows_root=e["rows_root"], writer="0x" + "11" * 20)


def _record(ctx: SpaceContext, e: dict, *, text: str | None = None, blob: bytes | None = None,
            **meta: object) -> None:
    raw = (text if text is not None else e["plaintext_utf8"]).encode("utf-8")
    blob = blob if blob is not None else bytes.fromhex(e["blob"])
    record_epoch(ctx.state, raw, parse_plaintext(raw), blob, _meta(e, blob, **meta))


def test_an_epoch_is_recorded_only_in_its_place(ctx):
    """A diff epoch follows the mirror's head exactly; a snapshot stands alone but never
    goes back; the ciphertext, the plaintext and the metadata agree, in this space."""
    with pytest.raises(EpochRejected, match="^epoch 2 does not follow seq 0 "):
        _record(ctx, E1, text=E1["plaintext_utf8"].replace('"seq":1,', '"seq":2,'), seq=2)
    _record(ctx, E1)
    assert ctx.state.mirror().head.seq == 1
    with pytest.raises(EpochRejected) as info:  # the same epoch again
        _record(ctx, E1)
    assert str(info.value) == f"epoch 1 does not follow seq 1 ({E1['digest'][:12]})"
    skipped = E1["plaintext_utf8"].replace('"seq":1,', '"seq":3,').replace(
        f'"prev":"{E1["prev"]}"', f'"prev":"{E1["digest"]}"')
    with pytest.raises(EpochRejected, match="^epoch 3 does not follow seq 1 "):
        _record(ctx, E1, text=skipped, seq=3, prev=E1["digest"])
    with pytest.raises(EpochRejected, match="^epoch 1: plaintext and metadata disagree$"):
        _record(ctx, E1, seq=1, prev="ab" * 32)
    with pytest.raises(EpochRejected, match="^epoch 1: the ciphertext does not hash to its "):
        record_epoch(ctx.state, bytes.fromhex(E1["plaintext"]), parse_plaintext(
            bytes.fromhex(E1["plaintext"])), bytes.fromhex(E1["blob"]) + b"\x00",
            _meta(E1, bytes.fromhex(E1["blob"])))
    other = E1["plaintext_utf8"].replace(SPACE, "cd" * 32)
    with pytest.raises(EpochRejected, match="^epoch 1: its plaintext belongs to another space$"):
        _record(ctx, E1, text=other)
    _record(ctx, E2)  # epoch 2, the snapshot
    with pytest.raises(EpochRejected, match="^snapshot epoch 2 is not past seq 2$"):
        _record(ctx, E2)
    assert ctx.state.mirror().head.seq == 2


def test_a_snapshot_is_recorded_without_the_epochs_before_it(ctx):
    _record(ctx, E2)
    head = ctx.state.mirror().head
    assert (head.seq, head.digest) == (2, E2["digest"])


# --- a push reads its own Epoch event back ----------------------------------------------


def test_a_push_whose_event_names_another_digest_is_not_recorded(anchor, ctx):
    """06-epochs.md: after the confirmations, the writer reads the event back at the
    receipt's block and stops when its digest is not what was sent."""
    who = owner(anchor)
    sent = sealed(who, E1, seq=1, prev=ZERO_DIGEST)
    landed = sealed(who, E1, seq=1, prev=ZERO_DIGEST)  # the same epoch, another nonce
    receipt = anchor.transact(who, anchor.encode_push(who.address, SPACE, ZERO_DIGEST, landed))

    def pending(envelope: bytes, seq: int = 1) -> PendingEpoch:
        return PendingEpoch(seq=seq, prev=ZERO_DIGEST, digest=keccak(envelope).hex(), nonce=0,
                            raw_tx=b"", bucket=E1["bucket"],
                            plaintext=bytes.fromhex(E1["plaintext"]), envelope=envelope,
                            sender=who.address)

    for wrong in (pending(sent), pending(landed, seq=2)):
        with pytest.raises(ProtocolError) as info:
            record_landed(ctx, anchor, wrong, receipt)
        assert str(info.value) == (f"epoch {wrong.seq} landed but the Epoch event digest does "
                                   "not match what was sent")
        assert ctx.state.mirror() is None
    mirror = record_landed(ctx, anchor, pending(landed), receipt)
    assert (mirror.head.seq, mirror.head.digest) == (1, keccak(landed).hex())
