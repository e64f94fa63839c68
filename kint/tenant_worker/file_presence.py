"""Which of a space's files under KINT_HOME exist, and how many epochs it caches, for
`status`: the files as they are now, at the cost of two stats when nothing changed.

Why: `status` promises the files as they are at the call, and asking each of them (eight
`access` calls and a listing of the epochs folder) was most of the plain status's system
calls, which cost a microsecond or more each in a VM. A file appears or goes away only
by a change to its folder's entries, and every such change sets the folder's modification
time. So the answer is kept with the two folders' signatures (paths.file_signature: device,
inode, size and mtime) and asked again only when one of them differs.

One race is closed by hand: a folder's mtime has a granularity (a kernel tick of a few
ms on ext4 and tmpfs, whole seconds on some file systems, two on FAT), so two changes
within one step leave the same mtime, and a reading taken between them would be kept past
the second. A reading is therefore kept only when both folders were last changed more
than `SETTLED_NS` before it was taken: any later change then falls in a later step of the
clock, and shows. A folder changed more recently is read again at the next call (what
`git` does for its index, for the same reason).
"""

from __future__ import annotations

import os
import time
from typing import Any

from kint.paths import SIG_DEV, SIG_MTIME_NS, FileSignature, file_signature

# How long before a reading a folder's last change must be for the reading to be kept: at
# least the coarsest mtime step of a file system KINT_HOME may sit on (FAT's 2 s).
SETTLED_NS = 3_000_000_000

Signature = FileSignature | None


class SpaceFilePresence:
    """`current()`: {file name: exists} for the space's files in KINT_HOME, and for
    `epochs` the number of epochs in its cache folder. `names` maps each name to its path;
    every path but `epochs` must be directly in `home`."""

    def __init__(self, home: str, names: dict[str, str]) -> None:
        outside = [p for n, p in names.items() if n != "epochs" and os.path.dirname(p) != home]
        if outside:
            raise ValueError(f"not directly in {home}: {outside}")
        self._home = home
        self._epochs = names["epochs"]
        self._names = names
        # The reading kept and the signatures it was taken at: one reference, replaced
        # whole, so read and written without a lock (a reading kept by a slower thread over
        # a newer one is only read again: it is kept with its own signatures).
        self._kept: tuple[tuple[Signature, Signature], dict[str, Any]] | None = None

    def current(self) -> dict[str, Any]:
        """{file name: exists}, and the epochs' count, as they are now."""
        return self.reading()[0]

    def reading(self) -> tuple[dict[str, Any], int | None]:
        """`current()`, and KINT_HOME's device (st_dev) as the same stat of it found it, None
        when it cannot be read: `status` compares it with the store's, so that a disk
        holding both is asked for its free room once (disk_space.full_disks)."""
        sig = (file_signature(self._home), file_signature(self._epochs))
        device = sig[0][SIG_DEV] if sig[0] is not None else None
        kept = self._kept
        if kept is not None and kept[0] == sig:
            return dict(kept[1]), device
        taken_ns = time.time_ns()
        files = self._read()
        settled = all(s is None or taken_ns - s[SIG_MTIME_NS] > SETTLED_NS for s in sig)
        self._kept = (sig, files) if settled else None
        return dict(files), device

    def _read(self) -> dict[str, Any]:
        files: dict[str, Any] = {}
        for name, path in self._names.items():
            if name == "epochs":
                try:
                    files[name] = sum(1 for entry in os.scandir(path)
                                      if entry.name.endswith(".meta.json"))
                except (FileNotFoundError, NotADirectoryError):
                    files[name] = 0
            else:
                # An access() check is the same answer as exists() here (our own 0700
                # folder) without the exception exists() builds for each absent file.
                files[name] = os.access(path, os.F_OK)
        return files
