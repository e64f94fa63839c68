"""What changed in the store since the mirror: the rows push must anchor. A row counts as
changed when its leaf differs from the mirror's, as deleted when the mirror has it and the
store does not (seed 001, push step 4)."""

from __future__ import annotations

from typing import Any

from kint.rows.canon import Row
from kint.tenant_worker.statefiles import Mirror

# The watcher's size estimate per changed or deleted row (seed 001).
ESTIMATED_BYTES_PER_ROW = 400


def put(row: Row) -> dict[str, Any]:
    return {"op": "put", "tier": row.tier, "category": row.category, "key": row.key,
            "fields": row.fields}


def diff(mirror: Mirror | None, rows: list[Row]) -> list[dict[str, Any]]:
    """Puts in the store's rowid order, then deletions in the mirror's order."""
    anchored = mirror.rows if mirror is not None else {}
    current = {r.canonical_id: r for r in rows}
    out = [put(r) for cid, r in current.items()
           if (old := anchored.get(cid)) is None or old.leaf != r.leaf]
    for cid, old in anchored.items():
        if cid not in current:
            out.append({"op": "del", "tier": old.row.tier, "category": old.row.category,
                        "key": old.row.key})
    return out


def snapshot(rows: list[Row]) -> list[dict[str, Any]]:
    return [put(r) for r in rows]
