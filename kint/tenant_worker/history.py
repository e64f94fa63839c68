"""What a row held at every anchored epoch (seed 000, "What the agent believed at an
earlier block"), read from this machine's epoch cache. No RPC call.

Each block is an upper bound: the version existed no later than that block. A snapshot
re-anchors every row; its entry is kept only when the row changed, so a compaction never
invents a version.
"""

from __future__ import annotations

from typing import Any

from kint.rows.canon import canonical_id
from kint.tenant_worker.statefiles import SpaceState


def versions(state: SpaceState, tier: str, key: str, category: str | None) -> list[dict[str, Any]]:
    """Every anchored version of one row, oldest first."""
    out: list[dict[str, Any]] = []
    last_leaf: str | None = None
    present = False
    wanted = canonical_id(tier, category, key)
    for seq in state.cached_seqs():
        plaintext = state.plaintext(seq)
        meta = state.meta(seq)
        match = next((r for r in plaintext.rows if r.canonical_id == wanted), None)
        deleted = any(canonical_id(*d) == wanted for d in plaintext.deleted)
        if match is None:
            if present and (plaintext.snapshot or deleted):
                # A snapshot is the whole state: a row it does not carry was deleted.
                out.append({"seq": seq, "block": meta.block, "tx": meta.tx, "deleted": True})
                present, last_leaf = False, None
            continue
        row = match.to_row()
        leaf = row.leaf.hex()
        if plaintext.snapshot and leaf == last_leaf:
            continue
        entry: dict[str, Any] = {"seq": seq, "block": meta.block, "tx": meta.tx, "leaf": leaf,
                                 "body": row.fields.get("body"),
                                 "status": row.fields.get("status"), "deleted": False}
        if plaintext.snapshot:
            entry["snapshot"] = True
        out.append(entry)
        present, last_leaf = True, leaf
    return out


def at_block(entries: list[dict[str, Any]], block: int) -> dict[str, Any] | None:
    """The newest entry anchored at or before `block`, or None."""
    live = None
    for entry in entries:
        if entry["block"] <= block:
            live = entry
    return live
