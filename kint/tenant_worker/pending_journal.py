"""The pending-epoch journal's file, `pending-<space16>.json` (pending.py says what it is
for): one module of its own, so that whatever reads a journal (its own space's settlement,
another space's fill of a former key's hole, `kint doctor`) reads it one way, with its
version and its digest checked, and none parses its fields by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson
from eth_hash.auto import keccak

from kint.paths import atomic_write
from kint.protocol import ErrorCode, ProtocolError

PENDING_VERSION = 2


@dataclass(frozen=True)
class PendingEpoch:
    seq: int
    prev: str
    digest: str
    nonce: int
    raw_tx: bytes
    bucket: int
    plaintext: bytes
    envelope: bytes
    sender: str

    def save(self, path: Path) -> None:
        atomic_write(path, orjson.dumps({
            "v": PENDING_VERSION, "seq": self.seq, "prev": self.prev, "digest": self.digest,
            "nonce": self.nonce, "raw_tx": self.raw_tx.hex(), "bucket": self.bucket,
            "plaintext": self.plaintext.hex(), "envelope": self.envelope.hex(),
            "sender": self.sender}))

    @classmethod
    def load(cls, path: Path) -> PendingEpoch | None:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            obj = orjson.loads(raw)
            if obj.get("v") != PENDING_VERSION:
                raise ValueError("version")
            pending = cls(seq=int(obj["seq"]), prev=str(obj["prev"]), digest=str(obj["digest"]),
                          nonce=int(obj["nonce"]), raw_tx=bytes.fromhex(obj["raw_tx"]),
                          bucket=int(obj["bucket"]),
                          plaintext=bytes.fromhex(obj["plaintext"]),
                          envelope=bytes.fromhex(obj["envelope"]), sender=str(obj["sender"]))
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
            raise ProtocolError(ErrorCode.CORRUPT_STATE,
                                f"{path}: is not a pending-epoch file; it was left as it is",
                                "move it aside and run `kint pull`") from None
        if keccak(pending.envelope).hex() != pending.digest:
            raise ProtocolError(ErrorCode.CORRUPT_STATE,
                                f"{path}: its envelope does not hash to its digest; it was "
                                f"left as it is", "move it aside and run `kint pull`")
        return pending
