"""The pending-epoch journal's file, `pending-<space16>.json` (pending.py says what it is
for): one module of its own, so that whatever reads a journal (its own space's settlement,
another space's fill of a former key's hole, `kint doctor`) reads it one way, with its
version and its digest checked, and none parses its fields by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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
    # When a nonce of `sender` below `nonce` was first seen waiting at another endpoint of
    # the space (former_key_wait.py): (nonce, wall-clock seconds, that endpoint redacted).
    # Kept here so that the bound on that wait outlives the worker: counted in its memory,
    # every restart began it again. A journal without it (written before) has none.
    deferred: tuple[tuple[int, float, str], ...] = ()

    def save(self, path: Path) -> None:
        atomic_write(path, orjson.dumps({
            "v": PENDING_VERSION, "seq": self.seq, "prev": self.prev, "digest": self.digest,
            "nonce": self.nonce, "raw_tx": self.raw_tx.hex(), "bucket": self.bucket,
            "plaintext": self.plaintext.hex(), "envelope": self.envelope.hex(),
            "sender": self.sender, "deferred": [list(d) for d in self.deferred]}))

    def deferred_at(self, nonce: int) -> tuple[float, str] | None:
        """When and where `nonce` was first seen waiting at another endpoint, or None."""
        return next(((at, url) for n, at, url in self.deferred if n == nonce), None)

    def with_deferred(self, nonce: int, seen: tuple[float, str] | None) -> PendingEpoch:
        """This journal with `nonce`'s first sighting set to `seen` (None: forgotten)."""
        kept = tuple(d for d in self.deferred if d[0] != nonce)
        return replace(self, deferred=kept + (((nonce, *seen),) if seen else ()))

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
                          envelope=bytes.fromhex(obj["envelope"]), sender=str(obj["sender"]),
                          deferred=tuple((int(n), float(at), str(url))
                                         for n, at, url in obj.get("deferred", ())))
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
            raise ProtocolError(ErrorCode.CORRUPT_STATE,
                                f"{path}: is not a pending-epoch file; it was left as it is",
                                "move it aside and run `kint pull`") from None
        if keccak(pending.envelope).hex() != pending.digest:
            raise ProtocolError(ErrorCode.CORRUPT_STATE,
                                f"{path}: its envelope does not hash to its digest; it was "
                                f"left as it is", "move it aside and run `kint pull`")
        return pending
