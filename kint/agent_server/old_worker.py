"""What kint-server waits on before it sends again a restore whose supervisor died
(kint.agent_server.restore_wait): a worker of the space that supervisor, or one before it,
left running (the store stays closed while it lives), and the space's head lock (another
kint process's push or pull).

Both are read from the space's lock files, each taken for an instant at most, never held.
Every worker holds its space's worker lock for its whole life, its pid and its supervisor's
pid written in it (kint.tenant_worker.worker_lock). Held, with a supervisor other than the
one serving the home now, it is a worker a dead supervisor left: stopped or stuck once its
own grace is over. That holds on every system (no /proc walk), whether or not a status
named the worker before its supervisor died, and for a worker stopped before it took the
head lock. Held by a worker of the serving supervisor, it is that one's healthy worker,
never waited on as the old one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from kint.client import KintError
from kint.paths import space_files, worker_lock_path
from kint.protocol import ErrorCode
from kint.lock_table import TableReader
from kint.tenant_worker.worker_lock import Holder, held, holder_closing, open_to_look


def head_lock_free(home: Path, space16: str) -> bool:
    """Whether no process holds the space's head lock (a push, pull or connect of some
    worker): taken shared and let go at once, so a worker that wants it waits at most one
    of its 0.2 s retries (kint.tenant_worker.head_lock)."""
    fd = _open_lock(space_files(home, space16)["head_lock"], "head lock")
    if fd is None:
        return True
    try:
        return not held(fd)
    finally:
        os.close(fd)


def old_worker(home: Path, space16: str, serving_pid: Callable[[], int | None],
               table: TableReader | None = None) -> Holder | None:
    """The holder of the space's worker lock when no supervisor serving now started it
    (see the module's docstring), else None: `serving_pid` reads the pid the home's pid
    file names, or None. The serving supervisor is read after the lock, not before: one
    that another kint process started meanwhile, whose worker took the lock in between,
    would otherwise be no supervisor, and its healthy worker taken for the old one. A
    holder that has not written its pids yet (an instant after it took the lock), the
    file still naming the one before it, counts as old for this look, its supervisor
    unknown (`live_holder`: named by the kernel's table of locks where there is one, else
    unnamed); the next one reads them. A look again and again passes its `table`: the
    kernel's whole table read at most once a second."""
    fd = _open_lock(worker_lock_path(home, space16), "worker lock")
    holder = None if fd is None else holder_closing(fd, table)
    if holder is None:
        return None
    serving = serving_pid()
    if serving is not None and holder.supervisor_pid == serving:
        return None
    return holder


def _open_lock(path: Path, what: str) -> int | None:
    """The lock file at `path` opened to read, or None when there is none (or a link:
    worker_lock.open_to_look). A lock file that cannot be opened otherwise (its mode
    changed, KINT_HOME not a folder) is refused as what it is, CORRUPT_STATE naming it, not
    left to end the restore INTERNAL: a worker cannot take it either, so the restore sent
    again would fail on it."""
    try:
        return open_to_look(path)
    except OSError as err:
        raise KintError(
            ErrorCode.CORRUPT_STATE.value,
            f"the space's {what} {path} cannot be opened ({err.strerror}): the restore "
            f"was not sent again, and the store is opened as it stands",
            f"kint keeps that file as a regular file of this user, mode 0600, in "
            f"KINT_HOME's folder: fix what the message names (a mode: `chmod 600 {path}`), "
            f"then call memory_pull with discard_local again") from None
