"""At supervisor start: kint's own files under KINT_HOME made private again.

Every file kint writes now is 0600 and every folder 0700, but a file made by an older kint
or under a loose umask (run/supervisor.stderr, the pid and lock files, a log, a state
file) keeps its mode when it is reused: opening an existing file never changes it. So the
supervisor, once it holds the pid lock (no other supervisor is doing the same), takes the
group and other bits off every entry kint.home_modes calls loose (the rule `kint doctor`
lists by, with its bound and its skips) but the ones it marks kept (local.secret, the
recovery files), and logs one line for each of the first LOGGED_PATHS (its path and old
mode, never its contents), then one line for the rest.

Each entry is opened with O_NOFOLLOW, through its folder's descriptor, and checked to be
the one looked at before its mode is changed through that descriptor, so a name swapped
for a link in a folder that was open to others changes nothing outside.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from kint.home_modes import HomeWalk, Loose

log = logging.getLogger("kint.supervisor")

# One log line a path for the first ones, then one line for the rest: a home full of an
# older kint's 0644 epoch files would otherwise rotate every earlier line out of the log.
LOGGED_PATHS = 20


def tighten_home(home: Path, stores: Iterable[Path] = ()) -> int:
    """Take the group and other bits off this user's loose files and folders under `home`
    but local.secret and the recovery files; `stores`: the bound stores, whose folders are
    not entered. Returns how many were tightened."""
    walk = HomeWalk(home, stores)
    if walk.refusal is not None:
        log.warning("not tightening the files under %s: %s", home, walk.refusal)
        return 0
    tightened = 0
    for entry in walk.loose():
        if not entry.kept and _tighten(entry, tightened < LOGGED_PATHS):
            tightened += 1
    if walk.stopped:
        log.warning("stopped tightening the files under %s after %d entries",
                    home, walk.bound)
    if tightened > LOGGED_PATHS:
        log.warning("tightened %d more of kint's files and folders under %s the same way",
                    tightened - LOGGED_PATHS, home)
    return tightened


def _tighten(entry: Loose, say: bool) -> bool:
    """Take the loose bits off `entry` if it is still the regular file or folder the walk
    saw, through a descriptor opened without following a link; `say`: log it (a failure
    is always logged)."""
    path, seen = entry.path, entry.st
    # The walk yields regular files and folders only; O_NONBLOCK: a file swapped for a
    # FIFO since is opened without waiting for a writer (and then refused below).
    flags = os.O_RDONLY | (os.O_DIRECTORY if stat.S_ISDIR(seen.st_mode) else os.O_NONBLOCK)
    old = entry.mode
    new = old & 0o700
    try:
        fd = os.open(entry.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=entry.dir_fd)
    except OSError as err:
        log.warning("could not tighten %s (mode %04o): %s", path, old, err.strerror)
        return False
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (seen.st_dev, seen.st_ino):
            return False  # replaced since it was looked at: the next start sees it
        os.fchmod(fd, new)
    except OSError as err:
        log.warning("could not tighten %s (mode %04o): %s", path, old, err.strerror)
        return False
    finally:
        os.close(fd)
    if say:
        log.warning("tightened %s from mode %04o to %04o: kint's files are its user's alone",
                    path, old, new)
    return True
