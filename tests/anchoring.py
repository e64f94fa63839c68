"""Building a space's mirror and epoch cache the way push and pull will: through kint's
one recording function, `record_epoch`.

No chain: each epoch is sealed for real (v0.3.0's envelope, under a throwaway data key no
test machine holds), its digest is its keccak, and the block and transaction are numbers
the test chooses (the chain tests anchor for real). Everything verify and
history read (mirror, watermark, epoch cache) is written by the real code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eth_hash.auto import keccak

from kint.custody.wraps import KIND_PASSPHRASE, wrap_data_key
from kint.epochs import buckets
from kint.epochs.envelope import aad, open_epoch, seal
from kint.epochs.plaintext import make_plaintext, wire_rows
from kint.rows.canon import Row
from kint.rows.export import connect_ro, export_rows
from kint.rows.merkle import merkle_root
from kint.spaces import space_id
from kint.tenant_worker.changes import diff
from kint.tenant_worker.changes import snapshot as snapshot_of
from kint.tenant_worker.statefiles import (
    EpochMeta,
    Mirror,
    SpaceState,
    ZERO_DIGEST,
    empty_mirror,
    record_epoch,
)


TEST_DEK = bytes(range(32))
TEST_OWNER = "0x" + "42" * 20
TEST_WRAP = wrap_data_key(TEST_DEK, bytes(range(32, 64)), KIND_PASSPHRASE)


def resealed(envelope: bytes, edit: Callable[[bytes], bytes], *, dek: bytes, owner: str,
             space: str, seq: int, prev: str) -> bytes:
    """The epoch `envelope` (anchored at `seq` after `prev`, under `dek`) opened, its
    plaintext changed by `edit`, and sealed again under its own header, past the agreement
    checks `seal` makes: an epoch that opens under the data key and says whatever `edit`
    made it say (a seq the chain does not give it, say), as only a data-key holder could
    write. `edit` must keep the padded payload in the same bucket."""
    opened = open_epoch(envelope, dek=dek, owner=owner, space=space, seq=seq, prev=prev)
    header = opened.header
    padded = buckets.pack(edit(opened.raw), floor=header.bucket)
    assert len(padded) == header.bucket, "the edit moved the plaintext to another bucket"
    bound = aad(owner=owner, space=space, seq=seq, prev=prev, bucket=header.bucket,
                rows_root=header.rows_root, dek_id=header.dek_id)
    return header.encode() + AESGCM(dek).encrypt(header.nonce, padded, bound)


def store_rows(db: Path, tenant: str) -> list[Row]:
    conn = connect_ro(str(db))
    try:
        return export_rows(conn, tenant)
    finally:
        conn.close()


def state_for(kint_home: Path, label: str) -> SpaceState:
    return SpaceState(kint_home, space_id(label))


def connect_empty(kint_home: Path, label: str) -> Mirror:
    """What `kint connect` leaves on a machine that never pulled: an empty mirror at seq 0."""
    return empty_mirror(state_for(kint_home, label))


def anchor(kint_home: Path, label: str, db: Path, tenant: str, *, block: int,
           snapshot: bool = False, rows_root: str | None = None) -> int:
    """Record the store's current rows as the next epoch; returns its seq. `rows_root`
    stands in for the root of those rows (a writer whose root is off: the epoch is sealed
    and anchored all the same)."""
    state = state_for(kint_home, label)
    mirror = state.mirror()
    head_seq = mirror.head.seq if mirror else 0
    prev = mirror.head.digest if mirror else ZERO_DIGEST
    rows = store_rows(db, tenant)
    changes = snapshot_of(mirror, rows) if snapshot else diff(mirror, rows)
    current = {r.canonical_id: r for r in rows}
    ordered = sorted(current, key=lambda c: c.encode("utf-8"))
    root = rows_root or merkle_root([current[c].leaf for c in ordered]).hex()
    seq = head_seq + 1
    plaintext = make_plaintext(tenant=label, space=state.space_id, seq=seq, prev=prev,
                               rows=wire_rows(changes.rows), deleted=changes.deleted,
                               rows_root=root, n_rows=len(current), snapshot=snapshot)
    raw = plaintext.encode()
    ciphertext, header = seal(raw, dek=TEST_DEK, owner=TEST_OWNER, space=state.space_id,
                              seq=seq, prev=prev, rows_root=root, wraps=[TEST_WRAP],
                              snapshot=snapshot,
                              bucket_floor=(mirror.head.bucket or 0) if mirror else 0)
    meta = EpochMeta(seq=seq, digest=keccak(ciphertext).hex(), prev=prev, block=block,
                     tx=keccak(b"tx" + ciphertext).hex(), bucket=header.bucket,
                     rows_root=root, writer="0x" + "11" * 20)
    record_epoch(state, raw, plaintext, ciphertext, meta)
    return seq
