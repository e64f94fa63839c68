"""Which of kint's files and folders under KINT_HOME are open to others, by one rule that
`kint doctor` lists by and a starting supervisor mends by (kint.supervisor.tighten): doctor
never names what the next start leaves as it is, nor misses what it would mend.

Loose: a regular file or folder of this user's with any group or other bit (LOOSE_BITS).
A folder 0500 is not loose (nobody else can read it); a socket, a FIFO or a link never is;
another user's file is not kint's to change.

The walk never follows a symlink (`os.fwalk` descends through file descriptors; the home
itself is walked only when it is a plain folder), stays out of the Sibyl stores' folders
(which should never be under KINT_HOME), walks nothing when a store's folder is the home
itself or the home holds the user's home folder (`refusal` says which), and stops after
MAX_ENTRIES entries (`stopped`).

`local.secret` and the recovery files (`RECOVERY-<space16>.txt`: the data key itself) are
yielded marked `kept`: one that was open to others may have been read, so the supervisor
leaves them as they are (kint refuses a loose local.secret by name, LocalSecretUnsafe) and
doctor names them with what to do instead; made private, either would be used as if
nothing had happened.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kint.paths import LOCAL_SECRET_FILE
from kint.spaces import sibyl_default_db

# Far past any home kint makes (a few files per space, one per cached epoch): a bigger tree
# is not kint's alone, and neither a supervisor's start nor doctor is held by walking it.
MAX_ENTRIES = 100_000
# What kint's files and folders never carry: any access for group and others.
LOOSE_BITS = 0o077
# The recovery files under KINT_HOME (kint.paths names each one).
RECOVERY_FILES = "RECOVERY-*.txt"

HOLDS_USER_HOME = "it holds your home folder, whose files are not kint's"
IS_STORE_FOLDER = "it is a Sibyl store's folder, whose files are not kint's alone"


@dataclass(frozen=True)
class Loose:
    """One loose entry. `dir_fd` is its folder's descriptor, open only until the walk is
    asked for the next entry: mend through it (never by path) or not at all."""

    path: str
    name: str
    dir_fd: int
    st: os.stat_result
    kept: bool  # local.secret or a recovery file: left as it is on purpose

    @property
    def mode(self) -> int:
        return stat.S_IMODE(self.st.st_mode)


class HomeWalk:
    """The loose entries under `home`. `stores`: the bound stores' paths (their folders,
    and Sibyl's default store's, are never entered)."""

    def __init__(self, home: Path, stores: Iterable[Path] = ()) -> None:
        self.home = home
        self.bound = MAX_ENTRIES
        self.stopped = False
        self._kept = _ids([home / LOCAL_SECRET_FILE, *home.glob(RECOVERY_FILES)])
        self._skipped = _ids(db.parent for db in (sibyl_default_db(), *stores))
        self.refusal = self._refusal()

    def _refusal(self) -> str | None:
        """Why nothing under the home is walked, if so."""
        if _holds_user_home(self.home):
            return HOLDS_USER_HOME
        own = _lstat(self.home)
        if own is not None and (own.st_dev, own.st_ino) in self._skipped:
            # A store kept in KINT_HOME itself: its entries (the database, its journal) are
            # that store's, which the walk never enters.
            return IS_STORE_FOLDER
        return None

    def loose(self) -> Iterator[Loose]:
        """Yield each loose entry, top down; `stopped` is set when `bound` entries were
        seen before the walk's end."""
        top = _lstat(self.home)
        if self.refusal is not None or top is None or not stat.S_ISDIR(top.st_mode):
            return  # no home yet, or not a folder (kint refuses such a home by name)
        uid = os.getuid()
        seen = 0
        for root, dirs, files, root_fd in os.fwalk(self.home, follow_symlinks=False):
            for name in [*dirs, *files]:
                seen += 1
                if seen > self.bound:
                    self.stopped = True
                    return
                try:
                    st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
                except OSError:
                    continue  # gone since it was listed
                key = (st.st_dev, st.st_ino)
                if key in self._skipped:
                    if name in dirs:
                        dirs.remove(name)
                elif (st.st_uid == uid and st.st_mode & LOOSE_BITS
                      and (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode))):
                    yield Loose(os.path.join(root, name), name, root_fd, st, key in self._kept)


def _ids(paths: Iterable[Path]) -> set[tuple[int, int]]:
    return {(st.st_dev, st.st_ino) for st in map(_lstat, paths) if st is not None}


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _holds_user_home(home: Path) -> bool:
    """Whether `home` is the user's home folder or one of its parents."""
    try:
        user_home = Path.home().resolve()
        kint = home.resolve()
    except (OSError, RuntimeError):
        return False
    return user_home == kint or kint in user_home.parents
