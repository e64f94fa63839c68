"""A lock file a process holds for as long as it runs, holding that process's pid: how the
supervisor claims its home (`run/supervisor.pid`) and `kint setup` its run (`setup.lock`).

Both open the file 0600 without following a link (the file lives in a 0700 folder of
KINT_HOME, and a link there is not one kint made), take an exclusive flock without
blocking, and write the pid once the lock is theirs, so whoever finds it held can name the
holder. They differ only in how long a held lock is tried: a starting supervisor retries
for a few seconds while only shared locks hold it (a client's status check holds one on
the same file for an instant), and never past another's exclusive one (`flock_past_looks`),
where a second setup refuses at once rather than wait behind harness commands that may
take minutes. One module keeps the two from drifting apart (one wrote a newline
after the pid and followed links, the other did neither). `flock_by`, the wait for the
flock whoever holds it, is how the supervisor's start lock (supervisor/autostart.py) and a
space's head lock (tenant_worker/head_lock.py) are taken within their deadlines, and a
space's worker lock (tenant_worker/worker_lock.py) is tried, and
`open_own_file` how every lock file of KINT_HOME is opened (those two, these two, the
nonce book's, the devchain's and custody's), and the supervisor's stderr: never through a
link, and only a regular file of this user.

Only `errno`, `os`, `fcntl`, `stat` and `time`: every kint client asks who holds the
supervisor's lock, and this must not cost it an import.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from pathlib import Path
from typing import Callable

# flock's answers for a lock another process holds (EACCES is fcntl's, kept for NFS).
_HELD = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)
_RETRY_EVERY_S = 0.02


# What to do about a link or a stranger's file where kint keeps one of its own.
FOREIGN_FILE_HINT = "remove it (nothing of kint's made it), then run the command again"


class NotOwnFile(OSError):
    """A file of KINT_HOME that kint will not use: a link, a folder, or not a regular file
    of this user. `why` ends the sentence its path starts ("is a symlink"); it is the
    error's `strerror` too, for a caller that words an OSError by that."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path} {why}")
        self.strerror = why
        self.path = path
        self.why = why


def open_own_file(path: Path) -> int:
    """Open the file at `path` read-write (created 0600), never through a link, and only
    when it is a regular file of this user: its folder is a 0700 folder of KINT_HOME, so a
    link or a stranger's file there is not one kint made, and a flock, a pid write or an
    emptying through a link would lock, create or truncate a file elsewhere. Raises
    NotOwnFile for such a file, OSError when it cannot be opened at all."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise NotOwnFile(path, "is a symlink") from None
        if err.errno == errno.EISDIR:
            raise NotOwnFile(path, "is a folder") from None
        raise
    st = os.fstat(fd)
    if st.st_uid != os.getuid() or not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotOwnFile(path, "is not a regular file of this user")
    return fd


class PidFileHeld(Exception):
    """Another process holds the lock; `pid` is what it wrote (None when unreadable)."""

    def __init__(self, path: Path, pid: int | None) -> None:
        super().__init__(str(path))
        self.path = path
        self.pid = pid


def holder_pid(fd: int) -> int | None:
    """The pid written at the start of the lock file open on `fd`, or None."""
    try:
        words = os.pread(fd, 64, 0).decode("ascii", "replace").split()
    except OSError:
        return None
    return int(words[0]) if words and words[0].isdigit() else None


def flock_by(fd: int, deadline: float, every_s: float) -> bool:
    """Take the exclusive flock of the file open on `fd`, trying again every `every_s`
    while another process holds it, until `deadline` (monotonic): whether it was taken. An
    error that is not the lock being held (no locks on that file system) is raised at
    once: waiting would not mend it, and the deadline's refusal would blame a holder."""
    while not _took(fd, fcntl.LOCK_EX):
        if time.monotonic() >= deadline:
            return False
        time.sleep(every_s)
    return True


def _took(fd: int, kind: int) -> bool:
    """One non-blocking try of flock `kind` on `fd`: whether it was taken (False: another
    process holds the file). Any other error (no locks on that file system) is raised."""
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
        return True
    except OSError as err:
        if err.errno not in _HELD:
            raise
        return False


def flock_past_looks(fd: int, deadline: float, every_s: float) -> bool:
    """Take the exclusive flock of the file open on `fd`, trying again every `every_s`
    until `deadline` (monotonic) only while shared locks alone keep it (readers' looks,
    each held for an instant): False at once when another process holds it exclusively.
    That holder runs (a supervisor holds its pid file for its whole life), and waiting for
    it to let go would take its place the moment it stops: a second supervisor started
    beside a running one, retrying through its whole wait, took KINT_HOME from under a
    `kint supervisor stop` of the first. flock's shared lock is refused exactly while an
    exclusive one is held, so one non-blocking try of it tells the two apart."""
    while not _took(fd, fcntl.LOCK_EX):
        if not _took(fd, fcntl.LOCK_SH):
            return False  # held exclusively: by a process that holds it as its own
        fcntl.flock(fd, fcntl.LOCK_UN)
        if time.monotonic() >= deadline:
            return False
        time.sleep(every_s)
    return True


def hold_pid_file(path: Path, wait_s: float = 0.0,
                  before_named: Callable[[], None] | None = None) -> int:
    """Open `path` (created 0600, never through a link), take its exclusive flock, trying
    again for up to `wait_s` while only readers' shared looks hold it (flock_past_looks),
    and write this process's pid in it. Returns the open file, which holds the lock until
    it is closed. Raises PidFileHeld when another process holds the lock as its own, or
    the looks outlast `wait_s`; NotOwnFile for a link or a file that is not this user's,
    OSError when the file cannot be opened.

    `before_named` runs once the lock is taken and before the pid is written: whatever a
    dead holder left that readers would take for the new holder's once the file names it
    is removed while no reader can name this process yet (its exceptions are the
    caller's: the lock is let go). The file is emptied before it: what the last holder
    wrote (`PID stopped`) is never read as this process's own last words, were this one
    killed before it names itself (a start that lost the lock to it named that long-gone
    pid, said stopped as it started, and started none in the place of one that died)."""
    fd = open_own_file(path)
    try:
        taken = flock_past_looks(fd, time.monotonic() + wait_s, _RETRY_EVERY_S)
    except OSError:
        os.close(fd)
        raise
    if not taken:
        pid = holder_pid(fd)
        os.close(fd)
        raise PidFileHeld(path, pid)
    try:
        os.ftruncate(fd, 0)  # the lock is this process's: nothing the last holder said stays
        if before_named is not None:
            before_named()
        write_holder(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_holder(fd: int, *more: int) -> None:
    """Write this process's pid, and `more` after it, as all the lock file open on `fd`
    says (`holder_pid` reads the first back): whoever finds the lock held can name the
    holder. One line, the pids apart by a space (a space's worker lock names its
    supervisor's too: kint.tenant_worker.worker_lock)."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, (" ".join(str(pid) for pid in (os.getpid(), *more)) + "\n").encode("ascii"), 0)
