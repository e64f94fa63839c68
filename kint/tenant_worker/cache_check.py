"""The epoch cache is a copy, not the truth (docs/faults.md, "an edited epoch cache"):
before `history` shows a cached epoch, its files are checked against what was anchored.

- The digests must chain: each epoch's `prev` is the digest of the epoch before it, up to
  the mirror's head, the digest this machine saw anchored.
- The plaintext must agree with the clear header kept in its metadata (rows_root, snapshot
  flag) and with the metadata (seq, prev).
- With the data key at hand, the ciphertext is rebuilt from that header and the cached
  gzip member (`kint.epochs.envelope.rebuild`) and must hash to the anchored digest: any
  edit of the plaintext, the header or the metadata is refused with the file named. (The
  previous layout kept the ciphertext and replaced an edited plaintext from it; this one
  keeps no ciphertext, so the way back is `kint pull --full` once the file is moved aside.)
- Without the key (it expired), the rows are checked by replay (`RootTracker` below)
  against the rows_root recorded for each epoch; where they cannot be replayed, the
  entries drawn from the epoch say so (`checked: false`).
"""

from __future__ import annotations

import logging
from typing import Callable

from kint.epochs.envelope import rebuild
from kint.epochs.errors import EpochError
from kint.epochs.plaintext import Plaintext
from kint.keccak import keccak
from kint.tenant_worker.epoch_cache import META_SUFFIX, PAYLOAD_SUFFIX
from kint.tenant_worker.statefiles import CorruptStateFile, SpaceState

log = logging.getLogger("kint.worker")

Reader = Callable[[int], tuple[Plaintext, bool]]


def rebuilt_envelope(state: SpaceState, seq: int, keys: dict[bytes, bytes],
                     owner: str) -> bytes | None:
    """Epoch `seq`'s ciphertext, rebuilt from the cache with a key this machine holds, or
    None (not cached, no key for it, or files that do not rebuild). The caller checks the
    keccak against the digest it trusts."""
    try:
        meta = state.meta(seq)
        cached = state.cached(seq)
        header = meta.parsed_header()
    except (CorruptStateFile, EpochError):
        return None
    key = keys.get(header.dek_id)
    if key is None:
        return None
    try:
        return rebuild(bytes.fromhex(meta.header), cached.payload, dek=key, owner=owner,
                       space=state.space_id, seq=seq, prev=meta.prev)
    except (EpochError, ValueError):
        return None


def checked_reader(state: SpaceState, owner: str | None, keys: dict[bytes, bytes]) -> Reader:
    """A function `seq -> (plaintext, checked)` over this machine's epoch cache."""
    mirror = state.mirror()
    expected: dict[int, str] = {}
    if mirror is not None and mirror.head.seq:
        expected[mirror.head.seq] = mirror.head.digest

    def read(seq: int) -> tuple[Plaintext, bool]:
        meta = state.meta(seq)
        meta_path = state.epoch_path(seq, META_SUFFIX)
        want = expected.get(seq)
        if want is not None and want != meta.digest:
            raise CorruptStateFile(meta_path, f"names digest {meta.digest[:12]} for epoch "
                                              f"{seq}, but the chain vouched for {want[:12]}")
        expected[seq - 1] = meta.prev
        cached = state.cached(seq)
        plaintext = cached.plaintext
        header = meta.parsed_header()
        plain_path = state.epoch_path(seq, PAYLOAD_SUFFIX)
        if (plaintext.rows_root != meta.rows_root or header.snapshot != plaintext.snapshot
                or plaintext.prev != meta.prev):
            raise CorruptStateFile(plain_path,
                                   f"does not agree with the anchored header of epoch {seq}")
        key = keys.get(header.dek_id)
        if key is None or owner is None:
            return plaintext, False
        try:
            blob = rebuild(bytes.fromhex(meta.header), cached.payload, dek=key, owner=owner,
                           space=state.space_id, seq=seq, prev=meta.prev)
        except (EpochError, ValueError) as err:
            raise CorruptStateFile(plain_path, f"does not fit the header of epoch {seq} "
                                               f"({err})") from None
        if keccak(blob).hex() != meta.digest:
            raise CorruptStateFile(plain_path,
                                   f"with its header does not rebuild the ciphertext anchored "
                                   f"as epoch {seq} (digest {meta.digest[:12]}): edited")
        return plaintext, True

    return read


class RootTracker:
    """Checks cached plaintexts without the data key: replayed in order from a snapshot or
    epoch 1, each epoch's rows must reproduce its anchored `rows_root` (the root of the
    whole state after it, bound to the ciphertext's header). An edited row changes the
    root. Across a gap in the cache nothing can be replayed until the next snapshot."""

    def __init__(self) -> None:
        from kint.epochs.split import MerkleState

        self._empty = MerkleState
        self._state: object | None = None
        self._last: int | None = None

    def check(self, state: SpaceState, seq: int, plaintext: Plaintext) -> bool:
        """True when this epoch's rows were checked against its root; raises
        CorruptStateFile when they do not reproduce it."""
        if plaintext.snapshot or seq == 1:
            self._state = self._empty()
        elif self._last is None or seq != self._last + 1:
            self._state = None
        self._last = seq
        if self._state is None:
            return False
        deleted = () if plaintext.snapshot else plaintext.deleted
        root, _ = self._state.apply(plaintext.rows, deleted)  # type: ignore[attr-defined]
        if root.hex() != plaintext.rows_root:
            self._state = None
            raise CorruptStateFile(state.epoch_path(seq, PAYLOAD_SUFFIX),
                                   f"its rows do not reproduce the rows_root anchored by epoch "
                                   f"{seq} (edited?)")
        return True
