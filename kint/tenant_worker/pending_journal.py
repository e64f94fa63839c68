"""The pending-epoch journal's file, `pending-<space16>.json` (pending.py says what it is
for): one module of its own, so that whatever reads a journal (its own space's settlement,
another space's fill of a former key's hole, `kint doctor`) reads it one way, with its
version and its digest checked, and none parses its fields by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import orjson

from kint.keccak import keccak
from kint.paths import atomic_write
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import CORRUPT_JOURNAL_HINT

PENDING_VERSION = 2


@dataclass(frozen=True)
class Sighting:
    """`nonce` of the journal's sender first seen waiting at the endpoint `url` (redacted)
    of the space, not at the one it sends through (former_key_wait.py). `mono` is
    time.monotonic() then, not the wall clock, which a step (NTP, a user setting the date)
    moves: set back, the bound on that wait never ended; set forward, it ended at once. A
    monotonic reading starts again at each boot, so it counts only on the boot `boot`
    (kint.boot.boot_id(); None where the OS has none), and `NO_BOOT` on none: an entry
    whose time does not read (the earlier [nonce, wall clock, url], one garbled) still says
    that `nonce` was seen waiting at `url`, which keeps a look that goes unanswered waiting
    (former_key_wait.py `first_seen` records it again as first seen now)."""

    nonce: int
    mono: float
    boot: str | None
    url: str


# The boot of a `Sighting` whose time does not read: kint.boot.boot_id() is never empty.
NO_BOOT = ""


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
    # the space (former_key_wait.py), one `Sighting` each. Kept here so that the bound on
    # that wait outlives the worker: counted in its memory, every restart began it again. A
    # journal without it (written before) has none.
    deferred: tuple[Sighting, ...] = ()

    def save(self, path: Path) -> None:
        atomic_write(path, orjson.dumps({
            "v": PENDING_VERSION, "seq": self.seq, "prev": self.prev, "digest": self.digest,
            "nonce": self.nonce, "raw_tx": self.raw_tx.hex(), "bucket": self.bucket,
            "plaintext": self.plaintext.hex(), "envelope": self.envelope.hex(),
            "sender": self.sender,
            "deferred": [[d.nonce, d.mono, d.boot, d.url] for d in self.deferred]}))

    def deferred_at(self, nonce: int) -> Sighting | None:
        """When and where `nonce` was first seen waiting at another endpoint, or None."""
        return next((d for d in self.deferred if d.nonce == nonce), None)

    def with_deferred(self, nonce: int, seen: Sighting | None) -> PendingEpoch:
        """This journal with `nonce`'s first sighting set to `seen` (None: forgotten)."""
        kept = tuple(d for d in self.deferred if d.nonce != nonce)
        return replace(self, deferred=kept + ((seen,) if seen else ()))

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
                          deferred=_sightings(obj.get("deferred")))
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
            raise ProtocolError(ErrorCode.CORRUPT_STATE,
                                f"{path}: is not a pending-epoch file; it was left as it is",
                                CORRUPT_JOURNAL_HINT) from None
        if keccak(pending.envelope).hex() != pending.digest:
            raise ProtocolError(ErrorCode.CORRUPT_STATE,
                                f"{path}: its envelope does not hash to its digest; it was "
                                f"left as it is", CORRUPT_JOURNAL_HINT)
        return pending


def _sightings(held: object) -> tuple[Sighting, ...]:
    """The journal's `deferred`, each entry whose nonce and endpoint read (first and last,
    of three or four) as a `Sighting`, on `NO_BOOT` when its time and boot do not; any
    other is dropped, and so is the field when it is not a list. It is advisory (the wait's
    bound records a sighting again as first seen now), where the push's own fields are not:
    read inside them, a null, an entry of another shape (the earlier [nonce, wall clock,
    url]) or a non-number made the whole journal CORRUPT_STATE, blocking every push and
    pull; dropped whole, such an entry let a look that went unanswered fill at once."""
    if not isinstance(held, list):
        return ()
    kept: list[Sighting] = []
    for entry in held:
        if not (isinstance(entry, list) and len(entry) in (3, 4)):
            continue
        nonce, url = entry[0], entry[-1]
        if not (type(nonce) is int and nonce >= 0 and isinstance(url, str)):
            continue
        mono, boot = entry[1:3] if len(entry) == 4 else (None, NO_BOOT)
        if (type(mono) in (int, float) and math.isfinite(mono)
                and (boot is None or isinstance(boot, str))):
            kept.append(Sighting(nonce, float(mono), boot, url))
        else:
            kept.append(Sighting(nonce, 0.0, NO_BOOT, url))
    return tuple(kept)
