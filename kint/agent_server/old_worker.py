"""Who holds a space's head lock after the supervisor running a restore died: nobody (the
restore may be sent again), the worker that ran the restore (the store stays closed while
it lives), or another kint process (kint.agent_server.restore_wait).

The worker's pid is learnt from the supervisor's status soon after the restore is sent,
but a supervisor that dies before that look leaves it unknown, and a stopped worker holds
the head lock all the while (a pull runs under it: kint.tenant_worker.head_lock). So it is
also looked for by the lock: a kint worker (named kint.proc_name.WORKER) with this space's
head lock file open, which only this home's workers of this space open. It is the old one
when no supervisor serves the home now, or when it started before the one that does: a
supervisor's workers start after it, so a new supervisor's healthy worker (another kint
process's pull) is never taken for it. Linux only (/proc); elsewhere the look finds nobody,
and a head lock still held ends the restore BUSY as before.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import Callable

from kint.client import KintError
from kint.paths import space_files
from kint.protocol import ErrorCode
from kint.tenant_worker.store_holders import file_holders
from kint.tenant_worker.store_sharers import process_start, worker_start


def head_lock_free(home: Path, space16: str) -> bool:
    """Whether no process holds the space's head lock (a push, pull or connect of some
    worker): taken shared and let go at once, so a worker that wants it waits at most one
    of its 0.2 s retries (kint.tenant_worker.head_lock). Never through a link: no worker
    takes the lock through one either (it refuses the file by name, CORRUPT_STATE), so a
    link there holds nothing of kint's. A lock file that cannot be opened otherwise (its
    mode changed, KINT_HOME not a folder) is refused as what it is, CORRUPT_STATE naming
    it, not left to end the restore INTERNAL: a worker cannot take it either, so the
    restore sent again would fail on it."""
    path = space_files(home, space16)["head_lock"]
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return True
    except OSError as err:
        if err.errno == errno.ELOOP:
            return True
        raise KintError(
            ErrorCode.CORRUPT_STATE.value,
            f"the space's head lock {path} cannot be opened ({err.strerror}): the restore "
            f"was not sent again, and the store is opened as it stands",
            f"kint keeps that file as a regular file of this user, mode 0600, in "
            f"KINT_HOME's folder: fix what the message names (a mode: `chmod 600 {path}`), "
            f"then call memory_pull with discard_local again") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)  # closing the descriptor lets the lock go
    return True


def old_worker_on_lock(home: Path, space16: str,
                       serving_pid: Callable[[], int | None]) -> tuple[int, str] | None:
    """The pid and start time of a kint worker with the space's head lock file open that
    no supervisor serving now started (see the module's docstring): `serving_pid` reads
    the pid the home's pid file names, or None. A walk of /proc's open files, so asked
    only while the lock is held and no old worker is known. The serving supervisor is read
    after the walk, not before: one that another kint process started meanwhile, whose
    worker took the lock during the walk, would otherwise be no supervisor, and its
    healthy worker taken for the old one (waited on while it lives)."""
    if not os.path.isdir("/proc/self/fd"):
        # Without /proc no worker's start time is known (`worker_start`), so none could be
        # told old; and `file_holders` would run lsof (seconds) at every turn of the loop.
        return None
    holders = file_holders(str(space_files(home, space16)["head_lock"]))
    if not holders:
        return None
    serving = serving_pid()
    serving_start = process_start(serving) if serving is not None and serving > 0 else None
    for pid in holders:
        started = worker_start(pid)
        if started is None:  # not a kint worker, or gone
            continue
        if serving_start is None or int(started) < int(serving_start):
            return pid, started
    return None
