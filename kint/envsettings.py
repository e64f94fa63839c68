"""Process helpers. (Settings are read through kint.settings, and nowhere else.)"""

from __future__ import annotations

import os


# Whether this system has a /proc to tell a zombie by (Linux); without one (macOS) a missing
# /proc/<pid> says nothing about the pid.
_HAVE_PROC = os.path.exists("/proc/self/stat")


def pid_alive(pid: int) -> bool:
    """True while a process of this user with this pid runs. Every caller asks about a
    process of its own user (a worker's supervisor, kint-server's worker, the nonce book's
    holder), so a pid os.kill may not signal now belongs to another user: the process asked
    about is gone and its pid was taken again, which counts as gone (a /proc mounted with
    hidepid=2 hides such a pid, and so says the same). A zombie (exited, not yet reaped)
    counts as gone too: a supervisor killed under a parent that never reaps it (a
    container's init that reaps nothing, a subreaper that waits for none) stays a zombie,
    and a worker checking on it by its pid alone went on serving, the restore it was running
    included, with no supervisor to answer for it."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    if not _HAVE_PROC:  # macOS: os.kill is all there is
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except (FileNotFoundError, ProcessLookupError):  # reaped meanwhile
        return False
    except OSError:  # a process this user may signal but not read: os.kill said enough
        return True
    return stat.rsplit(b")", 1)[-1].split()[:1] not in ([b"Z"], [b"X"])
