"""The mirror and the watermark (docs/how-it-works.md, "The mirror, the watermark and the
epoch cache"): what this machine last saw anchored, and its freshness floor.

The mirror keeps, per row, only what push, verify and pull use: the row's id (tier,
category, key), its leaf and the epoch that last changed it (its provenance). The row's
text is not kept here: the epoch cache holds it, compressed, in the plaintext of that very
epoch (history and `kint export` read it there). The file is one gzip member of JSON,
`mirror-<space>.json.gz`: the ids sorted as the merkle tree orders them, the seqs in the same
order, and the leaves as one base64 string. Sibyl's free-tier cap counts every byte under
KINT_HOME, and random 32-byte leaves do not compress, so this is about 48 bytes a row where
the previous layout (every field in JSON) took about 470.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kint.epochs.plaintext import Deletion
from kint.rows.canon import TIERS, canonical_id, row_label
from kint.rows.merkle import MerkleTree
from kint.tenant_worker.state_format import (
    STATE_VERSION,
    ZERO_DIGEST,
    CorruptStateFile,
    gunzip,
    gzip_json,
    is_hex64,
    is_int,
    parse_json,
    require,
    require_version,
)

LEAF_LEN = 32


@dataclass(frozen=True, slots=True)
class MirrorRow:
    """One anchored row: its identity, its leaf, and the epoch that last changed it."""

    tier: str
    category: str | None
    key: str
    leaf: bytes
    seq: int  # the epoch that last changed this row (its provenance)

    @property
    def canonical_id(self) -> str:
        return canonical_id(self.tier, self.category, self.key)

    @property
    def deletion(self) -> Deletion:
        return (self.tier, self.category, self.key)

    def label(self) -> str:
        return row_label(self.tier, self.category, self.key)


def row_of(cid: str, leaf: bytes, seq: int) -> MirrorRow | None:
    """The row a canonical id names, or None when the id is not one kint makes."""
    parts = cid.split("\x00", 2)
    if len(parts) != 3 or parts[0] not in TIERS or not parts[2]:
        return None
    tier, category, key = parts
    return MirrorRow(tier, category if tier == "entity" else (category or None), key, leaf,
                     seq)


@dataclass
class Head:
    seq: int = 0
    digest: str = ZERO_DIGEST
    block: int | None = None
    bucket: int | None = None
    tx: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "digest": self.digest, "block": self.block,
                "bucket": self.bucket, "tx": self.tx}


@dataclass
class Mirror:
    space_id: str
    head: Head = field(default_factory=Head)
    anchored_root: str | None = None
    skipped: list[int] = field(default_factory=list)
    rows: dict[str, MirrorRow] = field(default_factory=dict)
    # A snapshot applied over no picture made itself every row's provenance; the epoch
    # cache may name older ones (provenance.refine_from_cache). Set in the same write that
    # records the snapshot and cleared by the refinement's own save, so a refinement lost
    # (a full disk, a crash) is tried again by the next pull rather than forgotten.
    provenance_owed: bool = False
    # Why the last pull could not read the epoch it stopped at (the endpoint would not serve
    # it, served it altered, or its link broke), None when the gap is an epoch it read and
    # can never apply. Only the latter may be anchored over (`--over-skipped`): the former
    # may hold rows another machine wrote, which nobody here has seen (push_refusals.py).
    unread_gap: str | None = None
    # The epoch the last pull stopped at is sealed under a data key this machine does not
    # hold: the key was rotated on another machine (`kint rekey`). v0.3.0's 03-new-machine.md,
    # "Gaps": a wrong key does not heal on the next pull; connect again. The pull's line
    # and push's hint say so rather than "run `kint pull`" (pull.py, push_refusals.py).
    rotated_gap: bool = False
    _tree: MerkleTree | None = None
    _order: dict[str, int] | None = None
    _proofs: dict[str, tuple[list[list[str | bool]], bool]] | None = None

    def ordered(self) -> list[str]:
        """The ids in the merkle tree's order (UTF-8 bytes)."""
        return sorted(self.rows, key=lambda cid: cid.encode("utf-8"))

    def _build(self) -> None:
        ids = self.ordered()
        self._order = {cid: i for i, cid in enumerate(ids)}
        self._tree = MerkleTree([self.rows[cid].leaf for cid in ids])

    @property
    def root(self) -> bytes:
        if self._tree is None:
            self._build()
        assert self._tree is not None
        return self._tree.root

    def proof(self, cid: str) -> list[list[str | bool]]:
        if self._tree is None:
            self._build()
        assert self._tree is not None and self._order is not None
        return self._tree.proof(self._order[cid])

    def checked_proof(self, cid: str) -> tuple[list[list[str | bool]], bool]:
        """The row's inclusion proof and whether it reproduces the anchored root, computed
        once per mirror as loaded (the mirror is immutable once parsed; a new file is a new
        object)."""
        from kint.rows.merkle import verify_proof

        if self._proofs is None:
            self._proofs = {}
        hit = self._proofs.get(cid)
        if hit is None:
            proof = self.proof(cid)
            root = bytes.fromhex(self.anchored_root) if self.anchored_root else b""
            hit = (proof, verify_proof(self.rows[cid].leaf, proof, root))
            self._proofs[cid] = hit
        return hit

    @property
    def root_matches(self) -> bool:
        return self.anchored_root is not None and self.root.hex() == self.anchored_root

    @property
    def complete(self) -> bool:
        return not self.skipped and (self.head.seq == 0 or self.root_matches)

    def encode(self) -> bytes:
        ids = self.ordered()
        rows = [self.rows[cid] for cid in ids]
        obj: dict[str, Any] = {
            "v": STATE_VERSION, "space": self.space_id, "head": self.head.to_json(),
            "anchored_root": self.anchored_root, "skipped": self.skipped, "ids": ids,
            "seqs": [r.seq for r in rows],
            "leaves": base64.b64encode(b"".join(r.leaf for r in rows)).decode("ascii")}
        if self.provenance_owed:  # only then: a mirror without it reads as before
            obj["provenance_owed"] = True
        if self.unread_gap is not None and self.skipped:  # the same
            obj["unread_gap"] = self.unread_gap
        if self.rotated_gap and self.skipped:  # the same
            obj["rotated_gap"] = True
        return gzip_json(obj)


def parse_head(path: Path, obj: dict[str, Any]) -> tuple[Head, str | None, list[int]]:
    """The head, the anchored root and the skipped epochs, as both layouts record them."""
    head = obj.get("head")
    require(isinstance(head, dict), path, "has no head")
    require(is_int(head.get("seq")) and head["seq"] >= 0, path, "head seq is malformed")
    require(is_hex64(head.get("digest")), path, "head digest is malformed")
    for name in ("block", "bucket"):
        require(head.get(name) is None or is_int(head.get(name)), path,
                f"head {name} is malformed")
    require(head.get("tx") is None or isinstance(head.get("tx"), str), path,
            "head tx is malformed")
    root = obj.get("anchored_root")
    require(root is None or is_hex64(root), path, "anchored_root is malformed")
    skipped = obj.get("skipped")
    require(isinstance(skipped, list) and all(is_int(s) for s in skipped), path,
            "skipped is malformed")
    return (Head(head["seq"], head["digest"], head.get("block"), head.get("bucket"),
                 head.get("tx")), root, list(skipped))


def parse_mirror(path: Path, data: bytes, space_id: str) -> Mirror:
    obj = parse_json(path, gunzip(path, data))
    require(isinstance(obj, dict), path, "is not a JSON object")
    require_version(path, obj.get("v"))
    require(obj.get("space") == space_id, path, "belongs to another space")
    head, root, skipped = parse_head(path, obj)
    ids, seqs, leaves = obj.get("ids"), obj.get("seqs"), obj.get("leaves")
    require(isinstance(ids, list) and isinstance(seqs, list) and len(ids) == len(seqs), path,
            "ids and seqs are malformed")
    require(isinstance(leaves, str), path, "leaves are malformed")
    try:
        packed = base64.b64decode(leaves, validate=True)
    except (binascii.Error, ValueError):
        raise CorruptStateFile(path, "leaves are not base64") from None
    require(len(packed) == LEAF_LEN * len(ids), path, "leaves do not match the ids")
    owed = obj.get("provenance_owed", False)
    require(isinstance(owed, bool), path, "provenance_owed is malformed")
    unread = obj.get("unread_gap")
    require(unread is None or isinstance(unread, str), path, "unread_gap is malformed")
    rotated = obj.get("rotated_gap", False)
    require(isinstance(rotated, bool), path, "rotated_gap is malformed")
    mirror = Mirror(space_id=space_id, head=head, anchored_root=root, skipped=skipped,
                    provenance_owed=owed, unread_gap=unread, rotated_gap=rotated)
    before = b""
    for i, (cid, seq) in enumerate(zip(ids, seqs)):
        require(isinstance(cid, str), path, "an id is not text")
        require(is_int(seq) and seq >= 1, path, f"row {cid!r} has no epoch")
        row = row_of(cid, packed[LEAF_LEN * i:LEAF_LEN * (i + 1)], seq)
        require(row is not None, path, f"{cid!r} is not a row id")
        encoded = cid.encode("utf-8")
        require(encoded > before, path, f"row {cid!r} is out of order or appears twice")
        before = encoded
        mirror.rows[cid] = row  # type: ignore[assignment]
    return mirror


@dataclass
class Watermark:
    seq: int
    digest: str
    block: int | None

    def to_json(self) -> dict[str, Any]:
        return {"v": STATE_VERSION, "seq": self.seq, "digest": self.digest, "block": self.block}


def parse_watermark(path: Path, obj: Any) -> Watermark:
    require(isinstance(obj, dict), path, "is not a JSON object")
    require_version(path, obj.get("v"))
    require(is_int(obj.get("seq")) and obj["seq"] >= 0, path, "seq is malformed")
    require(is_hex64(obj.get("digest")), path, "digest is malformed")
    require(obj.get("block") is None or is_int(obj.get("block")), path, "block is malformed")
    return Watermark(obj["seq"], obj["digest"], obj.get("block"))
