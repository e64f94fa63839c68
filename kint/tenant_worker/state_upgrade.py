"""A KINT_HOME written by the previous state layout (1) is converted once, in place, the
first time the space's state is read.

Why convert rather than refuse: the way out of a refusal would be `kint pull
--discard-local`, a full restore from the chain that moves the store aside; everything
the new layout needs is already on disk. What changes:

- `mirror-<space>.json` (every row's fields, leaf and seq) becomes
  `mirror-<space>.json.gz` (ids, leaves and seqs). Each row's leaf is checked against its
  fields one last time, as the old reader did.
- per cached epoch, `NNNNNNNN.bin` (ciphertext) and `NNNNNNNN.json` (plaintext) become
  `NNNNNNNN.json.gz` (kint's own gzip of the plaintext, which is what kint's `seal` put in
  the ciphertext) and the ciphertext's clear header, kept in `NNNNNNNN.meta.json`. The
  ciphertext must still hash to the digest its metadata records.
- the watermark's version goes to 2, and the apply journal of a pull killed mid-epoch
  (`applying-<space>.json`, its plaintext in hex) becomes `applying-<space>.json.gz`.

Every write is atomic and each step can be repeated, in the order: each epoch (new
metadata, gzip, then the old plaintext and ciphertext removed), the new mirror, the
watermark, and last the old mirror, whose presence is what says a conversion is due. A
conversion killed half-way finishes on the next read. A file that cannot be trusted
stops it, named, with nothing of that file rewritten.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

import orjson

from kint.epochs.buckets import gzip_bytes
from kint.epochs.envelope import parse_header
from kint.epochs.errors import EpochError, PlaintextError
from kint.epochs.plaintext import parse_plaintext
from kint.keccak import keccak
from kint.paths import apply_journal_path, atomic_write, remove_file
from kint.rows.canon import TIERS, Row
from kint.tenant_worker.epoch_cache import META_SUFFIX, PAYLOAD_SUFFIX, parse_meta
from kint.tenant_worker.mirror_file import Head, Mirror, MirrorRow, parse_head
from kint.tenant_worker.state_format import (
    PREVIOUS_VERSION,
    STATE_VERSION,
    CorruptStateFile,
    is_int,
    load_json,
    previous_mirror,
    read_bytes,
    require,
)

log = logging.getLogger("kint.worker")

_OLD_CIPHERTEXT = re.compile(r"(\d{8})\.bin")


def convert(home: Path, space_id: str, files: dict[str, Path]) -> bool:
    """Convert this space's state files from layout 1, if they are in it. Returns whether
    anything was converted."""
    old = previous_mirror(home, space_id[:16])
    if not old.exists():
        return False
    mirror = _parse_old_mirror(old, load_json(old), space_id)
    epochs = _convert_epochs(files["epochs"], space_id)
    new_journal = apply_journal_path(home, space_id[:16])
    _convert_journal(new_journal.with_name(f"applying-{space_id[:16]}.json"), new_journal)
    atomic_write(files["mirror"], mirror.encode())
    _convert_watermark(files["watermark"])
    remove_file(old)
    log.info("space %s: converted the state files to layout %d (%d rows, %d cached epochs)",
             space_id[:16], STATE_VERSION, len(mirror.rows), epochs)
    return True


def _parse_old_row(path: Path, obj: Any) -> MirrorRow:
    require(isinstance(obj, dict), path, "a row is not an object")
    tier, category, key, fields = (obj.get("tier"), obj.get("category"), obj.get("key"),
                                   obj.get("fields"))
    require(tier in TIERS, path, f"a row has an unknown tier {tier!r}")
    require(category is None or isinstance(category, str), path, "a row's category is not text")
    require(isinstance(key, str) and bool(key), path, "a row has no key")
    require(isinstance(fields, dict)
            and all(isinstance(k, str) and (v is None or isinstance(v, str))
                    for k, v in fields.items()),
            path, f"row {key!r} has malformed fields")
    leaf, seq = obj.get("leaf"), obj.get("seq")
    require(isinstance(leaf, str) and len(leaf) == 64, path, f"row {key!r} has a malformed leaf")
    require(is_int(seq) and seq >= 1, path,
            f"row {key!r} has no epoch")
    row = Row(tier, category, key, fields)
    require(row.leaf.hex() == leaf, path, f"row {key!r}: its leaf is not the hash of its fields")
    return MirrorRow(tier, category, key, row.leaf, seq)


def parse_previous_head(path: Path, obj: Any,
                        space_id: str) -> tuple[Head, str | None, list[int]]:
    """A mirror in the previous layout checked as far as its head, and the head, anchored
    root and skipped epochs (`parse_head`): all a reader that only wants how far the space
    got needs of it (kint.commands.seen_here, before any conversion)."""
    require(isinstance(obj, dict), path, "is not a JSON object")
    require(obj.get("v") == PREVIOUS_VERSION, path, f"has unknown version {obj.get('v')!r}")
    require(obj.get("space") == space_id, path, "belongs to another space")
    return parse_head(path, obj)


def _parse_old_mirror(path: Path, obj: Any, space_id: str) -> Mirror:
    head, root, skipped = parse_previous_head(path, obj, space_id)
    rows = obj.get("rows")
    require(isinstance(rows, list), path, "rows is not a list")
    mirror = Mirror(space_id=space_id, head=head, anchored_root=root, skipped=skipped)
    for item in rows:
        row = _parse_old_row(path, item)
        require(row.canonical_id not in mirror.rows, path, f"row {row.key!r} appears twice")
        mirror.rows[row.canonical_id] = row
    return mirror


def _convert_epochs(folder: Path, space_id: str) -> int:
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return 0
    count = 0
    for name in sorted(names):
        match = _OLD_CIPHERTEXT.fullmatch(name)
        if match is None:
            continue
        stem = folder / match.group(1)
        bin_path = folder / name
        plain = Path(f"{stem}.json")
        if plain.exists():
            _convert_epoch(bin_path, plain, Path(f"{stem}{META_SUFFIX}"),
                           Path(f"{stem}{PAYLOAD_SUFFIX}"), int(match.group(1)), space_id)
            plain.unlink()
        elif not Path(f"{stem}{PAYLOAD_SUFFIX}").exists():
            raise CorruptStateFile(plain, "is missing from the epoch cache (its ciphertext "
                                          "is there): move both aside and run `kint pull "
                                          "--full`")
        bin_path.unlink()
        count += 1
    return count


def _convert_epoch(bin_path: Path, plain: Path, meta_path: Path, gz_path: Path, seq: int,
                   space_id: str) -> None:
    blob = read_bytes(bin_path)
    obj = load_json(meta_path)
    require(isinstance(obj, dict), meta_path, "is not a JSON object")
    require(obj.get("seq") == seq, meta_path, f"does not hold seq {seq}")
    require(keccak(blob).hex() == obj.get("digest"), bin_path,
            f"does not hash to the digest of epoch {seq}")
    try:
        header = parse_header(blob)
    except EpochError as err:
        raise CorruptStateFile(bin_path, f"is not a kint epoch ({err})") from None
    raw = read_bytes(plain)
    try:
        plaintext = parse_plaintext(raw)
    except PlaintextError as err:
        raise CorruptStateFile(plain, f"is not an epoch plaintext ({err})") from None
    require(plaintext.space == space_id and plaintext.seq == seq, plain,
            f"is not epoch {seq} of this space")
    meta = parse_meta(meta_path, {**obj, "header": blob[:header.length].hex()})
    atomic_write(meta_path, orjson.dumps(meta.to_json()))
    atomic_write(gz_path, gzip_bytes(raw))


def _convert_journal(old: Path, new: Path) -> None:
    """A pull killed mid-epoch under layout 1 left its journal (`old`) as the plaintext in
    hex; the next pull resumes from the gzip of it (`new`)."""
    try:
        obj = load_json(old)
    except FileNotFoundError:
        return
    try:
        raw = bytes.fromhex(obj["plaintext"])
        parse_plaintext(raw)
    except (KeyError, TypeError, ValueError, PlaintextError):
        raise CorruptStateFile(old, "is not a pull's apply journal; move it aside and run "
                                    "`kint pull`") from None
    atomic_write(new, gzip_bytes(raw))
    remove_file(old)


def _convert_watermark(path: Path) -> None:
    try:
        obj = load_json(path)
    except FileNotFoundError:
        return
    if isinstance(obj, dict) and obj.get("v") == PREVIOUS_VERSION:
        atomic_write(path, orjson.dumps({**obj, "v": STATE_VERSION}))
