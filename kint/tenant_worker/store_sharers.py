"""kint workers of another KINT_HOME that have this worker's Sibyl store open.

Why: two KINT_HOMEs serving one store (a second home made for a test, a profile pointed at
another's store) run two watchers and two vaults over the same rows, each anchoring them
on its own, and nothing said so. This is a warning, never a refusal: the user may mean it
(a home being replaced), and a store is shared by design between the spaces of one home.

A worker keeps its read-only connection to the store between ops (kint/tenant_worker/
discard.py says so too), so another home's worker shows among the store's holders
(store_holders.py) once it has served an op. kint's workers name themselves
(kint.proc_name.WORKER); siblings, forked by this supervisor's forkserver, are this home's.
Another worker's home is read from the log file it holds open (supervisor.log, under its
KINT_HOME: kint.logs.setup_file_logging; an idle worker may still hold it as the rotated
supervisor.log.1, or deleted), else from KINT_HOME in its environment, resolved as the
log's folder is. A worker is kept with the home first read for it, and the log names it
once, whatever a later look reads (its log rotated or gone since, no KINT_HOME set).

Linux only (/proc); elsewhere (macOS) the look finds nobody, nothing is kept, and status
returns at its first line. It reads every process's name and the open files of kint's
workers only (store_holders.other_holders: another program's are never read), still a walk
of /proc, so it runs at a worker's start, at `kint doctor`, and on the worker's pool every
`LOOK_EVERY_S` its heartbeat starts (`LaterLooks`), never per request: a worker that
started before another home's would otherwise learn of it only at the next doctor. What the
last look found is kept (this worker serves one space), and `kint status` shows it, keeping
only the workers still running: one read of /proc/PID/stat per kept worker, no walk. A
worker is kept with its start time (that file's field 22, clock ticks after boot), not only
its pid and name: a pid freed by that worker and reused by another kint worker (another
space's, another home's) has a later start time, and is not taken for the one the look
found.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
from pathlib import Path
from typing import Any, NamedTuple

from kint.paths import log_path
from kint.proc_name import WORKER
from kint.proc_stat import read_stat
from kint.tenant_worker.store_holders import other_holders, same_parent

LOG_NAME = log_path(Path("/")).name
# The kint log as a worker may hold it: by its name, as the supervisor's rotation left it
# (kint.logs.rotate_if_large), and deleted under it (readlink then adds " (deleted)").
_HELD_LOG = re.compile(re.escape(LOG_NAME) + r"(\.1)?( \(deleted\))?")


class Sharer(NamedTuple):
    """Another home's kint worker holding the store: its pid, its KINT_HOME when it could
    be read (None: this user may not read it, or it names none), and its start time as
    /proc/PID/stat gives it, which tells that worker from a later process on its pid."""

    pid: int
    home: str | None
    started: str


# What the last look found, per (store, home): written by the look at a worker's start (on
# its pool), by the later ones and by doctor's, read by status on another thread.
_last_found: dict[tuple[str, str], list[Sharer]] = {}
_last_found_lock = threading.Lock()
# The workers of other homes the log has named, per (store, home), each by (pid, start
# time), and their homes: each worker and each home once in this worker's life, however
# often the looks find them again, and whatever home they read for a worker.
_told: dict[tuple[str, str], set[tuple[int, str] | str]] = {}
# The home first read for each other home's worker a look found: a later look that reads
# another or none (its log rotated away, no KINT_HOME in its environment) names it as before.
_first_home: dict[tuple[int, str], str | None] = {}

# How long after one look a running worker looks again: another home's worker that starts
# later is named in status and the log within this (a walk of /proc a minute, on the pool).
LOOK_EVERY_S = 60.0


@functools.lru_cache(maxsize=8)
def _home_key(home: str | Path) -> str:
    """The home as the last look is kept under: resolved once (a worker serves one home),
    as `realpath` costs a system call per folder of the path, which was a third of a plain
    status's CPU in the worker."""
    return os.path.realpath(home)


def other_homes_on_store(db: str, home: Path) -> list[Sharer]:
    """The kint workers of a KINT_HOME other than `home` with the store `db` open, kept
    as the last look for `still_sharing`."""
    found = _look(db, home)
    with _last_found_lock:
        found = _as_first_read(found)
        if found:
            _last_found[(db, _home_key(home))] = found
        else:  # kept empty on a box with no sharing: status then reads nothing at all
            _last_found.pop((db, _home_key(home)), None)
    return found


def _as_first_read(found: list[Sharer]) -> list[Sharer]:
    """`found`, each worker with the home first read for it (under `_last_found_lock`).
    Those kept of workers no longer running are let go."""
    now = {(s.pid, s.started) for s in found}
    for gone in [w for w in _first_home if w not in now and worker_start(w[0]) != w[1]]:
        del _first_home[gone]
        for told in _told.values():
            told.discard(gone)
    out = []
    for sharer in found:
        first = _first_home.get((sharer.pid, sharer.started))
        if first is None:
            first = _first_home[(sharer.pid, sharer.started)] = sharer.home
        out.append(sharer._replace(home=first))
    return out


def still_sharing(db: str, home: str | Path) -> dict[str, Any] | None:
    """The sharing the last look found, as `kint status` shows it (`message`, `hint`),
    keeping only the workers that still run: None when there is none. Never walks /proc.
    Asked at every status: the home as the worker's config holds it (a string; a Path
    built for the call cost more than the rest of this)."""
    if not _last_found:  # no sharing found: every status but a shared box's
        return None
    with _last_found_lock:
        found = _last_found.get((db, _home_key(home)), [])
    running = [s for s in found if worker_start(s.pid) == s.started]
    if not running:
        return None
    return {"message": sharing_message(db, running), "hint": SHARING_HINT}


def _look(db: str, home: Path) -> list[Sharer]:
    if not os.path.isdir("/proc/self/fd"):
        return []
    holders = other_holders(db, named=WORKER)  # no other process's open files read
    siblings = set(same_parent(holders))
    own = os.path.realpath(home)
    found = []
    for pid in holders:
        started = None if pid in siblings else worker_start(pid)
        if started is None:
            continue
        their_home = _home_of(pid)
        if their_home is not None and os.path.realpath(their_home) == own:
            continue  # this home's worker left by an earlier supervisor, not another home
        found.append(Sharer(pid, their_home, started))
    return found


def sharing_message(db: str, sharers: list[Sharer]) -> str:
    """One line naming the other homes (or their workers' pids where a home is unread)."""
    homes = sorted({s.home for s in sharers if s.home is not None})
    unread = [str(s.pid) for s in sharers if s.home is None]
    named = ", ".join(homes + ([f"unread for worker pid {', '.join(unread)}"]
                               if unread else []))
    return (f"the Sibyl store {db} is also served by kint of another KINT_HOME ({named}): "
            f"two homes anchor and watch the same rows, each with its own vault")


SHARING_HINT = ("serve each store from one KINT_HOME: run `kint supervisor stop` under the "
                "home that should not serve it, or point that home's profile at a store of "
                "its own")


def worker_start(pid: int) -> str | None:
    """The start time of `pid` when it is a kint worker (named kint.proc_name.WORKER), else
    None (gone, unreadable, another program)."""
    return process_start(pid, WORKER)


def process_start(pid: int, name: str | None = None) -> str | None:
    """The start time of `pid` (clock ticks after boot), None when it is gone, unreadable
    or, with `name`, named otherwise: field 22 of /proc/PID/stat (kint.proc_stat), its
    name and start read in one look."""
    stat = read_stat(pid)
    if stat is None or (name is not None and stat.name != name):
        return None
    return str(stat.start_ticks)


def _home_of(pid: int) -> str | None:
    """The folder of the kint log `pid` holds open (as the kernel names it: resolved),
    else KINT_HOME from its environment, resolved."""
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return None
    for fd in fds:
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if _HELD_LOG.fullmatch(os.path.basename(target)):
            return os.path.dirname(target)
    return _home_in_environ(pid)


def _home_in_environ(pid: int) -> str | None:
    """KINT_HOME in `pid`'s environment as kint reads it (kint.paths.kint_home: a blank one
    unset, a leading `~` its HOME), resolved; None when unset, unreadable or relative."""
    from kint.settings.environ import environ_value

    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            entries = fh.read().split(b"\0")
    except OSError:
        return None
    environ = {}
    for entry in entries:
        name, sep, value = entry.partition(b"=")
        if sep and name in (b"KINT_HOME", b"HOME"):
            environ[name.decode()] = value.decode("utf-8", "replace")
    home = environ_value("KINT_HOME", environ)
    if home is None:
        return None
    their_home = environ_value("HOME", environ)
    if their_home is not None and (home == "~" or home.startswith("~/")):
        home = their_home + home[1:]
    home = os.path.expanduser(home)
    return os.path.realpath(home) if os.path.isabs(home) else None


def look_and_warn(db: str, home: Path, space16: str) -> None:
    """At a worker's start, on its pool, and at each later look (`LaterLooks`): the log's
    warning line when another home's worker holds the store, naming only the workers the
    log has not named yet, and of those only the ones of a home it has not named (another
    home's worker started again after its idle exit is not news; a worker that starts first
    says it at a later look; `kint doctor` looks again whenever asked)."""
    sharers = other_homes_on_store(db, home)
    if not sharers:
        return
    key = (db, _home_key(home))
    with _last_found_lock:
        told = _told.setdefault(key, set())
        new = [s for s in sharers if (s.pid, s.started) not in told and s.home not in told]
        told.update((s.pid, s.started) for s in sharers)
        told.update(s.home for s in sharers if s.home is not None)
    if new:
        logging.getLogger("kint.worker").warning("space %s: %s (%s)", space16,
                                                 sharing_message(db, new), SHARING_HINT)


class LaterLooks:
    """A running worker's looks, its start's and the later ones, each on its pool and at
    most one at a time: its heartbeat asks `due` at every beat (one comparison, on the main
    thread) and starts `look` when it says so. Status never waits on one: it reads what the
    last found."""

    def __init__(self, db: str, home: Path, space16: str, now: float) -> None:
        self._args = (db, home, space16)
        self._next = now + LOOK_EVERY_S
        # The start's look is the first (the worker submits `look` once it serves): until
        # it ends, no beat starts another.
        self._running = True

    def due(self, now: float) -> bool:
        """Whether to start a look now; if so, the next is due `LOOK_EVERY_S` on."""
        if self._running or now < self._next:
            return False
        self._running = True
        self._next = now + LOOK_EVERY_S
        return True

    def look(self) -> None:
        """One look, and the log's line for each other home it finds first."""
        try:
            look_and_warn(*self._args)
        finally:
            self._running = False
