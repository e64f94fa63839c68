"""What changed in the store since the mirror: the rows push must anchor. A row counts as
changed when its leaf differs from the mirror's, as deleted when the mirror has it and the
store does not (docs/how-it-works.md, push step 4)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kint.epochs.plaintext import Deletion
from kint.rows.canon import Row
from kint.tenant_worker.statefiles import Mirror

# The watcher's size estimate per changed or deleted row (docs/how-it-works.md).
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


def store_lost(mirror: Mirror | None, rows: list[Row] | None,
               archived: Callable[[], set[tuple[str, str]]]) -> bool:
    """The store lost this tenant's rows: rows were anchored from it (the mirror says they
    were there) and it holds none of them, because it does not exist (`rows` None: deleted,
    moved) or is another file (put in its place, or another tenant's pull remade a store
    they share). Its diff would be the deletion of every anchored row: a pull restores
    them instead (pull.py), and kint-server's pushes are held (drift.py).

    A store whose archive holds one of the anchored entities (`archived`: the (category,
    name) pairs of this tenant's archived entities, read only when needed) is the file
    they were forgotten in, through Sibyl's memory_forget: its missing rows are deletions,
    not a loss. (Sibyl's SDK-only delete_entity leaves no such trace.)"""
    if mirror is None or not mirror.rows:
        return False
    if any(r.canonical_id in mirror.rows for r in rows or []):
        return False
    if rows is None:
        return True
    names = archived()
    return not any(m.tier == "entity" and (m.category, m.key) in names
                   for m in mirror.rows.values())


def snapshot(mirror: Mirror | None, rows: list[Row]) -> Changes:
    """The whole state; the deletions since the mirror travel too, for history only."""
    return Changes(rows=list(rows), deleted=diff(mirror, rows).deleted)
