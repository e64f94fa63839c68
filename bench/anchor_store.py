"""Anchor a store's rows the way push records them, without a chain: for the verify and
MCP benchmarks, which need a mirror, a watermark and an epoch cache to verify against.

The rows go through kint's own steps: export, diff against the mirror, `split_diff` (the
92,160-byte split, so a large store becomes several epochs, as a real push makes it),
`make_plaintext`, `seal` (v0.3.0's envelope under a throwaway data key with one wrap that
no machine here holds, buckets ratcheting) and `record_epoch`, the one function that
writes the epoch cache, the mirror and the watermark. What is made up is only what a
chain would say: the block and transaction numbers and the owner.

tests/anchoring.py did this for the benchmarks until it started sealing for real: it
records a store as ONE epoch, which v0.3.0's largest bucket (98,304 bytes) cannot hold
past ~800 of these rows.
"""

from __future__ import annotations

from pathlib import Path

from eth_hash.auto import keccak

from kint.custody.wraps import KIND_PASSPHRASE, wrap_data_key
from kint.epochs.envelope import seal
from kint.epochs.plaintext import make_plaintext, wire_rows
from kint.epochs.split import MerkleState, split_diff
from kint.rows.export import connect_ro, export_rows
from kint.spaces import space_id
from kint.tenant_worker.changes import diff
from kint.tenant_worker.statefiles import ZERO_DIGEST, EpochMeta, SpaceState, record_epoch

BENCH_DEK = bytes(range(100, 132))
BENCH_OWNER = "0x" + "42" * 20
BENCH_WRAP = wrap_data_key(BENCH_DEK, bytes(range(132, 164)), KIND_PASSPHRASE)
BENCH_WRITER = "0x" + "11" * 20


def anchor(kint_home: Path, label: str, db: Path, tenant: str, *, block: int) -> int:
    """Record the store's changes since the mirror as the next epochs (block, block + 1,
    ...); returns how many epochs were recorded."""
    state = SpaceState(kint_home, space_id(label))
    mirror = state.mirror()
    conn = connect_ro(str(db))
    try:
        rows = export_rows(conn, tenant)
    finally:
        conn.close()
    changes = diff(mirror, rows)
    leaves = {cid: m.leaf for cid, m in mirror.rows.items()} if mirror is not None else {}
    chunks = split_diff(wire_rows(changes.rows), changes.deleted,
                        state_after=MerkleState(leaves).apply)
    seq = mirror.head.seq if mirror is not None else 0
    prev = mirror.head.digest if mirror is not None else ZERO_DIGEST
    floor = (mirror.head.bucket or 0) if mirror is not None else 0
    for i, chunk in enumerate(chunks):
        seq += 1
        plaintext = make_plaintext(tenant=label, space=state.space_id, seq=seq, prev=prev,
                                   rows=chunk.rows, deleted=chunk.deleted,
                                   rows_root=chunk.rows_root, n_rows=chunk.n_rows)
        raw = plaintext.encode()
        ciphertext, header = seal(raw, dek=BENCH_DEK, owner=BENCH_OWNER,
                                  space=state.space_id, seq=seq, prev=prev,
                                  rows_root=chunk.rows_root, wraps=[BENCH_WRAP],
                                  snapshot=False, bucket_floor=floor)
        digest = keccak(ciphertext).hex()
        meta = EpochMeta(seq=seq, digest=digest, prev=prev, block=block + i,
                         tx=keccak(b"tx" + ciphertext).hex(), bucket=header.bucket,
                         rows_root=chunk.rows_root.hex(), writer=BENCH_WRITER)
        new = record_epoch(state, raw, plaintext, ciphertext, meta)
        if not new.root_matches:
            raise RuntimeError(f"epoch {seq}: the mirror's rows do not reproduce its root")
        prev, floor = digest, header.bucket
    return len(chunks)
