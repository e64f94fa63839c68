"""The space's state files under KINT_HOME (docs/how-it-works.md, "The mirror, the
watermark and the epoch cache"): what this machine last saw anchored, its freshness floor,
and every epoch it holds. The formats live in mirror_file (mirror, watermark) and
epoch_cache (one cached epoch); this module reads and writes them for one space.

Every file is written 0600 through a temp file and a rename, so a reader (verify beside a
push) never sees half a file. A file that does not parse or does not hold what it must is
refused with its path named, never silently replaced or read as empty: an unreadable
mirror is not an empty one. A KINT_HOME written in the previous layout is converted once,
on the first read (kint.tenant_worker.state_upgrade).

`record_epoch` is the one way an epoch enters this machine's picture, for push and pull
alike: cache the epoch, then save the mirror, then raise the watermark, in that order, so
a crash between any two steps leaves nothing that claims more than what was recorded.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import orjson

from kint.epochs.buckets import gzip_bytes
from kint.epochs.envelope import parse_header
from kint.epochs.errors import EpochError
from kint.epochs.plaintext import Plaintext
from kint.keccak import keccak
from kint.paths import FileSignature, atomic_write, file_signature, space_files
from kint.rows.canon import canonical_id
from kint.tenant_worker import state_upgrade
from kint.tenant_worker.epoch_cache import (
    META_SUFFIX,
    PAYLOAD_SUFFIX,
    CachedPlaintext,
    EpochMeta,
    load_plaintext,
    parse_meta,
)
from kint.tenant_worker.file_presence import SpaceFilePresence
from kint.tenant_worker.mirror_file import (
    Head,
    Mirror,
    MirrorRow,
    Watermark,
    parse_mirror,
    parse_watermark,
)
from kint.tenant_worker.state_format import (
    STATE_VERSION,
    ZERO_DIGEST,
    CorruptStateFile,
    parse_json,
    read_bytes,
    require,
)

__all__ = ["STATE_VERSION", "ZERO_DIGEST", "CorruptStateFile", "EpochMeta", "EpochRejected",
           "Head", "Mirror", "MirrorRow", "SpaceState", "Watermark", "apply_rows",
           "cache_epoch", "empty_mirror", "record_epoch", "unsaved_empty_mirror"]

_CACHED_NAME = re.compile(r"(\d{8})(\.meta\.json|\.json\.gz)")


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
        self.presence = SpaceFilePresence(str(home), self.file_names)
        self._lock = threading.Lock()
        self._cache: dict[Path | str, tuple[FileSignature, Any]] = {}
        self._meta_paths: dict[int, str] = {}
        self._upgrade_lock = threading.Lock()
        self._upgraded = False

    def _upgrade_once(self) -> None:
        """Convert a KINT_HOME written in the previous layout before the first read (once
        per process; a conversion that failed on a corrupt file is tried again, and says
        so, on the next read)."""
        if self._upgraded:
            return
        with self._upgrade_lock:
            if not self._upgraded:
                state_upgrade.convert(self.home, self.space_id, self.files)
                self._upgraded = True

    def _cached(self, path: Path | str, parse: Callable[[Path | str, bytes], Any]) -> Any:
        """Parse `path` from its bytes (or raise FileNotFoundError), reusing the last parse
        if the file is unchanged."""
        sig = file_signature(path)
        if sig is None:  # the read says how it is missing (FileNotFoundError, mostly)
            return parse(path, read_bytes(path))
        with self._lock:
            hit = self._cache.get(path)
            if hit is not None and hit[0] == sig:
                return hit[1]
        value = parse(path, read_bytes(path))
        with self._lock:
            self._cache[path] = (sig, value)
        return value

    def epoch_path(self, seq: int, suffix: str) -> Path:
        return self.files["epochs"] / f"{seq:08d}{suffix}"

    # reads

    def mirror(self) -> Mirror | None:
        """The mirror, or None when this machine has none (never connected, pulled or pushed)."""
        self._upgrade_once()
        try:
            return self._cached(self.files["mirror"],
                                lambda p, data: parse_mirror(Path(p), data, self.space_id))
        except FileNotFoundError:
            return None

    def watermark(self) -> Watermark | None:
        self._upgrade_once()
        try:
            return self._cached(self.files["watermark"],
                                lambda p, data: parse_watermark(Path(p), parse_json(p, data)))
        except FileNotFoundError:
            return None

    def meta(self, seq: int) -> EpochMeta:
        self._upgrade_once()
        # verify asks once per hit: the path string is built once per seq.
        path = self._meta_paths.get(seq)
        if path is None:
            path = self._meta_paths[seq] = str(self.epoch_path(seq, META_SUFFIX))
        try:
            meta = self._cached(path, lambda p, data: parse_meta(p, parse_json(p, data)))
        except FileNotFoundError:
            raise CorruptStateFile(path, "is missing from the epoch cache") from None
        require(meta.seq == seq, path, f"holds seq {meta.seq}, not {seq}")
        return meta

    def cached(self, seq: int) -> CachedPlaintext:
        """A cached epoch's plaintext and the gzip member it was kept as."""
        self._upgrade_once()
        path = self.epoch_path(seq, PAYLOAD_SUFFIX)
        try:
            obj = self._cached(path, lambda p, data: load_plaintext(p, data, self.space_id))
        except FileNotFoundError:
            raise CorruptStateFile(path, "is missing from the epoch cache") from None
        require(obj.plaintext.seq == seq, path, f"holds seq {obj.plaintext.seq}, not {seq}")
        return obj

    def plaintext(self, seq: int) -> Plaintext:
        return self.cached(seq).plaintext

    def cached_seqs(self) -> list[int]:
        """The epochs this machine holds: both files present (a pull --full fetches again
        an epoch one of whose files was moved aside)."""
        self._upgrade_once()
        try:
            names = os.listdir(self.files["epochs"])
        except FileNotFoundError:
            return []
        seen: dict[str, int] = {}
        for name in names:
            match = _CACHED_NAME.fullmatch(name)
            if match:
                seen[match.group(1)] = seen.get(match.group(1), 0) + 1
        return sorted(int(seq) for seq, count in seen.items() if count == 2)

    # writes

    def save_mirror(self, mirror: Mirror) -> None:
        atomic_write(self.files["mirror"], mirror.encode())
        self._remember(self.files["mirror"], mirror)

    def save_watermark(self, mark: Watermark) -> None:
        atomic_write(self.files["watermark"], orjson.dumps(mark.to_json()))
        self._remember(self.files["watermark"], mark)

    def _remember(self, path: Path, value: Any) -> None:
        """Cache what was just written under the new file's identity, so a restore does
        not parse the mirror it has just written after each of its epochs. Only this
        space's worker writes these files (under the head lock)."""
        sig = file_signature(path)
        if sig is not None:
            with self._lock:
                self._cache[path] = (sig, value)


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
        rows[cid] = MirrorRow(row.tier, row.category, row.key, leaf, provenance)
    # A snapshot is the whole state: an epoch skipped before it no longer leaves a gap.
    skipped = list(mirror.skipped) if mirror is not None and not plaintext.snapshot else []
    unread = mirror.unread_gap if skipped and mirror is not None else None
    rotated = bool(skipped) and mirror is not None and mirror.rotated_gap
    # A snapshot over no picture is every row's provenance until the cache is consulted.
    owed = (plaintext.snapshot and not old) or (mirror is not None and mirror.provenance_owed)
    return Mirror(space_id=space_id, anchored_root=plaintext.rows_root, skipped=skipped,
                  rows=rows, provenance_owed=owed, unread_gap=unread, rotated_gap=rotated)


def record_epoch(state: SpaceState, raw: bytes, plaintext: Plaintext, ciphertext: bytes,
                 meta: EpochMeta, payload: bytes | None = None) -> Mirror:
    """Apply one epoch to this machine's picture: cache it (the gzip member sealed in the
    ciphertext and the ciphertext's clear header, with the metadata), save the mirror,
    raise the watermark. `payload` is that gzip member as the epoch was opened (pull);
    without it (push: this machine sealed `raw` a moment ago) it is kint's own `gzip_bytes`
    of `raw`, which is what `seal` put in. Returns the new mirror; its `root_matches` says
    whether the rows reproduce the anchored root."""
    if plaintext.space != state.space_id:
        raise EpochRejected(f"epoch {meta.seq}: its plaintext belongs to another space")
    if keccak(ciphertext).hex() != meta.digest:
        raise EpochRejected(f"epoch {meta.seq}: the ciphertext does not hash to its digest")
    if (plaintext.seq, plaintext.prev, plaintext.rows_root) != (
            meta.seq, meta.prev, meta.rows_root):
        raise EpochRejected(f"epoch {meta.seq}: plaintext and metadata disagree")
    meta = with_header(meta, ciphertext)
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
    cache_epoch(state, payload if payload is not None else gzip_bytes(raw), ciphertext, meta)
    state.save_mirror(new)
    mark = state.watermark()
    if mark is None or meta.seq > mark.seq:
        state.save_watermark(Watermark(meta.seq, meta.digest, meta.block))
    return new


def with_header(meta: EpochMeta, ciphertext: bytes) -> EpochMeta:
    """`meta` with the ciphertext's clear header, which must agree with it."""
    try:
        header = parse_header(ciphertext)
    except EpochError as err:
        raise EpochRejected(f"epoch {meta.seq}: not a kint epoch ({err})") from None
    if header.bucket != meta.bucket or header.rows_root.hex() != meta.rows_root:
        raise EpochRejected(f"epoch {meta.seq}: its header and metadata disagree")
    return replace(meta, header=ciphertext[:header.length].hex())


def cache_epoch(state: SpaceState, payload: bytes, ciphertext: bytes, meta: EpochMeta) -> None:
    """The two cache files of one epoch: `payload` (the gzip member sealed in `ciphertext`)
    and the metadata with the ciphertext's clear header. `cached_seqs` lists an epoch once
    both are written."""
    if not meta.header:
        meta = with_header(meta, ciphertext)
    atomic_write(state.epoch_path(meta.seq, META_SUFFIX), orjson.dumps(meta.to_json()))
    atomic_write(state.epoch_path(meta.seq, PAYLOAD_SUFFIX), payload)


def unsaved_empty_mirror(state: SpaceState) -> Mirror:
    """Seq 0, no rows, in memory only: what a store about to be emptied will hold (a
    discarding pull saves one only once the old store is moved aside)."""
    return Mirror(space_id=state.space_id)


def empty_mirror(state: SpaceState) -> Mirror:
    """The mirror a connected machine that never pulled holds: seq 0, no rows, saved."""
    mirror = unsaved_empty_mirror(state)
    state.save_mirror(mirror)
    return mirror
