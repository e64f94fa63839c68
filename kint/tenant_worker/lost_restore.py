"""A lost store's restore in progress: `restoring-<space16>.json`, written when a pull
starts restoring a lost store (pull.py, `store_lost`) from the first epoch, and removed
once the mirror reaches the chain's head.

Why: such a restore keeps the rows the tenant wrote into the store since it was lost
(never anchored, and no epoch to apply touches them). A pull killed before the mirror
reaches the head leaves those rows beside a mirror that is behind a moved chain, so the
next pull would see unanchored rows and refuse FORK, though the restore had already
checked them. The record names exactly the rows it kept (canonical id and leaf): the next
pull takes those, and only those, as the restore's own and resumes it, checking them
again against the epochs it still has to apply. Any other change is still a fork.

`status` and `doctor` name the record while it is there (`in_progress`): the rows it keeps
are unanchored changes as any other, but the store also lacks anchored rows the pull has
yet to restore, and `kint pull` is what finishes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson

from kint.paths import atomic_write, lost_restore_path, remove_file
from kint.protocol import ErrorCode, ProtocolError
from kint.rows.canon import Row
from kint.tenant_worker.changes import Changes
from kint.tenant_worker.statefiles import SpaceState


def _path(state: SpaceState) -> Path:
    return lost_restore_path(state.home, state.space_id[:16])


def begin(state: SpaceState, kept: dict[str, Row]) -> None:
    """Before the restore's empty mirror is saved: the rows it keeps, by leaf."""
    atomic_write(_path(state), orjson.dumps(
        {"kept": {cid: row.leaf.hex() for cid, row in kept.items()}}))


def end(state: SpaceState) -> None:
    remove_file(_path(state))


def kept(state: SpaceState) -> dict[str, str] | None:
    """The rows a lost store's restore in progress keeps (canonical id -> leaf hex), or
    None when no such restore is in progress."""
    path = _path(state)
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError):
        data = None
    found = data.get("kept") if isinstance(data, dict) else None
    if not (isinstance(found, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in found.items())):
        raise ProtocolError(ErrorCode.CORRUPT_STATE,
                            f"{path}: is not a lost store's restore record; it was left as "
                            f"it is", "move it aside and run `kint pull` (or `kint pull "
                            "--discard-local`)")
    return found


def its_own(local: Changes, kept: dict[str, str]) -> tuple[list[Row], Changes]:
    """The local changes that are rows the restore kept (unchanged since), and the rest."""
    mine = [r for r in local.rows if kept.get(r.canonical_id) == r.leaf.hex()]
    rest = Changes(rows=[r for r in local.rows if kept.get(r.canonical_id) != r.leaf.hex()],
                   deleted=local.deleted)
    return mine, rest


@dataclass(frozen=True)
class InProgress:
    """A lost store's restore a pull began and has not finished: its record, and how many
    rows it keeps."""

    path: Path
    kept: int

    @property
    def message(self) -> str:
        return (f"a lost store's restore is in progress ({self.path}), keeping {self.kept} "
                f"row(s) written since the store was lost (never anchored): `kint pull` "
                f"finishes it")


def in_progress(state: SpaceState) -> InProgress | None:
    """The restore in progress, for `status` and `doctor` (None when there is none). A
    record that does not read is left to `state_health.problems`, which names it."""
    try:
        found = kept(state)
    except ProtocolError:
        return None
    return None if found is None else InProgress(_path(state), len(found))
