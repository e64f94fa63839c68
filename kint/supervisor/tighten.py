"""At supervisor start: kint's own files under KINT_HOME made private again.

Every file kint writes now is 0600 and every folder 0700, but a file made by an older kint
or under a loose umask (run/supervisor.stderr, the pid and lock files, a log, a state
file) keeps its mode when it is reused: opening an existing file never changes it. So the
supervisor, once it holds the pid lock (no other supervisor is doing the same), takes the
group and other bits off every regular file and folder of this user's under KINT_HOME
and logs one line for each of the first LOGGED_PATHS (its path and old mode, never its
contents), then one line for the rest.

The walk never follows a symlink: `os.fwalk` descends through file descriptors, and each
entry is opened with O_NOFOLLOW and checked to be the one looked at before its mode is
changed through that descriptor, so a name swapped for a link in a folder that was open to
others changes nothing outside. It stays out of the Sibyl stores' folders (which should
never be under KINT_HOME), changes nothing when a store's folder is KINT_HOME itself or
KINT_HOME holds the user's home folder, and stops after MAX_ENTRIES entries.
`local.secret` and the recovery files (`RECOVERY-<space16>.txt`: the data key itself) are
left as they are: one that was open to others may have been read. kint refuses a loose
local.secret by name (LocalSecretUnsafe) so that its user replaces it, and doctor fails a
loose recovery file (rekey if it was read); made private here, either would be used as if
nothing had happened.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Iterable

log = logging.getLogger("kint.supervisor")

# Far past any home kint makes (a few files per space, one per cached epoch): a bigger tree
# is not kint's alone, and the supervisor's start is not held by walking it.
MAX_ENTRIES = 100_000
# One log line a path for the first ones, then one line for the rest: a home full of an
# older kint's 0644 epoch files would otherwise rotate every earlier line out of the log.
LOGGED_PATHS = 20
# What kint's files and folders never carry: any access for group and others.
LOOSE_BITS = 0o077
# The recovery files under KINT_HOME (kint.paths names each one): the caller leaves them alone.
RECOVERY_FILES = "RECOVERY-*.txt"


def tighten_home(home: Path, left_alone: Iterable[Path] = ()) -> int:
    """Take the group and other bits off this user's regular files and folders under
    `home`, except `left_alone`: files not changed and folders not entered (the Sibyl
    stores', local.secret, the recovery files). Returns how many were tightened."""
    if _holds_user_home(home):
        log.warning("not tightening the files under %s: it holds your home folder, whose "
                    "files are not kint's", home)
        return 0
    skipped = {(st.st_dev, st.st_ino) for st in map(_lstat, left_alone) if st is not None}
    own = _lstat(home)
    if own is not None and (own.st_dev, own.st_ino) in skipped:
        # A store's folder is KINT_HOME itself: its entries are that store's (the database,
        # its journal), which the walk never enters, so none of them is changed.
        log.warning("not tightening the files under %s: it is a Sibyl store's folder, whose "
                    "files are not kint's alone", home)
        return 0
    uid = os.getuid()
    tightened = seen = 0
    for root, dirs, files, root_fd in os.fwalk(home, follow_symlinks=False):
        for name in [*dirs, *files]:
            seen += 1
            if seen > MAX_ENTRIES:
                break
            try:
                st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
            except OSError:
                continue  # gone since it was listed
            if (st.st_dev, st.st_ino) in skipped:
                if name in dirs:
                    dirs.remove(name)
            elif st.st_uid == uid and st.st_mode & LOOSE_BITS and _tighten(
                    os.path.join(root, name), name, root_fd, st, tightened < LOGGED_PATHS):
                tightened += 1
        if seen > MAX_ENTRIES:
            log.warning("stopped tightening the files under %s after %d entries",
                        home, MAX_ENTRIES)
            break
    if tightened > LOGGED_PATHS:
        log.warning("tightened %d more of kint's files and folders under %s the same way",
                    tightened - LOGGED_PATHS, home)
    return tightened


def _tighten(path: str, name: str, root_fd: int, seen: os.stat_result, say: bool) -> bool:
    """Take the loose bits off `name` (in the folder `root_fd`) if it is still the regular
    file or folder `seen`, through a descriptor opened without following a link; `say`:
    log it (a failure is always logged)."""
    if stat.S_ISDIR(seen.st_mode):
        flags = os.O_RDONLY | os.O_DIRECTORY
    elif stat.S_ISREG(seen.st_mode):
        flags = os.O_RDONLY | os.O_NONBLOCK
    else:
        return False  # a socket, a FIFO, a device: not a file kint keeps state in
    old = stat.S_IMODE(seen.st_mode)
    new = old & 0o700
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root_fd)
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
