"""One epoch in this machine's cache (docs/how-it-works.md, "The mirror, the watermark and
the epoch cache"; the layout against v0.3.0's in docs/protocol.md): two files per epoch,
named by the eight-digit seq under `epochs/<space>/`.

- `NNNNNNNN.json.gz`: the gzip member the epoch sealed, byte for byte. It inflates to the
  exact plaintext the epoch decrypted to (`zcat` reads it).
- `NNNNNNNN.meta.json`: seq, digest, prev, block, transaction, bucket, rows root, writer,
  the epoch's clear header (hex: flags, GCM nonce, dek id, bucket, wraps), and the cost for
  an epoch this machine pushed.

Why not the ciphertext: it is the gzip padded to a bucket (up to 98,304 bytes for a few
KB of rows once the bucket has ratcheted) and then encrypted, so it cannot be compressed,
and Sibyl's free-tier cap counts every byte under KINT_HOME. The header and the gzip are
enough to rebuild it exactly with the data key (`kint.epochs.envelope.rebuild`): history
checks the rebuilt blob's keccak against the anchored digest, and pull reuses it instead of
fetching the calldata again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kint.epochs.envelope import Header, parse_header
from kint.epochs.errors import EpochError, PlaintextError
from kint.epochs.plaintext import Plaintext, parse_plaintext
from kint.tenant_worker.state_format import (
    CorruptStateFile,
    gunzip,
    is_hex64,
    is_int,
    require,
)

PAYLOAD_SUFFIX = ".json.gz"
META_SUFFIX = ".meta.json"


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
    header: str = ""  # the clear header, hex; `record_epoch` takes it from the ciphertext

    def to_json(self) -> dict[str, Any]:
        out = {"seq": self.seq, "digest": self.digest, "prev": self.prev, "block": self.block,
               "tx": self.tx, "bucket": self.bucket, "rows_root": self.rows_root,
               "writer": self.writer, "header": self.header}
        if self.cost is not None:
            out["cost"] = self.cost
        return out

    def parsed_header(self) -> Header:
        """The header as recorded (parse_meta checked that it parses)."""
        return parse_header(bytes.fromhex(self.header))


def parse_meta(path: Path | str, obj: Any) -> EpochMeta:
    require(isinstance(obj, dict), path, "is not a JSON object")
    for name in ("seq", "block", "bucket"):
        require(is_int(obj.get(name)), path, f"{name} is malformed")
    for name in ("digest", "prev", "rows_root"):
        require(is_hex64(obj.get(name)), path, f"{name} is malformed")
    for name in ("tx", "writer"):
        require(isinstance(obj.get(name), str), path, f"{name} is malformed")
    cost = obj.get("cost")
    require(cost is None or isinstance(cost, dict), path, "cost is malformed")
    header = obj.get("header")
    require(isinstance(header, str), path, "has no header (written by an earlier kint?)")
    try:
        parsed = parse_header(bytes.fromhex(header))
    except (ValueError, EpochError):
        raise CorruptStateFile(path, "header is not a kint epoch header") from None
    require(parsed.length * 2 == len(header), path, "header has bytes past its wraps")
    require(parsed.bucket == obj["bucket"] and parsed.rows_root.hex() == obj["rows_root"],
            path, "header does not agree with the bucket and rows_root recorded beside it")
    return EpochMeta(obj["seq"], obj["digest"], obj["prev"], obj["block"], obj["tx"],
                     obj["bucket"], obj["rows_root"], obj["writer"], cost, header)


@dataclass(frozen=True)
class CachedPlaintext:
    """A cached epoch's plaintext and the gzip member it was read from."""

    plaintext: Plaintext
    payload: bytes


def load_plaintext(path: Path | str, payload: bytes, space_id: str) -> CachedPlaintext:
    """A cached epoch's plaintext, inflated, parsed and checked as an epoch reader checks
    it."""
    raw = gunzip(path, payload)
    try:
        plaintext = parse_plaintext(raw)
    except PlaintextError as err:
        raise CorruptStateFile(path, f"is not an epoch plaintext ({err})") from None
    require(plaintext.space == space_id, path, "belongs to another space")
    return CachedPlaintext(plaintext, payload)
