"""kint/epochs against kint v0.3.0's published test vectors (tests/vectors/kint-v0.3.0.json),
and every refusal the epoch format defines.

Every vector value is reproduced by our own code from the inputs the vector names: the leaves,
ids, roots and proofs through kint.rows, the two epochs' plaintext bytes from their rows, and
the sealed blobs byte for byte given the vector's nonce and wraps. Envelopes a correct sealer
would never make (a header that disagrees with its plaintext, a payload that is not JSON) are
built here by hand and encrypted correctly, so the check under test is the only thing that
can refuse them.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eth_abi import encode as abi_encode
from eth_hash.auto import keccak

from kint.custody.wraps import Wrap
from kint.epochs import buckets, envelope, split
from kint.epochs.buckets import (
    BUCKETS,
    GZIP_HEADER,
    PayloadTooLarge,
    bucket_for,
    gunzip,
    gzip_bytes,
    pad,
    unpad,
)
from kint.epochs.envelope import (
    FLAG_SNAPSHOT,
    HEADER_LEN,
    SNAPSHOT_DISAGREES,
    Header,
    MalformedHeader,
    aad,
    dek_id,
    open_epoch,
    parse_header,
    seal,
)
from kint.epochs.errors import (
    AuthenticationFailed,
    CiphertextLengthError,
    Disagreement,
    EpochError,
    HeaderError,
    Malformed,
    PayloadError,
    PlaintextError,
    Unopenable,
    UnsupportedVersion,
    WrongDataKey,
)
from kint.epochs.plaintext import (
    Plaintext,
    WireRow,
    build_plaintext,
    created_at_now,
    encode_json,
    parse_plaintext,
    wire_rows,
)
from kint.epochs.split import (
    EPOCH_LIMIT,
    HEADROOM,
    DeletionsTooLarge,
    MerkleState,
    RowTooLarge,
    SnapshotTooLarge,
    measure,
    plan_snapshot,
    split_diff,
)
from kint.rows.canon import Row, canonical_id, journal_content_key
from kint.rows.merkle import EMPTY_ROOT, MerkleTree, verify_proof
from kint.spaces import space_id

V = json.loads((Path(__file__).parent / "vectors" / "kint-v0.3.0.json").read_text("utf-8"))
DEK = bytes.fromhex(V["dek"])
assert DEK == b"\x22" * 32
OWNER = V["owner"]
SPACE = V["space"]
WRAPS = [Wrap.decode(bytes.fromhex(w["bytes"])) for w in V["wraps"]]
E1, E2 = V["epoch1"], V["epoch2"]
CREATED_AT = json.loads(E1["plaintext_utf8"])["created_at"]
ZERO = "00" * 32

# Epoch 2 rewrote zeta (status and body) and deleted ﬁrst; the rest of epoch 1 stayed.
ZETA_V2 = WireRow("entity", "zeta", "person", status="archived",
                  body='{"name":"zeta","note":"the body changed in epoch 2"}')
FIRST_ID = ("entity", "person", "\ufb01rst")


def vector_wire_rows() -> list[WireRow]:
    return [WireRow.from_json(r["row"]) for r in V["rows"]]


def epoch2_rows() -> list[WireRow]:
    out = []
    for row in vector_wire_rows():
        if (row.tier, row.category, row.key) == FIRST_ID:
            continue
        out.append(ZETA_V2 if row.key == "zeta" else row)
    return out


def epoch_args(e: dict[str, Any]) -> dict[str, Any]:
    return {"owner": OWNER, "space": SPACE, "seq": e["seq"], "prev": e["prev"]}


def build_epoch1() -> bytes:
    return build_plaintext(tenant=V["tenant"], space=SPACE, seq=1, prev=ZERO,
                           rows=vector_wire_rows(), deleted=[], rows_root=E1["rows_root"],
                           n_rows=E1["n_rows"], created_at=CREATED_AT)


def build_epoch2() -> bytes:
    return build_plaintext(tenant=V["tenant"], space=SPACE, seq=2, prev=E2["prev"],
                           rows=epoch2_rows(), deleted=[FIRST_ID], rows_root=E2["rows_root"],
                           n_rows=E2["n_rows"], created_at=CREATED_AT, snapshot=True)


def blob_of(e: dict[str, Any]) -> bytes:
    return bytes.fromhex(e["blob"])


def with_flags(blob: bytes, flags: int) -> bytes:
    return blob[:1] + bytes([flags]) + blob[2:]


def hand_seal(raw: bytes, *, flags: int = 0, seq: int = 1, prev: str = ZERO,
              rows_root: str = E1["rows_root"], padded: bytes | None = None,
              space: str = SPACE) -> bytes:
    """A correctly encrypted envelope around whatever bytes the test wants inside."""
    payload = padded if padded is not None else buckets.pack(raw)
    header = Header(flags=flags, nonce=bytes(12), rows_root=bytes.fromhex(rows_root),
                    dek_id=dek_id(DEK), bucket=len(payload), wraps=tuple(WRAPS))
    associated = aad(owner=OWNER, space=space, seq=seq, prev=prev, bucket=header.bucket,
                     rows_root=header.rows_root, dek_id=header.dek_id)
    return header.encode() + AESGCM(DEK).encrypt(header.nonce, payload, associated)


# --- rows, leaves, roots (kint.rows against the vectors) --------------------------------


def test_the_space_of_a_tenant() -> None:
    """keccak256("kint-space-v1" || tenant): the vectors' tenant, and the demo tenant whose
    head 11-contract.md reads with cast (`space bd2a3b5b8f3fb4c8` in kint status)."""
    assert space_id(V["tenant"]) == SPACE
    assert space_id("kint-demo") == ("bd2a3b5b8f3fb4c81658d863b90018f1af511c28b33356fc81c2de"
                                     "406be98cb0")


def test_every_row_leaf_and_id() -> None:
    for entry in V["rows"]:
        wire = WireRow.from_json(entry["row"])
        row = wire.to_row()
        assert row.canonical_id == entry["row_id"]
        assert row.leaf.hex() == entry["leaf"]
        assert wire.to_json() == entry["row"]
        assert list(wire.to_json()) == list(entry["row"])  # wire key order
        assert WireRow.from_row(row) == wire


def test_sorted_ids_rows_root_proofs_empty_root() -> None:
    rows = sorted((WireRow.from_json(r["row"]).to_row() for r in V["rows"]),
                  key=lambda r: r.canonical_id)
    ids = [r.canonical_id for r in rows]
    assert ids == V["sorted_ids"]
    tree = MerkleTree([r.leaf for r in rows])
    assert tree.root.hex() == V["rows_root"] == E1["rows_root"]
    for entry in V["proofs"]:
        index = ids.index(entry["row_id"])
        assert rows[index].leaf.hex() == entry["leaf"]
        assert tree.proof(index) == entry["proof"]
        assert verify_proof(rows[index].leaf, entry["proof"], tree.root)
    assert EMPTY_ROOT.hex() == V["empty_root"]
    assert MerkleState().root.hex() == V["empty_root"]


def test_journal_key() -> None:
    j = V["journal_key_inputs"]
    assert journal_content_key(j["ts"], j["evaluated"], j["acted"], j["forward"],
                               j["extra"]) == j["key"]


def test_epoch2_state_after() -> None:
    after = E2["state_after"]
    rows = epoch2_rows()
    assert {r.canonical_id: r.leaf.hex() for r in rows} == after["leaves"]
    assert sorted(r.canonical_id for r in rows) == after["sorted_ids"]
    assert E2["deleted_ids"] == [canonical_id(*FIRST_ID)]
    # As a snapshot: the root of exactly its own rows.
    assert MerkleState.of_rows(rows).root.hex() == after["root"] == E2["rows_root"]
    # As a diff on top of epoch 1: the same state, so the same root.
    state = MerkleState.of_rows(vector_wire_rows())
    assert state.root.hex() == E1["rows_root"]
    root, n_rows = state.apply([ZETA_V2], [FIRST_ID])
    assert (root.hex(), n_rows) == (after["root"], after["n_rows"])


def test_merkle_state_kept_tree_matches_the_whole_tree() -> None:
    """`apply` hashes only what a chunk reaches; every root it gives must equal the root of
    the whole state built from nothing (the v0.3.0 layout), through puts before, between
    and after the rows held, changes in place, deletions (of held and absent rows), a row
    deleted and put back in one chunk, the state emptied, and odd and even counts."""
    rng = random.Random(15)
    pool = note_rows(300, seed=5)
    edited = note_rows(300, seed=6)  # same ids (note i), other bodies: changes in place
    assert [r.canonical_id for r in pool] == [r.canonical_id for r in edited]
    state = MerkleState.of_rows(pool[:37])
    assert state.root == MerkleTree([r.leaf for r in
                                     sorted(pool[:37], key=lambda r: r.canonical_id)]).root
    expected = {r.canonical_id: r.leaf for r in pool[:37]}
    for step in range(120):
        put = [rng.choice((pool, edited))[i] for i in rng.sample(range(300), rng.randint(0, 9))]
        dels = [("entity", "notes", f"n{i}") for i in rng.sample(range(300),
                                                                       rng.randint(0, 6))]
        if step % 40 == 39:  # empty the state
            dels = [("entity", "notes", f"n{i}") for i in range(300)]
            put = []
        dels += [("state", None, "never-held")]
        root, n_rows = state.apply(put, dels)
        for tier, category, key in dels:
            expected.pop(canonical_id(tier, category, key), None)
        for row in put:
            expected[row.canonical_id] = row.leaf
        whole = MerkleTree([expected[cid] for cid in sorted(expected)]).root
        assert (root, n_rows) == (whole, len(expected)), f"step {step}"
    assert MerkleState().apply([], []) == (EMPTY_ROOT, 0)


def test_row_model_round_trip() -> None:
    """Our Row (as kint.rows.export shapes it) to the wire and back; ts is optional input."""
    ours = [
        Row("entity", "rules", "release-gate", {"status": "active", "body": "{}"}),
        Row("state", None, "focus", {"body": "x"}),
        Row("reference", None, "doc", {"body": "b", "metadata": '{"k":1}'}),
        Row("journal", None, "k", {"ts": "t", "evaluated": "e", "acted": None,
                                   "forward": None, "extra": None}),
    ]
    wires = wire_rows(ours, {ours[0].canonical_id: "2026-01-01 00:00:00"})
    assert wires[0].ts == "2026-01-01 00:00:00" and wires[1].ts is None
    assert wires[2].meta == '{"k":1}' and wires[3].ts == "t"
    for row, wire in zip(ours, wires):
        back = wire.to_row()
        assert back == row and back.leaf == row.leaf and wire.leaf == row.leaf
    with pytest.raises(ValueError):
        WireRow.from_row(ours[3], ts="other")


# --- epoch 1 and epoch 2 --------------------------------------------------------------


@pytest.mark.parametrize("e, build", [(E1, build_epoch1), (E2, build_epoch2)],
                         ids=["epoch1", "epoch2"])
def test_epoch_vector(e: dict[str, Any], build: Any) -> None:
    raw = build()
    assert raw == bytes.fromhex(e["plaintext"])
    assert raw.decode("utf-8") == e["plaintext_utf8"]
    gz = gzip_bytes(raw)
    assert gz[:10] == GZIP_HEADER and gzip.decompress(gz) == raw
    assert bucket_for(len(gz)) == e["bucket"]
    h = e["header"]
    expected_aad = aad(owner=OWNER, space=SPACE, seq=e["seq"], prev=e["prev"],
                       bucket=e["bucket"], rows_root=e["rows_root"],
                       dek_id=bytes.fromhex(h["dek_id"]))
    assert expected_aad.hex() == e["aad"]
    assert dek_id(DEK).hex() == V["dek_id"] == h["dek_id"]

    blob, header = seal(raw, dek=DEK, owner=OWNER, space=SPACE, seq=e["seq"], prev=e["prev"],
                        rows_root=e["rows_root"], wraps=WRAPS,
                        snapshot=e["snapshot_flag_set"], nonce=bytes.fromhex(h["nonce"]))
    assert blob.hex() == e["blob"]
    assert keccak(blob).hex() == e["digest"]
    assert header.encode() == blob[:h["length"]]
    assert (header.version, header.flags, header.nonce.hex(), header.rows_root.hex(),
            header.dek_id.hex(), header.bucket, len(header.wraps), header.length) == (
        h["version"], h["flags"], h["nonce"], h["rows_root"], h["dek_id"], h["bucket"],
        h["n_wraps"], h["length"])
    assert Header.decode(blob) == header
    assert HEADER_LEN == 59 and h["length"] == HEADER_LEN + 77 * h["n_wraps"]
    assert header.snapshot is e["snapshot_flag_set"]
    assert header.wrap_for(bytes.fromhex(V["wraps"][2]["tag"])) == WRAPS[2]

    opened = open_epoch(bytes.fromhex(e["blob"]), dek=DEK, **epoch_args(e))
    assert opened.raw == raw
    assert opened.plaintext.encode() == raw
    assert opened.snapshot is e["snapshot_in_plaintext"]
    assert opened.plaintext.n_rows == e["n_rows"]
    assert opened.plaintext.rows_root == e["rows_root"]


def test_epoch2_is_a_snapshot_with_the_key_last() -> None:
    raw = build_epoch2()
    assert raw.endswith(b',"snapshot":true}')
    assert list(json.loads(raw))[-1] == "snapshot"
    assert E2["flags"] == FLAG_SNAPSHOT and blob_of(E2)[1] == FLAG_SNAPSHOT
    assert b"snapshot" not in build_epoch1() and blob_of(E1)[1] == 0
    opened = open_epoch(blob_of(E2), dek=DEK, **epoch_args(E2))
    assert opened.header.snapshot and opened.plaintext.snapshot
    assert opened.plaintext.deleted == (FIRST_ID,)
    assert [tuple(d) for d in E2["deleted"]] == [FIRST_ID]


def test_push_calldata() -> None:
    call = V["push_calldata"]
    blob = blob_of(E1)
    assert keccak(b"push(address,bytes32,bytes32,bytes)")[:4].hex() == call["selector"][2:]
    data = bytes.fromhex(call["selector"][2:]) + abi_encode(
        ["address", "bytes32", "bytes32", "bytes"],
        [call["owner"], bytes.fromhex(call["space"]), bytes.fromhex(call["prev"]), blob])
    assert "0x" + data.hex() == call["data"]
    assert keccak(blob).hex() == call["ct_keccak"] and len(blob) == call["ct_length"]


# --- the flags ------------------------------------------------------------------------


@pytest.mark.parametrize("e, flags", [(E1, FLAG_SNAPSHOT), (E2, 0x00), (E2, 0x01),
                                      (E1, 0xFF)])
def test_header_and_plaintext_snapshot_disagreement_refused(e: dict, flags: int) -> None:
    with pytest.raises(Disagreement, match=f"^{SNAPSHOT_DISAGREES}$") as info:
        open_epoch(with_flags(blob_of(e), flags), dek=DEK, **epoch_args(e))
    assert info.value.field == "snapshot"


@pytest.mark.parametrize("e, flags", [(E1, 0x01), (E1, 0x80), (E1, 0xFD), (E2, 0x03),
                                      (E2, 0xFF)])
def test_unknown_flag_bits_are_ignored(e: dict, flags: int) -> None:
    opened = open_epoch(with_flags(blob_of(e), flags), dek=DEK, **epoch_args(e))
    assert opened.raw == bytes.fromhex(e["plaintext"])
    assert opened.header.flags == flags
    assert opened.snapshot is e["snapshot_in_plaintext"]


# --- refusals when opening ------------------------------------------------------------


def test_dek_id_mismatch_refused_before_decrypting(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoDecrypt:
        def __init__(self, key: bytes) -> None:
            pass

        def decrypt(self, *args: Any) -> bytes:
            raise AssertionError("decrypted before checking dek_id")

    monkeypatch.setattr(envelope, "AESGCM", NoDecrypt)
    with pytest.raises(WrongDataKey,
                       match="^dek_id mismatch: wrong data key for this epoch$") as info:
        open_epoch(blob_of(E1), dek=b"\x33" * 32, **epoch_args(E1))
    assert isinstance(info.value, Unopenable)
    assert info.value.header_dek_id.hex() == V["dek_id"]


@pytest.mark.parametrize("blob, kind", [
    (b"", HeaderError),
    (blob_of(E1)[:58], HeaderError),
    (b"\x02" + blob_of(E1)[1:], UnsupportedVersion),
    (b"\x00" + blob_of(E1)[1:], UnsupportedVersion),
    (blob_of(E1)[:58] + b"\x03" + blob_of(E1)[59:59 + 77 * 2], HeaderError),  # wraps cut
    (blob_of(E1)[:58] + b"\xff" + blob_of(E1)[59:], HeaderError),  # 255 wraps named
], ids=["empty", "truncated", "version2", "version0", "wraps-cut", "wraps-overrun"])
def test_garbled_header_is_its_own_error(blob: bytes, kind: type) -> None:
    with pytest.raises(kind) as info:
        open_epoch(blob, dek=DEK, **epoch_args(E1))
    assert isinstance(info.value, HeaderError) and isinstance(info.value, Unopenable)
    assert not isinstance(info.value, (WrongDataKey, AuthenticationFailed))
    with pytest.raises(kind):
        Header.decode(blob)
    with pytest.raises(MalformedHeader):
        parse_header(blob)


def test_unsupported_version_message() -> None:
    with pytest.raises(UnsupportedVersion, match="^unsupported envelope version$") as info:
        Header.decode(b"\x02" + blob_of(E1)[1:])
    assert info.value.version == 2


def test_ciphertext_length_checked_against_bucket() -> None:
    for blob in (blob_of(E1)[:-1], blob_of(E1) + b"\x00"):
        with pytest.raises(CiphertextLengthError):
            open_epoch(blob, dek=DEK, **epoch_args(E1))


@pytest.mark.parametrize("change", ["ciphertext", "rows_root", "bucket", "owner", "space",
                                    "seq", "prev", "dek_id"])
def test_aad_and_tag_bind_the_epoch(change: str) -> None:
    blob = bytearray(blob_of(E1))
    args = epoch_args(E1)
    if change == "ciphertext":
        blob[-1] ^= 1
    elif change == "rows_root":
        blob[20] ^= 1
    elif change == "bucket":  # 8192 with 4096 more bytes would pass the length check
        blob[54:58] = (8192).to_bytes(4, "big")
        blob += bytes(4096)
    elif change == "owner":
        args["owner"] = "0x" + "ab" * 20
    elif change == "space":
        args["space"] = "ab" * 32
    elif change == "seq":
        args["seq"] = 2
    elif change == "prev":
        args["prev"] = "11" * 32
    elif change == "dek_id":  # a forged id alone gets past the id check, never the tag
        blob[46:54] = dek_id(b"\x33" * 32)
        with pytest.raises(AuthenticationFailed):
            open_epoch(bytes(blob), dek=b"\x33" * 32, **args)
        return
    with pytest.raises(AuthenticationFailed):
        open_epoch(bytes(blob), dek=DEK, **args)


def test_plaintext_disagreeing_with_chain_or_header_refused() -> None:
    raw = build_epoch1()
    other_root = "ab" * 32
    with pytest.raises(Disagreement) as info:  # header root is what the AAD binds
        open_epoch(hand_seal(raw, rows_root=other_root), dek=DEK, **epoch_args(E1))
    assert info.value.field == "rows_root"
    raw3 = raw.replace(b'"seq":1', b'"seq":3')
    with pytest.raises(Disagreement) as info:
        open_epoch(hand_seal(raw3), dek=DEK, **epoch_args(E1))
    assert info.value.field == "seq"
    raw_prev = raw.replace(b'"prev":"' + ZERO.encode(), b'"prev":"' + b"11" * 32)
    with pytest.raises(Disagreement) as info:
        open_epoch(hand_seal(raw_prev), dek=DEK, **epoch_args(E1))
    assert info.value.field == "prev"
    raw_space = raw.replace(SPACE.encode(), b"cd" * 32)
    with pytest.raises(Disagreement) as info:
        open_epoch(hand_seal(raw_space), dek=DEK, **epoch_args(E1))
    assert info.value.field == "space"
    # and the hand sealer is faithful: the unchanged plaintext opens
    assert open_epoch(hand_seal(raw), dek=DEK, **epoch_args(E1)).raw == raw


@pytest.mark.parametrize("padded, kind", [
    (pad(gzip_bytes(b"not json"), 4096), PlaintextError),
    (pad(gzip_bytes(b"[1,2]"), 4096), PlaintextError),
    (pad(b"\x1f\x8b garbage", 4096), PayloadError),
    (b"\x00\x00\x20\x00" + bytes(4092), PayloadError),  # length past the bucket
    (pad(gzip_bytes(b"{}"), 4096)[:-1] + b"\x01", PayloadError),  # padding not zeros
], ids=["not-json", "not-object", "not-gzip", "length", "padding"])
def test_payload_garbage_after_the_tag_is_malformed(padded: bytes, kind: type) -> None:
    with pytest.raises(kind) as info:
        open_epoch(hand_seal(b"", padded=padded), dek=DEK, **epoch_args(E1))
    assert isinstance(info.value, Malformed) and isinstance(info.value, EpochError)


def test_seal_refuses_what_open_would_refuse() -> None:
    raw = build_epoch1()
    common = {"dek": DEK, "owner": OWNER, "space": SPACE, "seq": 1, "prev": ZERO,
              "rows_root": E1["rows_root"], "wraps": WRAPS}
    with pytest.raises(ValueError, match=SNAPSHOT_DISAGREES):
        seal(raw, snapshot=True, **common)
    with pytest.raises(ValueError, match="seq"):
        seal(raw, snapshot=False, **{**common, "seq": 2})
    with pytest.raises(ValueError, match="wraps"):
        seal(raw, snapshot=False, **{**common, "wraps": []})
    with pytest.raises(PlaintextError):
        seal(b"{}", snapshot=False, **common)
    blob, header = seal(raw, snapshot=False, **common)  # random nonce
    assert header.nonce != bytes.fromhex(E1["header"]["nonce"])
    assert open_epoch(blob, dek=DEK, **epoch_args(E1)).raw == raw


# --- the plaintext --------------------------------------------------------------------


def test_plaintext_round_trip_and_key_order() -> None:
    raw = build_epoch1()
    parsed = parse_plaintext(raw)
    assert isinstance(parsed, Plaintext) and parsed.encode() == raw
    assert list(json.loads(raw)) == ["v", "tenant", "space", "seq", "prev", "rows", "deleted",
                                     "rows_root", "n_rows", "created_at"]
    assert "\U0001f525hot".encode() in raw  # ensure_ascii=False: UTF-8, not \u escapes
    assert encode_json({"a": [1, None]}) == b'{"a":[1,null]}'
    assert len(created_at_now()) == len("2026-09-09T16:18:43Z")


def _doc(**changes: Any) -> bytes:
    doc = json.loads(build_epoch1())
    for key, value in changes.items():
        if value is KeyError:
            del doc[key]
        else:
            doc[key] = value
    return json.dumps(doc, ensure_ascii=False).encode()


def _row_doc(**changes: Any) -> bytes:
    doc = json.loads(build_epoch1())
    row = doc["rows"][4]  # the state row
    for key, value in changes.items():
        if value is KeyError:
            del row[key]
        else:
            row[key] = value
    return json.dumps(doc).encode()


@pytest.mark.parametrize("raw", [
    b"\xff\xfe", b"not json", b"[]", b'"text"',
    _doc(v=2), _doc(v=True), _doc(v=1.0),
    _doc(seq="1"), _doc(seq=True), _doc(seq=0), _doc(seq=2**64),
    _doc(prev="AB" * 32), _doc(prev="ab" * 31), _doc(space=None), _doc(rows_root=1),
    _doc(n_rows=-1), _doc(n_rows=1.5), _doc(tenant=5), _doc(created_at=None),
    _doc(rows={}), _doc(deleted=[["entity", None]]), _doc(deleted=[["nope", None, "k"]]),
    _doc(deleted=[["state", "cat", "k"]]), _doc(snapshot="yes"), _doc(snapshot=1),
    _doc(created_at=KeyError), _doc(rows=KeyError),
    _row_doc(status="active"), _row_doc(category="c"), _row_doc(tier="other"),
    _row_doc(body=7), _row_doc(extra=KeyError), _row_doc(key=None),
    b'{"v":1,"v":1}',
], ids=lambda raw: raw[-60:].decode("utf-8", "replace"))
def test_garbage_plaintext_refused(raw: bytes) -> None:
    with pytest.raises(PlaintextError):
        parse_plaintext(raw)


@pytest.mark.parametrize("changes", [{"seq": 2**64 - 1}, {"seq": 1}, {"n_rows": 0},
                                     {"rows": [], "deleted": []}])
def test_plaintext_at_the_edges_of_its_fields_is_read(changes: dict[str, Any]) -> None:
    """The other side of the refusals above: seq is a uint64 from 1 (it rides in the AAD
    as one), a row count of 0 and an epoch with no rows are an empty state's."""
    parsed = parse_plaintext(_doc(**changes))
    for key, value in changes.items():
        got = getattr(parsed, key)
        assert (list(got) if isinstance(got, tuple) else got) == value
    assert aad(owner=OWNER, space=SPACE, seq=2**64 - 1, prev=ZERO, bucket=2**32 - 1,
               rows_root=E1["rows_root"], dek_id=dek_id(DEK))
    for seq, bucket in ((2**64, 4096), (1, 2**32), (-1, 4096)):
        with pytest.raises(ValueError):
            aad(owner=OWNER, space=SPACE, seq=seq, prev=ZERO, bucket=bucket,
                rows_root=E1["rows_root"], dek_id=dek_id(DEK))


def test_plaintext_refuses_duplicate_rows_and_ignores_unknown_keys() -> None:
    doc = json.loads(build_epoch1())
    doc["rows"].append(doc["rows"][0])
    with pytest.raises(PlaintextError, match="twice"):
        parse_plaintext(json.dumps(doc).encode())
    assert parse_plaintext(_doc(future="x")).seq == 1
    assert parse_plaintext(_doc(snapshot=False)).snapshot is False


# --- buckets --------------------------------------------------------------------------


def test_buckets_and_the_ratchet() -> None:
    assert BUCKETS == (4096, 8192, 16384, 32768, 65536, 98304)
    assert bucket_for(0) == 4096
    assert bucket_for(4092) == 4096 and bucket_for(4093) == 8192
    assert bucket_for(98300) == 98304
    with pytest.raises(PayloadTooLarge):
        bucket_for(98301)
    assert bucket_for(100, floor=16384) == 16384
    assert bucket_for(20000, floor=16384) == 32768
    assert bucket_for(100, floor=98304) == 98304
    with pytest.raises(ValueError):
        bucket_for(100, floor=5000)
    raw = build_epoch1()
    blob, header = seal(raw, dek=DEK, owner=OWNER, space=SPACE, seq=1, prev=ZERO,
                        rows_root=E1["rows_root"], wraps=WRAPS, snapshot=False,
                        bucket_floor=16384)
    assert header.bucket == 16384 and len(blob) == header.length + 16384 + 16
    assert open_epoch(blob, dek=DEK, **epoch_args(E1)).raw == raw


def test_pad_unpad_and_gzip() -> None:
    gz = gzip_bytes(b"hello " * 100)
    assert gz == gzip_bytes(b"hello " * 100) and gz[9] == 0x13
    padded = pad(gz, 4096)
    assert len(padded) == 4096 and padded[:4] == len(gz).to_bytes(4, "big")
    assert unpad(padded) == gz and gunzip(unpad(padded)) == b"hello " * 100
    with pytest.raises(ValueError):
        pad(bytes(4093), 4096)
    with pytest.raises(PayloadError, match="inflates past"):
        gunzip(gzip_bytes(bytes(100_000)), cap=50_000)
    with pytest.raises(PayloadError, match="truncated"):
        gunzip(gz[:-3])
    with pytest.raises(PayloadError, match="after"):
        gunzip(gz + b"x")
    with pytest.raises(PayloadError):
        unpad(b"\x00\x00")
    # any OS byte reads
    assert gunzip(gz[:9] + b"\x03" + gz[10:]) == b"hello " * 100


# --- splitting ------------------------------------------------------------------------

_SYLLABLES = ["ka", "ri", "to", "me", "lan", "sor", "vel", "dim", "ex", "pra", "qu", "ho",
              "ni", "zet", "bor", "ul", "fa", "ge"]
_LEXICON_RNG = random.Random(1)
LEXICON = ["".join(_LEXICON_RNG.choice(_SYLLABLES) for _ in range(_LEXICON_RNG.randint(1, 4)))
           for _ in range(3000)]


def note_rows(count: int, seed: int = 7) -> list[WireRow]:
    """Entity rows with ~200-character bodies of made-up words: text that gzips about as
    well as real notes do."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        body = json.dumps({"title": f"note {i}: " + " ".join(rng.choices(LEXICON, k=3)),
                           "tags": rng.sample(LEXICON, 3),
                           "text": " ".join(rng.choices(LEXICON, k=16)),
                           "ref": f"{rng.getrandbits(32):08x}"}, separators=(",", ":"))
        out.append(WireRow("entity", f"n{i}", "notes", status=None, body=body,
                           ts="2026-09-09 16:18:43"))
    return out


def random_deletions(count: int, seed: int = 3) -> list[tuple[str, None, str]]:
    rng = random.Random(seed)
    return [("state", None, rng.randbytes(32).hex()) for _ in range(count)]


def big_row(tier: str = "entity", category: str | None = "notes", key: str = "huge",
            hex_chars: int = 200_000) -> WireRow:
    body = random.Random(hex_chars).randbytes(hex_chars // 2).hex()
    return WireRow(tier, key, category, body=body)


def test_split_nothing_and_small() -> None:
    assert split_diff([], [], state_after=MerkleState().apply) == []
    rows = vector_wire_rows()
    state = MerkleState()
    (chunk,) = split_diff(rows, [("state", None, "gone")], state_after=state.apply)
    assert chunk.rows == tuple(rows) and chunk.deleted == (("state", None, "gone"),)
    assert chunk.rows_root.hex() == V["rows_root"] and chunk.n_rows == 8
    assert chunk.measured == measure(rows, chunk.deleted) <= EPOCH_LIMIT
    (only,) = split_diff([], [FIRST_ID], state_after=MerkleState.of_rows(rows).apply)
    assert only.rows == () and only.n_rows == 7


def test_split_large_diff_greedy_in_order_with_roots() -> None:
    rows = note_rows(3000)
    dels = random_deletions(50)
    base = MerkleState.of_rows(note_rows(20, seed=99))
    chunks = split_diff(rows, dels, state_after=MerkleState(base.leaves).apply)
    assert len(chunks) >= 2, "the fixture must need more than one epoch"
    assert [r for c in chunks for r in c.rows] == rows
    assert chunks[0].deleted == tuple(dels) and all(c.deleted == () for c in chunks[1:])
    check = MerkleState(base.leaves)
    for i, chunk in enumerate(chunks):
        assert chunk.measured == measure(chunk.rows, chunk.deleted) <= EPOCH_LIMIT
        if i + 1 < len(chunks):  # greedy: one more row would have crossed
            grown = chunk.rows + chunks[i + 1].rows[:1]
            assert measure(grown, chunk.deleted) > EPOCH_LIMIT
        assert (chunk.rows_root, chunk.n_rows) == check.apply(chunk.rows, chunk.deleted)
    # each chunk seals into a bucket and carries its root
    prev, floor = ZERO, 0
    for seq, chunk in enumerate(chunks, 1):
        raw = build_plaintext(tenant="demo", space=SPACE, seq=seq, prev=prev,
                              rows=chunk.rows, deleted=chunk.deleted,
                              rows_root=chunk.rows_root, n_rows=chunk.n_rows)
        blob, header = seal(raw, dek=DEK, owner=OWNER, space=SPACE, seq=seq, prev=prev,
                            rows_root=chunk.rows_root, wraps=WRAPS[:1], snapshot=False,
                            bucket_floor=floor)
        assert header.bucket >= floor
        opened = open_epoch(blob, dek=DEK, owner=OWNER, space=SPACE, seq=seq, prev=prev)
        assert list(opened.plaintext.rows) == list(chunk.rows)
        prev, floor = keccak(blob).hex(), header.bucket


class SplitWork:
    """How much compressing a split did, counted on the splitter's real streams (the real
    methods run; the spy only adds up). Counting work instead of timing it keeps the check
    the same on a loaded two-core box as on a fast one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.compressed = 0  # bytes fed to a compressor
        self.probes = 0  # candidate ends measured (each copies a compressor and flushes it)
        start, extended, measured = split._Stream.start, split._Stream.extended, \
            split._Stream.measure

        def counted_start(head: bytes) -> Any:
            self.compressed += len(head)
            return start(head)

        def counted_extended(stream: Any, data: bytes) -> Any:
            self.compressed += len(data)
            return extended(stream, data)

        def counted_measure(stream: Any) -> int:
            self.probes += 1
            return measured(stream)

        monkeypatch.setattr(split._Stream, "start", staticmethod(counted_start))
        monkeypatch.setattr(split._Stream, "extended", counted_extended)
        monkeypatch.setattr(split._Stream, "measure", counted_measure)

    def split(self, rows: list[WireRow]) -> tuple[list[Any], int, int]:
        """Split `rows`; (chunks, bytes compressed, probes) for that split alone."""
        self.compressed = self.probes = 0
        chunks = split_diff(rows, [], state_after=MerkleState().apply)
        assert [r for c in chunks for r in c.rows] == rows
        assert all(c.measured == measure(c.rows) <= EPOCH_LIMIT for c in chunks)
        return chunks, self.compressed, self.probes


# A row is compressed about once per chunk (the stream is extended, never restarted), so the
# bytes compressed stay near the raw size; re-measuring every candidate from the chunk's
# start would compress each of a chunk's ~1,100 note rows hundreds of times.
COMPRESSED_PER_RAW_MAX = 2.0
# Interpolation lands near the end in a few probes and bisection bounds the rest: about
# log2(rows per chunk) probes in the worst case, whatever the row count.
PROBES_PER_CHUNK_MAX = 16


def test_split_work_grows_linearly_with_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A quadratic split shows in the work counted, not in seconds: 10,000 rows cost about
    ten times what 1,000 do, each row is compressed about once, and finding each chunk's end
    takes a bounded number of measurements."""
    work = SplitWork(monkeypatch)
    small_rows, big_rows = note_rows(1_000, seed=11), note_rows(10_000, seed=11)
    raw = {n: sum(len(r.encode()) + 1 for r in rows)
           for n, rows in ((1_000, small_rows), (10_000, big_rows))}
    small, small_bytes, small_probes = work.split(small_rows)
    big, big_bytes, big_probes = work.split(big_rows)
    assert len(small) == 1 and len(big) >= 8, "the fixture must fill one epoch, then many"
    for n, chunks, compressed, probes in ((1_000, small, small_bytes, small_probes),
                                          (10_000, big, big_bytes, big_probes)):
        assert raw[n] <= compressed <= COMPRESSED_PER_RAW_MAX * raw[n], (n, compressed, raw[n])
        assert probes <= PROBES_PER_CHUNK_MAX * len(chunks), (n, probes, len(chunks))
    # ten times the rows, about ten times the work (a quadratic split would be ~100 times)
    assert big_bytes <= 10 * COMPRESSED_PER_RAW_MAX * small_bytes, (big_bytes, small_bytes)


def test_row_too_large_refused_by_name() -> None:
    rows = note_rows(10) + [big_row()] + note_rows(5, seed=8)
    with pytest.raises(RowTooLarge) as info:
        split_diff(rows, [], state_after=MerkleState().apply)
    assert str(info.value) == (
        "row entity notes/huge compresses to more than 90 KB on its own and cannot fit one "
        "epoch; shrink or split it in Sibyl (push refuses until then, nothing else is "
        "blocked)")
    assert info.value.measured > EPOCH_LIMIT
    with pytest.raises(RowTooLarge) as info:
        split_diff([big_row("state", None, "focus")], [], state_after=MerkleState().apply)
    assert str(info.value).startswith("row state focus compresses to more than 90 KB")


def test_deletions_go_alone_when_the_first_row_does_not_fit_beside_them() -> None:
    dels = random_deletions(1200)
    row = big_row(hex_chars=110_000)  # ~55 KB alone; the deletions are ~45 KB
    assert measure([row]) <= EPOCH_LIMIT and measure([], dels) <= EPOCH_LIMIT
    assert measure([row], dels) > EPOCH_LIMIT
    first, second = split_diff([row], dels, state_after=MerkleState().apply)
    assert (first.rows, first.deleted) == ((), tuple(dels))
    assert (second.rows, second.deleted) == ((row,), ())
    with pytest.raises(DeletionsTooLarge):
        split_diff([row], random_deletions(4000), state_after=MerkleState().apply)


def test_snapshot_is_one_epoch_or_refused() -> None:
    rows = epoch2_rows()
    chunk = plan_snapshot(rows, [FIRST_ID])
    assert chunk.rows_root.hex() == E2["rows_root"] and chunk.n_rows == E2["n_rows"]
    assert chunk.deleted == (FIRST_ID,) and chunk.measured == measure(rows, [FIRST_ID])
    big = note_rows(4000)
    with pytest.raises(SnapshotTooLarge) as info:
        plan_snapshot(big)
    size = measure(big)
    assert size > EPOCH_LIMIT and info.value.measured == size
    assert str(info.value) == (
        f"the full state (4000 rows) compresses to {size} bytes, more than the 92160 bytes "
        "one epoch can carry, and snapshots are single-epoch")


# Hex text of one fixed seed: a row whose body is its first n characters measures a little
# more with each n, which lets a test hit the limit to the byte.
_EDGE_TEXT = random.Random(92160).randbytes(100_000).hex()


def edge_row(target: int) -> WireRow:
    """An entity row that measures exactly `target` on its own (found by bisecting the body
    length, then a scan around it; gzip output grows by 0 or 1 byte per hex digit here)."""
    def row(n: int) -> WireRow:
        return WireRow("entity", "edge", "notes", body=_EDGE_TEXT[:n])

    lo, hi = 0, len(_EDGE_TEXT)
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if measure([row(mid)]) < target else (lo, mid)
    for n in range(max(lo - 64, 0), lo + 64):
        if measure([row(n)]) == target:
            return row(n)
    raise AssertionError(f"no body length near {lo} measures exactly {target}")


def test_the_epoch_limit_at_its_exact_edge() -> None:
    """06-epochs.md: one epoch carries at most 92,160 measured bytes. A row measuring
    exactly that is one epoch (a diff or a snapshot), and it seals into the largest bucket;
    one byte more is refused by name."""
    assert EPOCH_LIMIT == 92_160 and HEADROOM == 512 and BUCKETS[-1] == 98_304
    at, over = edge_row(EPOCH_LIMIT), edge_row(EPOCH_LIMIT + 1)
    (chunk,) = split_diff([at], [], state_after=MerkleState().apply)
    assert chunk.rows == (at,) and chunk.measured == EPOCH_LIMIT
    assert plan_snapshot([at]).measured == EPOCH_LIMIT
    with pytest.raises(RowTooLarge) as info:
        split_diff([over], [], state_after=MerkleState().apply)
    assert info.value.measured == EPOCH_LIMIT + 1
    with pytest.raises(SnapshotTooLarge) as snap:
        plan_snapshot([over])
    assert snap.value.measured == EPOCH_LIMIT + 1
    raw = build_plaintext(tenant=V["tenant"], space=SPACE, seq=1, prev=ZERO, rows=chunk.rows,
                          rows_root=chunk.rows_root, n_rows=chunk.n_rows, created_at=CREATED_AT)
    blob, header = seal(raw, dek=DEK, owner=OWNER, space=SPACE, seq=1, prev=ZERO,
                        rows_root=chunk.rows_root, wraps=WRAPS, snapshot=False)
    assert header.bucket == BUCKETS[-1] and len(blob) == header.length + BUCKETS[-1] + 16
    assert open_epoch(blob, dek=DEK, **epoch_args(E1)).plaintext.rows == (at,)


def test_measure_is_gzip_plus_headroom() -> None:
    rows = vector_wire_rows()
    doc = b'{"deleted":[],"rows":[' + b",".join(r.encode() for r in rows) + b"]}"
    assert measure(rows) == len(gzip_bytes(doc)) + HEADROOM
    assert json.loads(doc)["rows"] == [r["row"] for r in V["rows"]]


def test_every_seal_draws_a_fresh_nonce() -> None:
    raw = build_epoch1()
    nonces = {seal(raw, dek=DEK, owner=OWNER, space=SPACE, seq=1, prev=ZERO,
                   rows_root=E1["rows_root"], wraps=WRAPS, snapshot=False)[1].nonce
              for _ in range(4)}
    assert len(nonces) == 4


def test_split_limit_is_bounded() -> None:
    for limit in (EPOCH_LIMIT + 1, HEADROOM, 0):
        with pytest.raises(ValueError):
            split_diff([], [], state_after=MerkleState().apply, limit=limit)
    small = split_diff(note_rows(200), [], state_after=MerkleState().apply, limit=4000)
    assert len(small) > 1 and all(c.measured <= 4000 for c in small)
