"""One live worker per space of a KINT_HOME, held by the kernel rather than looked for.

A worker whose supervisor died lives on until it notices (kint.tenant_worker.stop_grace:
ORPHAN_EXIT_S), and for good while it is stopped (SIGSTOP, a debugger). The next supervisor
of the home, started by the next `kint` command or by kint-server, used to start a worker
for the same space at once beside it: two workers on one store, one mirror, one push
journal. The head lock serialises pushes and pulls only, not the store watcher, the mirror's
saves or the session files.

So each worker takes an exclusive flock on `worker-<space16>.lock` in KINT_HOME before it
touches anything of its space, and keeps it until its process ends (the kernel lets it go
then, however the process ends: a SIGKILL too). It writes its pid and its supervisor's pid
in the file, so whoever finds the lock held can name the holder (once that pid is seen to
be a live kint worker's, and, where the kernel lists its locks, the one holding this lock:
`live_holder`), and can tell an old worker (its supervisor not
the one serving the home now) from the serving supervisor's own
(kint.agent_server.old_worker), on any system: no /proc walk.

A worker that finds the lock held waits for it: a recycled, restarted or upgraded worker's
successor is started only once its predecessor has exited (kint.supervisor.worker_exit),
so it finds the lock free or free within a moment, and an orphan exits within ORPHAN_EXIT_S of
its supervisor's death. Past that bound, or once the holder has been seen stopped for
STOPPED_FOR_S (it lets go of nothing until continued; Linux only, /proc), the start is
refused with `WorkerLockHeld`, which names the holder and the way out; the supervisor
answers the space's requests with it (kint.supervisor.worker_exit) and starts no other worker
until the next request. A request whose deadline comes first is answered TIMEOUT naming the
holder too: the supervisor reads the lock then (`waited_for`, `waiting_words`), without
blocking on whatever is at its path (`open_to_look`). The file is opened as every lock file
of KINT_HOME is (kint.pid_file_lock.open_own_file: 0600, never through a link).
"""

from __future__ import annotations

import errno
import fcntl
import math
import os
import stat
import time
from pathlib import Path
from typing import NamedTuple

from kint import lock_table
from kint.envsettings import pid_alive
from kint.lock_table import TableReader, holds_flock
from kint.pid_file_lock import NotOwnFile, flock_by, open_own_file, write_holder
from kint.proc_stat import process_stopped
from kint.seconds_text import seconds_text
from kint.tenant_worker.stop_grace import ORPHAN_EXIT_S
from kint.tenant_worker.store_sharers import worker_start

# How long a starting worker waits for the lock: the longest an old worker that is neither
# stopped nor stuck outlives its supervisor. Well under the supervisor's start timeout
# (30 s without a hello is a hung start), so the wait ends in a refusal, never a hang.
WAIT_S = ORPHAN_EXIT_S
# How often it tries again meanwhile.
RETRY_S = 0.1
# How long the holder must be seen stopped before the start is refused without waiting out
# WAIT_S: a process stopped for an instant is not refused.
STOPPED_FOR_S = 1.0


class Holder(NamedTuple):
    """What is known of the worker holding the lock: its pid (the kernel's where it lists
    its locks, else the file's) and its supervisor's (the file's), each None when nobody
    can name it (the file is written a moment after the lock is taken)."""

    pid: int | None
    supervisor_pid: int | None


class WorkerLockHeld(Exception):
    """Another worker of the space holds the lock: the start is refused (never a crash)."""

    def __init__(self, path: Path, space16: str, holder: Holder, stopped: bool,
                 waited_s: float) -> None:
        self.path, self.holder, self.stopped = path, holder, stopped
        pid = holder.pid
        who = (f"pid {pid}" if pid is not None
               else "a process whose pid the lock file does not name")
        why = ("it is stopped (SIGSTOP, a Ctrl-Z or a debugger)" if stopped
               else f"it did not let go within {seconds_text(waited_s)} (stopped or stuck)")
        super().__init__(
            f"another worker of space {space16} still runs ({who}) and holds {path}: {why}; "
            f"no second worker is started beside it on the same store")
        self.hint = holder_hint(path, pid)


def holder_hint(path: Path, pid: int | None) -> str:
    """The way out when the worker `pid` (None: a process nobody can name) holds the lock
    at `path`. An old worker had its SIGTERM when its supervisor died (the parent-death
    signal), and is still here: a second `kill` would do nothing more."""
    if pid is None:
        return unnamed_holder_hint(path)
    return (f"`kill -CONT {pid}` if it is stopped (it then exits by itself once its "
            f"supervisor is gone), or `kill -KILL {pid}` if it is stuck (a SIGTERM it "
            f"already had); then run the command again")


def unnamed_holder_hint(path: Path) -> str:
    """The way out when the lock at `path` is held by a process nobody can name: the lock
    file does not, or the refusal's own message never reached the supervisor
    (kint.supervisor.worker_exit)."""
    return (f"find the process with `lsof {path}` (or `fuser {path}`) and end it, then run "
            f"the command again")


def read_holder(fd: int) -> Holder:
    """The pids written at the start of the lock file open on `fd`."""
    try:
        words = os.pread(fd, 64, 0).decode("ascii", "replace").split()
    except OSError:
        words = []
    pids = [int(w) if w.isdigit() else None for w in words[:2]]
    pids += [None] * (2 - len(pids))
    return Holder(pids[0], pids[1])


def held(fd: int) -> bool:
    """Whether another process holds the lock on `fd` (taken shared and let go at once:
    a worker that wants it meanwhile waits one of its RETRY_S tries)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def open_to_look(path: Path) -> int | None:
    """The lock file at `path` opened to read, to look whether it is held, or None when
    there is none. Never through a link: no worker takes a lock through one (it refuses
    the file by name), so a link there holds nothing of kint's. Opened without blocking
    (O_NONBLOCK) and refused unless a regular file (NotOwnFile, an OSError): the
    supervisor looks from its loop (`waited_for`, `held_at`), and a FIFO put there blocked
    its open until a writer came, forever; no worker takes a lock on anything else either
    (kint.pid_file_lock.open_own_file). Any other failure to open it is raised (OSError),
    for the caller to say as what it is."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            return None
        raise
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        raise NotOwnFile(path, "is not a regular file")
    return fd


def held_at(path: Path) -> bool | None:
    """Whether a process holds the worker lock at `path`: False when there is no such file
    (or a link, which no worker takes), None when it cannot be opened to look (unknown)."""
    try:
        fd = open_to_look(path)
    except OSError:
        return None
    if fd is None:
        return False
    try:
        return held(fd)
    finally:
        os.close(fd)


def waited_for(path: Path, pid: int) -> Holder | None:
    """The holder of the worker lock at `path` when a live process other than `pid` (a
    worker still starting) holds it: the one that worker waits for, named as `live_holder`
    names it (both pids None when nobody can, the supervisor's pid None when only the
    kernel names the holder). None when the lock is free, is `pid`'s own, or cannot be
    looked at. The supervisor reads it only for a request that times out while its worker
    starts (kint.supervisor.timed) and for a `starting` row of its status
    (kint.supervisor.status), never on a request's way. The common case, a starting worker
    that has its lock already, costs an open, a flock try and a read of the file, which
    names that worker, alive (a zombie's lock is gone: `pid_alive` counts it gone): its own
    line, so neither its open files nor the kernel's table of locks are read; otherwise
    `live_holder`'s."""
    try:
        fd = open_to_look(path)
    except OSError:
        return None
    if fd is None:
        return None
    try:
        if not held(fd):
            return None
        if read_holder(fd).pid == pid and pid_alive(pid):
            return None  # it wrote its line once it had the lock, and holds it for life
        holder = live_holder(fd)
    finally:
        os.close(fd)
    return None if holder.pid == pid else holder


def holder_closing(fd: int, table: TableReader | None = None) -> Holder | None:
    """The holder of the lock open on `fd`, as `live_holder` names it, or None when no
    other process holds it; `fd` is closed (a look, never kept)."""
    try:
        return live_holder(fd, table) if held(fd) else None
    finally:
        os.close(fd)


def waiting_words(path: Path, holder: Holder, waited_s: float) -> tuple[str, str]:
    """What a starting worker waiting `waited_s` so far for `holder` to let go of the
    lock at `path` is doing, and the way out, for the TIMEOUT of a request that cannot
    wait for the start's end. A stopped holder is told `kill -CONT` at once. One that is
    not is most likely an old worker finishing its op within its grace (an orphan exits
    within ORPHAN_EXIT_S): told to run the command again once it has, not `kill -KILL`,
    which is the refusal's word for it once the wait is out (`holder_hint`)."""
    pid = holder.pid
    who = (f"another worker of the space (pid {pid})" if pid is not None
           else "a process whose pid the lock file does not name")
    if pid is not None and process_stopped(pid):
        return (_waiting(path, who, " and is stopped (SIGSTOP, a Ctrl-Z or a debugger)",
                         f"once it has been seen stopped for {seconds_text(STOPPED_FOR_S)}"),
                f"`kill -CONT {pid}` (it then exits by itself once its supervisor is "
                f"gone), then run the command again")
    said = _waiting(path, who, "", f"if it has not let go within {seconds_text(WAIT_S)} of "
                    f"the worker's start (an old worker whose supervisor died exits by then "
                    f"unless it is stopped or stuck)")
    left = WAIT_S - waited_s
    if pid is None or left <= 0:
        return said, holder_hint(path, pid)
    return said, (f"it should exit within {seconds_text(max(1, math.ceil(left)))} (most likely "
                  f"finishing its op): run the command again then; if the start is refused "
                  f"instead, that refusal says how to end it")


def _waiting(path: Path, who: str, state: str, refused: str) -> str:
    return (f"the worker is starting: it waits for the space's worker lock {path}, which "
            f"{who} holds{state}; no second worker serves beside it, and the start is "
            f"refused {refused}")


def live_holder(fd: int, table: TableReader | None = None) -> Holder:
    """The holder of the lock on `fd`: the one `read_holder` reads when the kernel says
    that process holds it (kint.lock_table.holds_flock; Linux), else the pid
    the kernel's table of locks gives (read now, or at most once a second through `table`
    by a wait), else the file's; believed only when it is a live kint worker (named
    kint.proc_name.WORKER, from /proc; where there is no /proc, a live process); otherwise
    both None. Between a new holder's lock and its write, the file still names the holder
    before it, whose pid may since have gone to another process (a stranger once judged
    stopped, or named with `kill -KILL`), or to nobody: a wait that ended in that instant
    refused naming nobody, with the lsof hint, though the holder was a worker of kint's.
    The kernel's pid has no such instant. The supervisor's pid is the file's only when the
    file names that same pid: else the line is the holder before's, and its supervisor's
    pid as stale (None: not known)."""
    holder = read_holder(fd)
    if holder.pid is None or not holds_flock(holder.pid, fd):
        owner = lock_table.flock_holder(fd) if table is None else table.holder(fd)
        if owner is not None and owner != holder.pid:
            holder = Holder(owner, None)
    if holder.pid is None or _live_worker(holder.pid):
        return holder
    return Holder(None, None)


def _live_worker(pid: int) -> bool:
    if os.path.isdir("/proc/self"):
        return worker_start(pid) is not None
    return pid_alive(pid)


def hold_worker_lock(path: Path, space16: str, supervisor_pid: int,
                     wait_s: float | None = None) -> int:
    """Take the space's worker lock for this process's life, waiting up to `wait_s`
    (WAIT_S by default) while another worker holds it, and write this process's pid and
    its supervisor's in it. Returns the open file, which holds the lock until the process
    ends. Raises WorkerLockHeld when it stays held (or its holder is stopped), NotOwnFile
    or OSError when the file cannot be opened."""
    waited = WAIT_S if wait_s is None else wait_s
    fd = open_own_file(path)
    try:
        started = time.monotonic()
        stopped_since: float | None = None
        table = TableReader()  # ten looks a second: the box's whole table once at most
        while not flock_by(fd, 0.0, RETRY_S):  # one try: the loop below decides the wait
            holder = live_holder(fd, table)
            now = time.monotonic()
            stopped = holder.pid is not None and process_stopped(holder.pid)
            stopped_since = (stopped_since or now) if stopped else None
            if now - started >= waited or (stopped_since is not None
                                           and now - stopped_since >= STOPPED_FOR_S):
                raise WorkerLockHeld(path, space16, holder, stopped, waited)
            time.sleep(RETRY_S)
        write_holder(fd, supervisor_pid)
    except BaseException:
        os.close(fd)
        raise
    return fd
