"""Open files (RLIMIT_NOFILE, `ulimit -n`): counted by the supervisor before each spawn, and
named by a worker whose op ran out of them.

Every worker costs the supervisor three descriptors for as long as it runs (its exit
sentinel, the pipe to its forkserver child, its connection on the back socket), and the
forkserver one more. On a box with tens of spaces under a low `ulimit -n` the supervisor
used to spawn until the limit, and then:
- the spawn failed (EMFILE) and counted as a crash, so a healthy space was quarantined
  for 30 s with "could not spawn: Too many open files";
- the forkserver, at the same limit, died receiving a spawn's descriptors, and every later
  spawn of every space failed ("Connection refused") until the supervisor stopped;
- the next client to connect killed the supervisor: libzmq asserts when accept() on an
  IPC socket fails with EMFILE (`Too many open files (src/ipc_listener.cpp:297)`), an
  abort, no log line, every worker gone.

So the supervisor raises its soft limit to its hard one as it starts, and a worker is
started only while the descriptors left after it keep a reserve for clients' connections
and the supervisor's own files (its log, a store's header check, a config read). Past
that, the worker quiet longest that nobody needs is stopped to make room; with none, the
request is refused BUSY, naming the limit and what frees room, and the space is not
counted as crashed (kint/supervisor/room.py).

A worker inherits the same limit. An op of one that runs out (EMFILE opening a state file,
the store, a module it imports on first use) is refused BUSY naming the limit too, never
INTERNAL calling it a bug in kint.
"""

from __future__ import annotations

import errno
import os
import resource
from typing import NamedTuple

# What one running worker holds open in the supervisor (measured: sentinel, pipe, socket).
FDS_PER_WORKER = 3
# Kept free whatever the limit: a spawn's own transient descriptors (the forkserver
# connection, the descriptors it passes) and a few clients connecting at once.
MIN_RESERVE = 16
# And an eighth of the limit on top, for the agent sessions' long-lived connections.
RESERVE_FRACTION = 8
# What the supervisor holds open with no worker running: measured 19 (its standard
# streams, sockets, ZeroMQ's pollers and signalling, the forkserver's pipes, the log),
# and some to spare.
START_FDS = 24
# What the worker forkserver's warm-up opens in the supervisor, in a thread beside its loop,
# while the supervisor already serves (kint/supervisor/spawner.py): the forkserver's
# listener and its spawn's pipes, the resource tracker's, the first child's pipes and its
# sentinel. Measured at most 10 above the count before it began, and some to spare.
WARM_UP_FDS = 12
# Where this process's open descriptors are listed (Linux, then macOS and the BSDs).
_FD_FOLDERS = ("/proc/self/fd", "/dev/fd")

OUT_OF_FILES = frozenset({errno.EMFILE, errno.ENFILE})

ROOM_HINT = ("raise the open-file limit the supervisor starts with (`ulimit -n` in its "
             "shell, LimitNOFILE= in its systemd unit) and run `kint supervisor stop`; or "
             "end agent sessions no longer in use: a worker with no session and nothing to "
             "do is stopped to make room at the next request")


class OpenFiles(NamedTuple):
    """How many descriptors this process has open, and may (its soft limit)."""

    open: int
    limit: int

    @property
    def reserve(self) -> int:
        return MIN_RESERVE + self.limit // RESERVE_FRACTION

    def room_for_worker(self) -> bool:
        return self.open + FDS_PER_WORKER + self.reserve <= self.limit

    def too_few_to_start(self) -> bool:
        """Whether this limit leaves the supervisor no room for even one worker beside its
        own descriptors and the reserve. Checked before it makes its ZeroMQ context:
        libzmq aborts the process (SIGABRT) where it meets EMFILE making its poller, where
        Python would see an error."""
        return START_FDS + FDS_PER_WORKER + self.reserve > self.limit

    def as_json(self) -> dict[str, int]:
        return {"open": self.open, "limit": self.limit, "reserve": self.reserve}


def open_files() -> OpenFiles | None:
    """This process's open descriptors and soft limit; None where neither the count nor
    the limit can be had (no fd folder to list, or no limit: then nothing is refused)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    for folder in _FD_FOLDERS:
        try:
            # The listing's own descriptor is in it, and closed once it is read.
            return OpenFiles(len(os.listdir(folder)) - 1, soft)
        except OSError as err:
            if out_of_files(err):  # no descriptor left even to list them: at the limit
                return OpenFiles(soft, soft)
            continue
    return None


# The system's count of open files: allocated, allocated but unused, and the most (Linux).
FILE_NR = "/proc/sys/fs/file-nr"


def system_table_room() -> bool | None:
    """Whether the system's table of open files has room for a worker's start again (the
    cause of ENFILE gone: it is often brief); None where the count cannot be read. Read
    only while a start refused for want of it stands."""
    try:
        with open(FILE_NR, encoding="ascii") as f:
            allocated, unused, most = (int(n) for n in f.read().split()[:3])
    except (OSError, ValueError):
        return None
    return allocated - unused + FDS_PER_WORKER + MIN_RESERVE <= most


# The most descriptors the supervisor raises its soft limit to (below its hard limit).
RAISE_SOFT_TO = 65536


def raise_soft_limit() -> tuple[int, int] | None:
    """Raise this process's soft limit to its hard limit (at most RAISE_SOFT_TO), once at
    the supervisor's start, before its forkserver and workers inherit it; returns (old,
    new) when it rose. A login shell and systemd give 1024 soft under a far higher hard
    limit, leaving it to a program that needs more to take it: the supervisor does, as
    every worker costs it three. A soft limit equal to the hard one (`ulimit -n 64`) is
    the user's ceiling, kept; then `room` decides."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = RAISE_SOFT_TO if hard == resource.RLIM_INFINITY else min(hard, RAISE_SOFT_TO)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):  # a platform that refuses (macOS above OPEN_MAX)
            return None
        return soft, target
    return None


def no_room_message(space16: str, files: OpenFiles) -> str:
    """Why the worker of `space16` was not started, naming the limit."""
    return (f"no room to start the worker of space {space16}: the supervisor has {files.open} "
            f"files open of its limit of {files.limit} (ulimit -n), and keeps "
            f"{files.reserve} free for clients")


def no_room_yet_message(late: str, stopping: bool = True) -> str:
    """A TIMEOUT's message (`late` says which request ran out of time) for a request that
    waited for room to start its space's worker, while an idle worker was stopped to free
    open files (`stopping`), or while none could be stopped yet, one still starting or
    answering (kint/supervisor/room.py): the space had no worker, so naming one's state
    would mislead."""
    why = ("an idle worker is being stopped to free some" if stopping else
           "no worker was idle yet, one still starting or answering, to be stopped to "
           "free some once it is")
    return (f"{late}: it was waiting for room to start the space's worker (the supervisor "
            f"is short of open files, ulimit -n; {why})")


# The descriptors a worker's start needs free (measured under a lowered limit: it served
# with 12 free, SQLite could not open the store with 8, libzmq aborted it with 4).
WORKER_START_FDS = 12


WORKER_ROOM_HINT = ("raise the open-file limit the supervisor starts with (`ulimit -n` in "
                    "its shell, LimitNOFILE= in its systemd unit): its workers inherit it; "
                    "then run `kint supervisor stop`, and the command again")


SYSTEM_FILES_HINT = ("the system's table of open files is full, whatever each process's "
                     "limit: end the programs holding many files, or raise fs.file-max "
                     "(sysctl); then run the command again")


START_ROOM_HINT = ("start it with a higher open-file limit (`ulimit -n` in its shell, "
                   "LimitNOFILE= in its systemd unit)")


def out_of_files(err: BaseException) -> bool:
    """Whether `err` is the process (EMFILE) or the system (ENFILE) out of descriptors: an
    OSError, or ZeroMQ's error (not an OSError) with the same errno."""
    return getattr(err, "errno", None) in OUT_OF_FILES


def causes(err: BaseException) -> list[BaseException]:
    """`err`, and the errors it was raised from or while handling, each once."""
    seen: list[BaseException] = []
    cause: BaseException | None = err
    while cause is not None and all(cause is not s for s in seen):
        seen.append(cause)
        cause = cause.__cause__ or cause.__context__
    return seen


def ran_out_of_files(err: BaseException) -> bool:
    """Whether `err`, or an error it was raised from or while handling, is out of
    descriptors; or, for an error that carries no errno (SQLite's "unable to open database
    file"), whether this process is at its limit as it handles it."""
    if any(out_of_files(cause) for cause in causes(err)):
        return True
    files = open_files()
    return files is not None and files.open >= files.limit - 1


def system_out_of_files(err: BaseException) -> bool:
    """Whether `err`, or an error in its chain, is the system's table of open files full
    (ENFILE): no process limit (`ulimit -n`) mends that one."""
    return any(getattr(cause, "errno", None) == errno.ENFILE for cause in causes(err))


def out_of_files_message(what: str, err: BaseException | str,
                         system: bool = False) -> str:
    """`what` failed for want of open files, with this process's count and limit; with
    `system`, for the system's table of them full (ENFILE), which no limit of this
    process's explains."""
    if system:
        return f"{what} ran out of open files (the system's table of them is full): {err}"
    files = open_files()
    count = (f" ({files.open} open of its limit of {files.limit}, ulimit -n)"
             if files is not None else " (ulimit -n)")
    return f"{what} ran out of open files{count}: {err}"
