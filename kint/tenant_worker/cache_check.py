"""The epoch cache is a copy, not the truth (issue 14, item 6): before `history` shows a
cached epoch, its files are checked against what was anchored.

- The ciphertext (`NNNNNNNN.bin`) must hash to the digest its metadata records, and the
  digests must chain: each epoch's `prev` is the digest of the epoch before it, up to the
  mirror's head, the digest this machine saw anchored.
- With the data key at hand, the ciphertext is opened again and the plaintext file must be
  the bytes it decrypts to. A plaintext that was edited is replaced by the decrypted bytes
  (logged); a ciphertext that does not match is refused with the file named.
- Without the key (it expired), the plaintext must agree with the ciphertext's clear header
  and the metadata (rows_root, snapshot flag); its rows cannot be checked, and the entries
  drawn from it say so (`checked: false`).
"""

from __future__ import annotations

import logging
from typing import Callable

from eth_hash.auto import keccak

from kint.epochs.envelope import open_epoch, parse_header
from kint.epochs.errors import EpochError
from kint.epochs.plaintext import Plaintext
from kint.paths import atomic_write
from kint.tenant_worker.statefiles import CorruptStateFile, SpaceState

log = logging.getLogger("kint.worker")

Reader = Callable[[int], tuple[Plaintext, bool]]


def checked_reader(state: SpaceState, owner: str | None, keys: dict[bytes, bytes]) -> Reader:
    """A function `seq -> (plaintext, checked)` over this machine's epoch cache."""
    mirror = state.mirror()
    expected: dict[int, str] = {}
    if mirror is not None and mirror.head.seq:
        expected[mirror.head.seq] = mirror.head.digest

    def read(seq: int) -> tuple[Plaintext, bool]:
        meta = state.meta(seq)
        bin_path = state.epoch_path(seq, ".bin")
        try:
            blob = bin_path.read_bytes()
        except FileNotFoundError:
            raise CorruptStateFile(bin_path, "is missing from the epoch cache") from None
        if keccak(blob).hex() != meta.digest:
            raise CorruptStateFile(bin_path, f"does not hash to the digest of epoch {seq}")
        want = expected.get(seq)
        if want is not None and want != meta.digest:
            raise CorruptStateFile(state.epoch_path(seq, ".meta.json"),
                                   f"names digest {meta.digest[:12]} for epoch {seq}, but the "
                                   f"chain vouched for {want[:12]}")
        expected[seq - 1] = meta.prev
        plaintext = state.plaintext(seq)
        try:
            header = parse_header(blob)
        except EpochError as err:
            raise CorruptStateFile(bin_path, f"is not a kint epoch ({err})") from None
        if (plaintext.rows_root != meta.rows_root or header.rows_root.hex() != meta.rows_root
                or header.snapshot != plaintext.snapshot):
            raise CorruptStateFile(state.epoch_path(seq, ".json"),
                                   f"does not agree with the anchored header of epoch {seq}")
        key = keys.get(header.dek_id)
        if key is None or owner is None:
            return plaintext, False
        try:
            opened = open_epoch(blob, dek=key, owner=owner, space=state.space_id, seq=seq,
                                prev=meta.prev)
        except EpochError as err:
            raise CorruptStateFile(bin_path, f"does not open as epoch {seq} ({err})") from None
        json_path = state.epoch_path(seq, ".json")
        if json_path.read_bytes() != opened.raw:
            log.warning("epoch cache: %s was not what epoch %d decrypts to; replaced from the "
                        "ciphertext", json_path.name, seq)
            atomic_write(json_path, opened.raw)
        return opened.plaintext, True

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
            raise CorruptStateFile(state.epoch_path(seq, ".json"),
                                   f"its rows do not reproduce the rows_root anchored by epoch "
                                   f"{seq} (edited?)")
        return True
