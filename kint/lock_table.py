"""Which process holds a file's exclusive flock, as the kernel says (Linux: /proc/locks).

Why: a lock file that names its holder (kint.tenant_worker.worker_lock, and the supervisor's
pid file: kint.supervisor.pidlock.named_holder) is written a moment after the lock is taken,
so in that moment it still names the holder before; whoever reads it then named a process
long gone, or one that took its pid since. The kernel's table of
locks has no such moment: the lock and its pid are one entry. Where there is no such table
(macOS) or the file is not in it, the answer is None and the file's own words are all
there is.

The table lists every lock of the box: reading it costs ~1 ms with none, tens of ms at
20,000, hundreds at 50,000. So the holder the file names is first asked alone
(`holds_flock`: a stat of each of its open files, the lock lines of the one that is the
lock file), and the table is read only when that process does not hold the lock (the
moment above, or no such lines), at most once a second by a wait that looks ten times a
second (`TableReader`).
"""

from __future__ import annotations

import os
import time

# The kernel's table of every file lock held (proc(5)): one line per lock, e.g.
# `1: FLOCK  ADVISORY  WRITE 4242 fe:00:2146337 0 EOF`; a process waiting for a lock is
# listed under it as `1: -> FLOCK ...`.
LOCKS_TABLE = "/proc/locks"
# Where each process's open files are described (proc(5): /proc/PID/fdinfo/FD, whose
# `lock:` lines are the table's lines for the locks taken through that open file).
PROC = "/proc"
# How often a wait reads the whole table at most (`TableReader`).
TABLE_EVERY_S = 1.0


def proc_tells() -> bool:
    """Whether this box has the /proc that `holds_flock` reads (Linux); without it (macOS)
    a caller has only the lock file's own words, and whether the process they name lives."""
    return os.path.isdir(f"{PROC}/self")


def holds_flock(pid: int, fd: int) -> bool:
    """Whether process `pid` holds the exclusive flock on the file open on `fd`, as the
    lock lines of its own open file of it say (/proc/PID/fdinfo/N lists only the locks
    taken through that open file). Which of its open files is this one: the stat of
    /proc/PID/fd/N (it follows that open file) with the lock file's device and inode. The
    lock line's inode alone (its device may be the one below a stacked file system) named
    a pid taken since by a worker of another KINT_HOME, on another file system whose lock
    file has the same inode number, the holder, with a `kill -KILL` hint. False when they
    cannot be read (no /proc, another user's process, one gone) or do not say so: the
    caller asks the table. The files are looked at lowest first: a worker takes its lock
    before anything else of its space, so it is among its first."""
    try:
        st = os.fstat(fd)
        names = os.listdir(f"{PROC}/{pid}/fd")
    except OSError:
        return False
    for name in sorted(names, key=lambda n: int(n) if n.isdigit() else -1):
        try:
            held = os.stat(f"{PROC}/{pid}/fd/{name}")
            if (held.st_dev, held.st_ino) != (st.st_dev, st.st_ino):
                continue
            with open(f"{PROC}/{pid}/fdinfo/{name}", encoding="ascii",
                      errors="replace") as fh:
                text = fh.read()
        except OSError:
            continue  # closed since
        for line in text.splitlines():
            fields = line.split()
            if (len(fields) >= 5 and fields[0] == "lock:" and fields[2] == "FLOCK"
                    and fields[4] == "WRITE"):
                return True
    return False


class TableReader:
    """`flock_holder` for a wait that looks again and again: the table read at most once
    per TABLE_EVERY_S, its last answer given in between (a holder the file does not name
    yet names itself within that second, and `holds_flock` finds it then)."""

    def __init__(self) -> None:
        self._at: float | None = None
        self._owner: int | None = None

    def holder(self, fd: int) -> int | None:
        now = time.monotonic()
        if self._at is None or now - self._at >= TABLE_EVERY_S:
            self._owner, self._at = flock_holder(fd), now
        return self._owner


def flock_holder(fd: int) -> int | None:
    """The pid holding the exclusive flock on the file open on `fd`, or None when the
    kernel's table cannot be read or does not list one. Matched by the file's inode, its
    device as well when the table's agrees with `fstat`'s (a stacked file system, such as
    a container's overlay, may list the device below)."""
    try:
        st = os.fstat(fd)
        with open(LOCKS_TABLE, encoding="ascii", errors="replace") as fh:
            lines = fh.readlines()
    except OSError:
        return None
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    inode = str(st.st_ino)
    same_inode: dict[int, bool] = {}  # holder pid -> whether its device is the file's
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK" or fields[3] != "WRITE":
            continue  # a waiter (`->`), a POSIX or OFD lock, a shared flock
        dev, _, ino = fields[5].rpartition(":")
        if ino != inode or not fields[4].isdigit() or int(fields[4]) <= 0:
            continue  # a holder of another pid namespace is listed as pid 0 (or -1)
        pid = int(fields[4])
        same_inode[pid] = same_inode.get(pid, False) or dev == device
    exact = [pid for pid, same_device in same_inode.items() if same_device]
    if len(exact) == 1:
        return exact[0]
    return next(iter(same_inode)) if len(same_inode) == 1 and not exact else None
