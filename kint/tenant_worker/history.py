"""What a row held at every anchored epoch (docs/commands.md, "kint history"; v0.3.0's
07-verify.md, "What the agent believed at an earlier block"), read from this machine's
epoch cache. No RPC call.

Each block is an upper bound: the version existed no later than that block. A snapshot
re-anchors every row; its entry is kept only when the row changed, so a compaction never
invents a version.
"""

from __future__ import annotations

from typing import Any, Callable

from kint.epochs.plaintext import Plaintext
from kint.tenant_worker.cache_check import RootTracker
from kint.rows.canon import canonical_id
from kint.tenant_worker.statefiles import SpaceState


def versions(state: SpaceState, tier: str, key: str, category: str | None,
             read: Callable[[int], tuple[Plaintext, bool]]) -> list[dict[str, Any]]:
    """Every anchored version of one row, oldest first. `read` gives each cached epoch's
    plaintext checked against what was anchored (kint.tenant_worker.cache_check), and
    whether its rows could be checked."""
    out: list[dict[str, Any]] = []
    if tier == "entity" and category is None:
        return out  # an entity's id includes its category: without one, nothing matches
    last_leaf: str | None = None
    present = False
    wanted = canonical_id(tier, category, key)
    plaintexts: dict[int, tuple[Plaintext, bool]] = {}
    for seq in sorted(state.cached_seqs(), reverse=True):
        plaintexts[seq] = read(seq)  # newest first: the digests chain down from the head
    tracker = RootTracker()
    for seq in sorted(plaintexts):
        plaintext, checked = plaintexts[seq]
        checked = tracker.check(state, seq, plaintext) or checked
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
                                 "status": row.fields.get("status"), "deleted": False,
                                 "checked": checked}
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
