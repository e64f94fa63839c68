"""Which process holds a file's exclusive flock, as the kernel says (Linux: /proc/locks).

Why: a lock file that names its holder (kint.tenant_worker.worker_lock) is written a moment
after the lock is taken, so in that moment it still names the holder before; whoever reads
it then named a process long gone, or one that took its pid since. The kernel's table of
locks has no such moment: the lock and its pid are one entry. Where there is no such table
(macOS) or the file is not in it, the answer is None and the file's own words are all
there is.
"""

from __future__ import annotations

import os

# The kernel's table of every file lock held (proc(5)): one line per lock, e.g.
# `1: FLOCK  ADVISORY  WRITE 4242 fe:00:2146337 0 EOF`; a process waiting for a lock is
# listed under it as `1: -> FLOCK ...`.
LOCKS_TABLE = "/proc/locks"


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
        if ino != inode or not fields[4].isdigit():
            continue
        pid = int(fields[4])
        same_inode[pid] = same_inode.get(pid, False) or dev == device
    exact = [pid for pid, same_device in same_inode.items() if same_device]
    if len(exact) == 1:
        return exact[0]
    return next(iter(same_inode)) if len(same_inode) == 1 and not exact else None
