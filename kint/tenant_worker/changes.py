"""What changed in the store since the mirror: the rows push must anchor. A row counts as
changed when its leaf differs from the mirror's, as deleted when the mirror has it and the
store does not (seed 001, push step 4)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kint.epochs.plaintext import Deletion
from kint.rows.canon import Row
from kint.tenant_worker.statefiles import Mirror

# The watcher's size estimate per changed or deleted row (seed 001).
ESTIMATED_BYTES_PER_ROW = 400


@dataclass
class Changes:
    """Rows to put, in the store's rowid order, and rows deleted, in the mirror's order."""

    rows: list[Row] = field(default_factory=list)
    deleted: list[Deletion] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows) + len(self.deleted)


def diff(mirror: Mirror | None, rows: list[Row]) -> Changes:
    anchored = mirror.rows if mirror is not None else {}
    current = {r.canonical_id: r for r in rows}
    out = Changes(rows=[r for cid, r in current.items()
                        if (old := anchored.get(cid)) is None or old.leaf != r.leaf])
    out.deleted = [old.deletion for cid, old in anchored.items() if cid not in current]
    return out


def holds_none_anchored(mirror: Mirror | None, rows: list[Row] | None) -> bool:
    """Rows were anchored from the store (the mirror says they were there) and it holds
    none of them (`rows` None: it does not exist): the store was deleted, moved or
    replaced under this tenant, another tenant's pull remaking a store they share
    included. Its diff would be the deletion of every anchored row; a pull restores them
    instead (pull.py), and kint-server's pushes are held (drift.py)."""
    if mirror is None or not mirror.rows:
        return False
    return not any(r.canonical_id in mirror.rows for r in rows or [])


def snapshot(mirror: Mirror | None, rows: list[Row]) -> Changes:
    """The whole state; the deletions since the mirror travel too, for history only."""
    return Changes(rows=list(rows), deleted=diff(mirror, rows).deleted)
