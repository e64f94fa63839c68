"""How much room the disks under a space have left (`status` and `doctor` tell the truth
while the disk is full: docs/faults.md, the full-disk rows).

Why: a full disk stops a pull, a push and Sibyl's own writes, and each of those refuses
with DISK_FULL when it happens. Between those moments `status` and `doctor` still run (they
only read), so they are where a user looks; they say which disk is full instead of "ok".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# Below this, SQLite cannot count on growing its journal by a few pages, nor kint on
# writing an epoch's cache: call it full.
LOW_BYTES = 1 << 20


@dataclass
class Room:
    what: str  # "Sibyl's store" or "kint's state"
    path: str
    free_bytes: int | None  # None: the folder cannot be examined

    @property
    def low(self) -> bool:
        return self.free_bytes is not None and self.free_bytes < LOW_BYTES

    def describe(self) -> str:
        if self.free_bytes is None:
            return f"{self.what} {self.path}: free space unknown"
        if self.low:
            return (f"the disk holding {self.what} {self.path} is full ({self.free_bytes} "
                    f"bytes free): writes to it fail with DISK_FULL until space is freed")
        return f"{self.what} {self.path}: {self.free_bytes // (1 << 20)} MiB free"


def _free_bytes(path: str) -> int | None:
    """Free bytes (for this user) on the filesystem of `path`, or of its nearest existing
    folder when `path` is not created yet. `status` asks on every call, so the usual case
    (the path exists) is one statvfs; only a missing path walks up its folders."""
    try:
        st = os.statvfs(path)
    except (FileNotFoundError, NotADirectoryError):
        folder = Path(path).parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        try:
            st = os.statvfs(folder)
        except OSError:
            return None
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _places(db: str, kint_home: str) -> tuple[tuple[str, str], ...]:
    return (("Sibyl's store", db), ("kint's state", kint_home))


def rooms(db: str, kint_home: str) -> list[Room]:
    return [Room(what, path, _free_bytes(path)) for what, path in _places(db, kint_home)]


def full_disks(db: str, kint_home: str, *, same_disk: bool = False) -> list[str]:
    """One line per disk that is full, naming what lives on it (empty when none is).
    Asked by every `status`: `same_disk` (the caller saw both paths on one device, st_dev)
    asks that disk once."""
    store_free = _free_bytes(db)
    home_free = store_free if same_disk else _free_bytes(kint_home)
    if (store_free is None or store_free >= LOW_BYTES) and (home_free is None
                                                          or home_free >= LOW_BYTES):
        return []  # every status asks: the usual answer without a Room built per disk
    rooms = [Room(what, path, free) for (what, path), free
             in zip(_places(db, kint_home), (store_free, home_free))]
    return [room.describe() for room in rooms if room.low]
