"""`run/supervisor.pid`: the lock a running supervisor holds for its whole life, and how
anyone reads who holds it.

It is empty from the moment a supervisor takes the lock until it names itself (an instant;
pid_file_lock.hold_pid_file), then reads `PID` while the supervisor starts and `PID serving`
once its sockets are bound, so a client can tell a supervisor still starting from one that
should answer and does not; `PID stopped` when a signal (a service manager's stop, a
Ctrl-C) ended it before then.
A second supervisor that finds it held exits at once: it tries again only while clients'
shared looks hold it, never while another supervisor does, so that it never takes the
home from under a `kint supervisor stop` of the one that held it.

Kept apart from `autostart` (which starts supervisors) because every client call asks
who holds the lock, and that question must not load what starting one needs: a fresh
`kint supervisor status` pays for every module it imports.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Callable, NamedTuple

from kint.paths import run_dir

PID_FILE = "supervisor.pid"
SERVING = "serving"
STOPPED = "stopped"

# A client checking whether a supervisor runs holds a shared lock on the pid file for an
# instant; a starting supervisor retries through such looks this long at most. Another
# supervisor's exclusive lock is not retried: it runs (pid_file_lock.flock_past_looks).
PID_LOCK_RETRY_S = 3.0
# How long a supervisor refused the lock looks again for the holder's pid to name, while
# the file names no live process: the winner of two starts at once writes its pid a moment
# after it takes the lock (pid_file_lock.hold_pid_file), the file saying nothing until
# then (emptied as the lock is taken), or, in the instant before that, what the last
# supervisor wrote.
NAMED_WITHIN_S = 1.0


class AlreadyRunning(Exception):
    pass


def hold_pid_lock(home: Path, before_named: Callable[[], None] | None = None) -> int:
    """Take the pid lock of `home` for this process and write its pid; returns the open
    file, which must stay open while this process is the supervisor. Raises
    AlreadyRunning at once when another supervisor holds it, and when clients' looks keep
    it past PID_LOCK_RETRY_S (each holds a shared lock on the file for an instant): a
    loser that waited for the winner to let go took the home from its `kint supervisor
    stop`. `before_named` runs with the lock held, before the file names this process
    (pid_file_lock.hold_pid_file)."""
    # Here, not at the top: only a starting supervisor holds the lock, and every client
    # imports this module to look at it (`kint supervisor status` keeps to the client's
    # modules, tests/test_cli.py).
    from kint.pid_file_lock import PidFileHeld, hold_pid_file

    path = run_dir(home) / PID_FILE
    try:
        return hold_pid_file(path, wait_s=PID_LOCK_RETRY_S, before_named=before_named)
    except PidFileHeld:
        raise AlreadyRunning(str(path)) from None


def named_holder(home: Path) -> int | None:
    """For a supervisor refused `home`'s pid lock to name the one that holds it: the pid
    the file names once the kernel says that process holds the lock, looked at again every
    20 ms for up to NAMED_WITHIN_S; None when it names none by then, or nobody holds the
    lock. A loser of two starts at once is refused the instant the winner takes the lock,
    before the winner writes its pid: it named the last, stopped, supervisor, or, the pid
    being alive, whatever process has it since (a supervisor killed, its pid reused: the
    user told to stop a stranger). Only the holder of the lock is named: its own open
    file of the pid file lists the lock (/proc/PID/fdinfo, lock_table.holds_flock). Where
    that cannot be read (no /proc: macOS), the pid the file names once that process is
    alive, as worker_lock names a worker there: the file is emptied as the lock is taken
    (pid_file_lock.hold_pid_file), so a held file names the holder's own pid, but for the
    microseconds between the lock and the emptying. Not none there: every refused start
    would wait out NAMED_WITHIN_S, then name no pid."""
    # Here: only a refused supervisor asks, and every client imports this module.
    from kint.envsettings import pid_alive
    from kint.lock_table import holds_flock, proc_tells

    by_proc = proc_tells()
    deadline = time.monotonic() + NAMED_WITHIN_S
    while True:
        try:  # opened at each look, as `holder` does: the file at the path now
            fd = os.open(run_dir(home) / PID_FILE, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            found = _holder_of(fd)
            if found is not None and found.pid > 0 and (
                    holds_flock(found.pid, fd) if by_proc else pid_alive(found.pid)):
                return found.pid
        finally:
            os.close(fd)
        if found is None or time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


def let_go_starting(home: Path) -> bool:
    """Whether nobody holds `home`'s pid lock and its file names a supervisor that let go
    of it before it bound its sockets and was not stopped (its pid alone, or nothing): one
    that died starting (a setting it could not load, out of files) or was SIGKILLed then.
    Never one `kint supervisor stop` ended: that asks only a supervisor that answers,
    which has said `serving` by then; nor one a SIGTERM, SIGINT or SIGHUP ended before it
    served (`PID stopped`, start_signals), whose stop a new start would undo."""
    words = _let_go(home)
    return words is not None and not words[1:]


class LetGo(NamedTuple):
    """What the pid file of a home nobody holds says of the supervisor that let go of it:
    its pid (None when the file's first word is not one: a refusal names no pid, where it
    named `pid -1`) and its last word (SERVING, STOPPED, or None: it died starting)."""

    pid: int | None
    said: str | None


def let_go_by(home: Path) -> LetGo | None:
    """What the supervisor that let go of `home`'s pid lock last said, nobody holding it
    now; None when one holds it, or there is no file. A start that lost the lock to it
    says what became of it (start_refusals.start_ended), where it said the one it
    lost to was running."""
    words = _let_go(home)
    if words is None:
        return None
    pid = _pid_in(words)
    return LetGo(pid if pid > 0 else None, words[1] if words[1:] else None)


def _let_go(home: Path) -> list[str] | None:
    """The words of `home`'s pid file when nobody holds its lock; None when one does (a
    supervisor, or one of the same race starting) or there is no file."""
    try:
        fd = os.open(run_dir(home) / PID_FILE, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, _SHARED_NOW)
        except OSError:
            return None
        try:
            return _words(os.pread(fd, 64, 0))
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def mark_serving(pid_fd: int) -> None:
    """Say in the held pid file that the sockets are bound: from now on a supervisor that
    does not answer is stuck or stopped, not starting."""
    os.pwrite(pid_fd, f"{os.getpid()} {SERVING}\n".encode(), 0)


def mark_stopped(pid_fd: int) -> None:
    """Say in the held pid file that a signal ends this supervisor before it served: a
    start that lost the lock to it then starts none in its place (let_go_starting)."""
    os.pwrite(pid_fd, f"{os.getpid()} {STOPPED}\n".encode(), 0)


class Holder(NamedTuple):
    """The live supervisor of a home, as its pid file says: its pid (-1 when the file
    names none: not yet, in the instant between its emptying of the file and its pid
    written, or garbled) and whether it has bound its sockets. In the instant before that
    emptying, its lock taken, the file still says what the supervisor before it wrote
    (its pid, `serving`), and a reader here takes that for the holder: `named_holder`
    alone asks the kernel who holds the lock; a client's next look (a second on) finds
    the new one. (A NamedTuple: every client loads this module, and `dataclasses` would
    load `inspect` with it.)"""

    pid: int
    serving: bool


_SHARED_NOW = fcntl.LOCK_SH | fcntl.LOCK_NB


def held_bytes(fd: int) -> bytes | None:
    """The pid file open on `fd`, as bytes, when a supervisor holds its lock; None when
    nobody does (a shared lock taken, and dropped at once)."""
    try:
        fcntl.flock(fd, _SHARED_NOW)
    except OSError:
        return os.pread(fd, 64, 0)
    fcntl.flock(fd, fcntl.LOCK_UN)
    return None


def _words(data: bytes) -> list[str]:
    return data.decode(errors="replace").split()


def _pid_in(words: list[str]) -> int:
    return int(words[0]) if words and words[0].isdigit() else -1


def _holder_of(fd: int) -> Holder | None:
    """Who holds the pid lock open on `fd`."""
    data = held_bytes(fd)
    if data is None:
        return None
    words = _words(data)
    return Holder(_pid_in(words), SERVING in words[1:])


def holder(home: Path) -> Holder | None:
    """The live supervisor of `home`, or None. Reads the lock, never the socket."""
    try:
        fd = os.open(run_dir(home) / PID_FILE, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return _holder_of(fd)
    finally:
        os.close(fd)


def running_pid(home: Path) -> int | None:
    """The pid of the live supervisor of `home` (-1 when unreadable), or None."""
    found = holder(home)
    return found.pid if found is not None else None


class HolderWatch:
    """`running_pid` for a client that asks before every call: the pid file stays open,
    so a look costs a stat, a flock and a pread instead of building the path, opening and
    closing it each time. The stat compares the file at the path with the one held open:
    a pid file removed or replaced (`run/` cleaned, a new supervisor's) is opened again,
    so the answer is always about the file a supervisor would hold now."""

    def __init__(self, home: Path) -> None:
        self._path = str(run_dir(home) / PID_FILE)
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        # The pid file's bytes as last read, the pid they say and whether they say its
        # supervisor has bound its sockets (`serving`): read at every look, parsed again
        # only when they change (once per supervisor, and once it serves).
        self._read: tuple[bytes, int, bool] = (b"", -1, False)
        # The supervisor run the last look found holding the lock: its pid, and the pid
        # file's inode and modification time as the look's stat gave them (None when it
        # found none). A supervisor writes its file as it takes the lock and once it
        # serves, and never again: a successor with the same pid (a container's) writes
        # the same bytes, later. What a client keys what it learnt of one supervisor by.
        self.run: tuple[int, int, int] | None = None

    def pid(self) -> int | None:
        """The pid of the live supervisor (-1 when unreadable), or None."""
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            self.close()
            self.run = None
            return None
        if self._fd is None or (st.st_dev, st.st_ino) != self._ident:
            self.close()
            try:
                fd = os.open(self._path, os.O_RDONLY)
            except FileNotFoundError:
                self.run = None
                return None
            opened = os.fstat(fd)
            self._fd, self._ident = fd, (opened.st_dev, opened.st_ino)
        data = held_bytes(self._fd)
        if data is None:
            self.run = None
            return None
        if data != self._read[0]:  # held, by a supervisor new to this watch, or now serving
            words = _words(data)
            self._read = (data, _pid_in(words), SERVING in words[1:])
        self.run = (self._read[1], st.st_ino, st.st_mtime_ns)
        return self._read[1]

    @property
    def serving(self) -> bool:
        """Whether the pid file, as last read, says its supervisor has bound its sockets.
        Of the last file read: a look that found none (`pid()` None, `run` None) leaves
        it as it was, so a caller asks it of a look that found a holder (`run`)."""
        return self._read[2]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = self._ident = None
