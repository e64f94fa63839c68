"""The space's state files under KINT_HOME (seed 001, "The mirror and the watermark", "The
epoch cache"): what this machine last saw anchored, its freshness floor, and every epoch
it holds.

Every file is written 0600 through a temp file and a rename, so a reader (verify beside a
push) never sees half a file. A file that does not parse or does not hold what it must is
refused with its path named, never silently replaced or read as empty: an unreadable
mirror is not an empty one.

`record_epoch` is the one way an epoch enters this machine's picture, for push and pull
alike: cache the epoch, then save the mirror, then raise the watermark, in that order, so
a crash between any two steps leaves nothing that claims more than what was recorded.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from eth_hash.auto import keccak

from kint.epochs.errors import PlaintextError
from kint.epochs.plaintext import Plaintext, parse_plaintext
from kint.paths import atomic_write, space_files
from kint.rows.canon import TIERS, Row, canonical_id
from kint.rows.merkle import MerkleTree

STATE_VERSION = 1
ZERO_DIGEST = "00" * 32
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class CorruptStateFile(Exception):
    """A state file exists but cannot be trusted. Names the file; nothing was rewritten."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


def _load_json(path: Path | str) -> Any:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise
    except OSError as err:
        raise CorruptStateFile(path, f"cannot be read ({err.strerror})") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise CorruptStateFile(path, "is not valid JSON (truncated or garbled)") from None


def _require(cond: bool, path: Path, why: str) -> None:
    if not cond:
        raise CorruptStateFile(path, why)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_hex64(value: Any) -> bool:
    return isinstance(value, str) and bool(_HEX64.match(value))


# -- the mirror ----------------------------------------------------------------------------


@dataclass
class MirrorRow:
    row: Row
    leaf: bytes
    seq: int  # the epoch that last changed this row (its provenance)

    def to_json(self) -> dict[str, Any]:
        return {"tier": self.row.tier, "category": self.row.category, "key": self.row.key,
                "fields": self.row.fields, "leaf": self.leaf.hex(), "seq": self.seq}


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
    _tree: MerkleTree | None = None
    _order: dict[str, int] | None = None
    _proofs: dict[str, tuple[list[list[str | bool]], bool]] | None = None

    def _build(self) -> None:
        ids = sorted(self.rows, key=lambda cid: cid.encode("utf-8"))
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

    def to_json(self) -> dict[str, Any]:
        ordered = sorted(self.rows.values(), key=lambda r: r.row.canonical_id.encode("utf-8"))
        return {"v": STATE_VERSION, "space": self.space_id, "head": self.head.to_json(),
                "anchored_root": self.anchored_root, "skipped": self.skipped,
                "rows": [r.to_json() for r in ordered]}


def _parse_row(path: Path, obj: Any) -> MirrorRow:
    _require(isinstance(obj, dict), path, "a row is not an object")
    tier, category, key, fields = obj.get("tier"), obj.get("category"), obj.get("key"), obj.get("fields")
    _require(tier in TIERS, path, f"a row has an unknown tier {tier!r}")
    _require(category is None or isinstance(category, str), path, "a row's category is not text")
    _require(isinstance(key, str) and bool(key), path, "a row has no key")
    _require(isinstance(fields, dict) and all(isinstance(k, str) and (v is None or isinstance(v, str))
                                              for k, v in fields.items()),
             path, f"row {key!r} has malformed fields")
    _require(_is_hex64(obj.get("leaf")), path, f"row {key!r} has a malformed leaf")
    _require(_is_int(obj.get("seq")) and obj["seq"] >= 1, path, f"row {key!r} has no epoch")
    row = Row(tier, category, key, fields)
    leaf = bytes.fromhex(obj["leaf"])
    _require(row.leaf == leaf, path, f"row {key!r}: its leaf is not the hash of its fields")
    return MirrorRow(row=row, leaf=leaf, seq=obj["seq"])


def parse_mirror(path: Path, obj: Any, space_id: str) -> Mirror:
    _require(isinstance(obj, dict), path, "is not a JSON object")
    _require(obj.get("v") == STATE_VERSION, path, f"has unknown version {obj.get('v')!r}")
    _require(obj.get("space") == space_id, path, "belongs to another space")
    head = obj.get("head")
    _require(isinstance(head, dict), path, "has no head")
    _require(_is_int(head.get("seq")) and head["seq"] >= 0, path, "head seq is malformed")
    _require(_is_hex64(head.get("digest")), path, "head digest is malformed")
    for name in ("block", "bucket"):
        _require(head.get(name) is None or _is_int(head.get(name)), path, f"head {name} is malformed")
    _require(head.get("tx") is None or isinstance(head.get("tx"), str), path, "head tx is malformed")
    root = obj.get("anchored_root")
    _require(root is None or _is_hex64(root), path, "anchored_root is malformed")
    skipped = obj.get("skipped")
    _require(isinstance(skipped, list) and all(_is_int(s) for s in skipped), path,
             "skipped is malformed")
    rows = obj.get("rows")
    _require(isinstance(rows, list), path, "rows is not a list")
    mirror = Mirror(space_id=space_id,
                    head=Head(head["seq"], head["digest"], head.get("block"), head.get("bucket"),
                              head.get("tx")),
                    anchored_root=root, skipped=list(skipped))
    for item in rows:
        parsed = _parse_row(path, item)
        cid = parsed.row.canonical_id
        _require(cid not in mirror.rows, path, f"row {parsed.row.key!r} appears twice")
        mirror.rows[cid] = parsed
    return mirror


@dataclass
class Watermark:
    seq: int
    digest: str
    block: int | None

    def to_json(self) -> dict[str, Any]:
        return {"v": STATE_VERSION, "seq": self.seq, "digest": self.digest, "block": self.block}


def parse_watermark(path: Path, obj: Any) -> Watermark:
    _require(isinstance(obj, dict), path, "is not a JSON object")
    _require(obj.get("v") == STATE_VERSION, path, f"has unknown version {obj.get('v')!r}")
    _require(_is_int(obj.get("seq")) and obj["seq"] >= 0, path, "seq is malformed")
    _require(_is_hex64(obj.get("digest")), path, "digest is malformed")
    _require(obj.get("block") is None or _is_int(obj.get("block")), path, "block is malformed")
    return Watermark(obj["seq"], obj["digest"], obj.get("block"))


# -- epochs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpochMeta:
    seq: int
    digest: str
    prev: str
    block: int
    tx: str
    bucket: int
    rows_root: str
    writer: str
    cost: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"seq": self.seq, "digest": self.digest, "prev": self.prev, "block": self.block,
               "tx": self.tx, "bucket": self.bucket, "rows_root": self.rows_root,
               "writer": self.writer}
        if self.cost is not None:
            out["cost"] = self.cost
        return out


def parse_meta(path: Path, obj: Any) -> EpochMeta:
    _require(isinstance(obj, dict), path, "is not a JSON object")
    for name in ("seq", "block", "bucket"):
        _require(_is_int(obj.get(name)), path, f"{name} is malformed")
    for name in ("digest", "prev", "rows_root"):
        _require(_is_hex64(obj.get(name)), path, f"{name} is malformed")
    for name in ("tx", "writer"):
        _require(isinstance(obj.get(name), str), path, f"{name} is malformed")
    cost = obj.get("cost")
    _require(cost is None or isinstance(cost, dict), path, "cost is malformed")
    return EpochMeta(obj["seq"], obj["digest"], obj["prev"], obj["block"], obj["tx"],
                     obj["bucket"], obj["rows_root"], obj["writer"], cost)


def load_plaintext(path: Path | str, raw: bytes, space_id: str) -> Plaintext:
    """A cached epoch's plaintext: the exact bytes the epoch decrypted to, parsed and checked
    as an epoch reader checks them."""
    try:
        plaintext = parse_plaintext(raw)
    except PlaintextError as err:
        raise CorruptStateFile(path, f"is not an epoch plaintext ({err})") from None
    _require(plaintext.space == space_id, path, "belongs to another space")
    return plaintext


class SpaceState:
    """Reads and writes one space's state files. Parsed files are cached against the
    file's identity (inode, size, mtime), so verify on an unchanged mirror parses nothing;
    an atomic replace always gives a new inode."""

    def __init__(self, home: Path, space_id: str) -> None:
        self.home = home
        self.space_id = space_id
        self.files = space_files(home, space_id[:16])
        # The same paths as strings: `status` stats each of them on every call.
        self.file_names = {name: str(path) for name, path in self.files.items()}
        self._lock = threading.Lock()
        self._cache: dict[Path | str, tuple[tuple[int, int, int], Any]] = {}
        self._meta_paths: dict[int, str] = {}

    def _cached(self, path: Path | str, parse: Any) -> Any:
        """Parse `path` (or raise FileNotFoundError), reusing the last parse if unchanged."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._cache.get(path)
            if hit is not None and hit[0] == sig:
                return hit[1]
        value = parse(path, _load_json(path))
        with self._lock:
            self._cache[path] = (sig, value)
        return value

    def _cached_raw(self, path: Path | str, parse: Any) -> Any:
        """`_cached` for a file parsed from its raw bytes (an epoch's plaintext)."""
        st = os.stat(path)
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._cache.get(path)
            if hit is not None and hit[0] == sig:
                return hit[1]
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except OSError as err:
            raise CorruptStateFile(path, f"cannot be read ({err.strerror})") from None
        value = parse(path, raw)
        with self._lock:
            self._cache[path] = (sig, value)
        return value

    def epoch_path(self, seq: int, suffix: str) -> Path:
        return self.files["epochs"] / f"{seq:08d}{suffix}"

    # reads

    def mirror(self) -> Mirror | None:
        """The mirror, or None when this machine has none (never connected, pulled or pushed)."""
        try:
            return self._cached(self.files["mirror"],
                                lambda p, o: parse_mirror(p, o, self.space_id))
        except FileNotFoundError:
            return None

    def watermark(self) -> Watermark | None:
        try:
            return self._cached(self.files["watermark"], parse_watermark)
        except FileNotFoundError:
            return None

    def meta(self, seq: int) -> EpochMeta:
        # verify asks once per hit: the path string is built once per seq.
        path = self._meta_paths.get(seq)
        if path is None:
            path = self._meta_paths[seq] = str(self.epoch_path(seq, ".meta.json"))
        try:
            meta = self._cached(path, parse_meta)
        except FileNotFoundError:
            raise CorruptStateFile(path, "is missing from the epoch cache") from None
        _require(meta.seq == seq, path, f"holds seq {meta.seq}, not {seq}")
        return meta

    def plaintext(self, seq: int) -> Plaintext:
        path = self.epoch_path(seq, ".json")
        try:
            obj = self._cached_raw(path, lambda p, raw: load_plaintext(p, raw, self.space_id))
        except FileNotFoundError:
            raise CorruptStateFile(path, "is missing from the epoch cache") from None
        _require(obj.seq == seq, path, f"holds seq {obj.seq}, not {seq}")
        return obj

    def cached_seqs(self) -> list[int]:
        try:
            names = os.listdir(self.files["epochs"])
        except FileNotFoundError:
            return []
        return sorted(int(n[:8]) for n in names if re.fullmatch(r"\d{8}\.meta\.json", n))

    # writes

    def save_mirror(self, mirror: Mirror) -> None:
        atomic_write(self.files["mirror"], orjson.dumps(mirror.to_json()))
        self._remember(self.files["mirror"], mirror)

    def save_watermark(self, mark: Watermark) -> None:
        atomic_write(self.files["watermark"], orjson.dumps(mark.to_json()))
        self._remember(self.files["watermark"], mark)

    def _remember(self, path: Path, value: Any) -> None:
        """Cache what was just written under the new file's identity. Parsing the mirror
        re-hashes every row (a leaf that is not the hash of its fields is refused), so a
        restore that re-read it after each of its epochs hashed the whole store each time.
        Only this space's worker writes these files (under the head lock)."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return
        with self._lock:
            self._cache[path] = ((st.st_ino, st.st_size, st.st_mtime_ns), value)


class EpochRejected(Exception):
    """An epoch that cannot be recorded on top of this machine's picture."""


def apply_rows(mirror: Mirror | None, space_id: str, plaintext: Plaintext) -> Mirror:
    """The mirror after `plaintext`, as a new object. A snapshot replaces the picture (its
    `deleted` list is history only); a row carried unchanged keeps the epoch that last
    changed it (its provenance)."""
    seq = plaintext.seq
    old = mirror.rows if mirror is not None else {}
    rows: dict[str, MirrorRow] = {} if plaintext.snapshot else dict(old)
    if not plaintext.snapshot:
        for tier, category, key in plaintext.deleted:
            rows.pop(canonical_id(tier, category, key), None)
    for wire in plaintext.rows:
        row = wire.to_row()
        cid = row.canonical_id
        leaf = row.leaf
        before = old.get(cid)
        provenance = before.seq if before is not None and before.leaf == leaf else seq
        rows[cid] = MirrorRow(row=row, leaf=leaf, seq=provenance)
    # A snapshot is the whole state: an epoch skipped before it no longer leaves a gap.
    skipped = list(mirror.skipped) if mirror is not None and not plaintext.snapshot else []
    return Mirror(space_id=space_id, anchored_root=plaintext.rows_root, skipped=skipped,
                  rows=rows)


def record_epoch(state: SpaceState, raw: bytes, plaintext: Plaintext, ciphertext: bytes,
                 meta: EpochMeta) -> Mirror:
    """Apply one epoch to this machine's picture: cache it (the ciphertext as sent, the
    plaintext bytes as decrypted, the metadata), save the mirror, raise the watermark.
    Returns the new mirror; its `root_matches` says whether the rows reproduce the
    anchored root."""
    if plaintext.space != state.space_id:
        raise EpochRejected(f"epoch {meta.seq}: its plaintext belongs to another space")
    if keccak(ciphertext).hex() != meta.digest:
        raise EpochRejected(f"epoch {meta.seq}: the ciphertext does not hash to its digest")
    if (plaintext.seq, plaintext.prev, plaintext.rows_root) != (
            meta.seq, meta.prev, meta.rows_root):
        raise EpochRejected(f"epoch {meta.seq}: plaintext and metadata disagree")
    mirror = state.mirror()
    current = mirror.head if mirror is not None else Head()
    if not plaintext.snapshot:
        if meta.seq != current.seq + 1 or meta.prev != current.digest:
            raise EpochRejected(
                f"epoch {meta.seq} does not follow seq {current.seq} ({current.digest[:12]})")
    elif meta.seq <= current.seq:
        raise EpochRejected(f"snapshot epoch {meta.seq} is not past seq {current.seq}")
    new = apply_rows(mirror, state.space_id, plaintext)
    new.head = Head(meta.seq, meta.digest, meta.block, meta.bucket, meta.tx)
    cache_epoch(state, raw, ciphertext, meta)
    state.save_mirror(new)
    mark = state.watermark()
    if mark is None or meta.seq > mark.seq:
        state.save_watermark(Watermark(meta.seq, meta.digest, meta.block))
    return new


def cache_epoch(state: SpaceState, raw: bytes, ciphertext: bytes, meta: EpochMeta) -> None:
    """The three cache files of one epoch; the metadata last, since `cached_seqs` lists an
    epoch by its metadata."""
    atomic_write(state.epoch_path(meta.seq, ".bin"), ciphertext)
    atomic_write(state.epoch_path(meta.seq, ".json"), raw)
    atomic_write(state.epoch_path(meta.seq, ".meta.json"), orjson.dumps(meta.to_json()))


def empty_mirror(state: SpaceState) -> Mirror:
    """The mirror a connected machine that never pulled holds: seq 0, no rows."""
    mirror = Mirror(space_id=state.space_id)
    state.save_mirror(mirror)
    return mirror
