"""The supervisor's front socket closed to new clients, for want of open files or as it
stops: the note it leaves beside the socket, and the refusal a client gives on reading it.

Every client connection costs the supervisor one descriptor, and libzmq aborts the whole
process (`Too many open files (src/ipc_listener.cpp:297)`, SIGABRT, every worker gone) when
accept() on an IPC socket fails with EMFILE. It cannot be told to stop accepting without
dropping the clients it has (an unbind ends every connection made through the endpoint).
So, short of open files, the supervisor moves its socket file aside (`CLOSED_SOCKET`, the
same listening socket: the clients connected through it keep being served) and writes
this note; a new client's connect then finds no file, never reaching the supervisor, and
the client reads the note to say why instead of waiting out its deadline
(kint/supervisor/front_door.py moves them; kint.client and `kint supervisor status` read).

A stopping supervisor closes it the same way as its stop begins (`stopping` in the note):
its stop takes up to STOP_BOUND_S (kint.supervisor.settings) with its workers while it runs,
its socket monitor is off by then (libzmq can hang ending a context whose socket has one,
zeromq/libzmq#3575), and a crowd of new clients could still take its last descriptors
unwatched. A new client is told it stops.

Imported by the clients: nothing here imports ZeroMQ or the engine.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import NamedTuple

from kint.paths import is_private_dir, read_small_file
from kint.socket_paths import FRONT_SOCKET

# The front socket's file while the door is closed, in the same folder.
CLOSED_SOCKET = FRONT_SOCKET + ".closed"
# The note: {"pid": ..., "open": ..., "limit": ..., "clients": ..., "since": unix time,
# "started": unix time, "stopping": bool, "since_boot": ..., "started_boot": ... (boot_time)}.
NOTE = "front-closed.json"
# More than a note ever holds (about 100 bytes): what is read of one, at most.
NOTE_MAX_BYTES = 4096

CLOSED_HINT = ("end kint processes no longer in use (agent sessions, kint-server, hermes); "
               "the supervisor takes new clients again as soon as some close. Or raise the "
               "open-file limit it starts with (`ulimit -n` in its shell, LimitNOFILE= in its "
               "systemd unit) and run `kint supervisor stop`")
# The hint of a request a stopping supervisor refuses (a client let in before its stop, or
# one its door turned away): nothing is left running, the next call starts a new one.
STOPPING_HINT = "run it again once the supervisor has stopped: the next call starts a new one"


def boot_time() -> float:
    """Seconds since the machine booted, on a clock nobody steps (Linux's CLOCK_BOOTTIME,
    the same in every process of the box); 0.0 where there is none. A note's times are
    compared with a client's: on the wall clock (time.time()), a step back between the
    two (NTP, a VM resumed) made a connection the supervisor had served look older than
    the supervisor, and a served kint-server was refused BUSY."""
    clock = getattr(time, "CLOCK_BOOTTIME", None)
    if clock is None:
        return 0.0
    try:
        return time.clock_gettime(clock)
    except OSError:
        return 0.0


class Moment(NamedTuple):
    """A client's moment (its connect, an answer): on the wall clock and on `boot_time`."""

    wall: float
    boot: float


def moment() -> Moment:
    return Moment(time.time(), boot_time())


class FrontClosed(NamedTuple):
    """What the note says: the supervisor `pid` closed its socket to new clients with
    `open` descriptors of its limit of `limit` in use, `clients` of them its clients'
    connections, at unix time `since`. It took its home (the pid lock) at unix time
    `started`: what names this supervisor among every one with its pid (in a container,
    the next one often has the same), to a client that knows when it connected (a
    connection older than `started` was made to another). 0 in a note of a kint before
    session 27, which named it by pid alone. `stopping`: closed as its stop began, not for
    want of open files. `since_boot` and `started_boot`: the same two on `boot_time`, 0.0
    in a note of a kint before session 28 or from a box without that clock: then the wall
    clock's are compared, as before."""

    pid: int
    open: int
    limit: int
    clients: int
    since: float
    started: float = 0.0
    stopping: bool = False
    since_boot: float = 0.0
    started_boot: float = 0.0

    def _on_boot(self, at: Moment) -> bool:
        return self.started_boot > 0 and self.since_boot > 0 and at.boot > 0

    def started_by(self, at: Moment) -> bool:
        """Whether this supervisor had taken its home by the client's moment `at`."""
        if self._on_boot(at):
            return self.started_boot <= at.boot
        return self.started <= at.wall

    def closed_after(self, at: Moment, slack: float) -> bool:
        """Whether the door closed more than `slack` seconds after the moment `at`."""
        if self._on_boot(at):
            return at.boot < self.since_boot - slack
        return at.wall < self.since - slack

    def message(self) -> str:
        if self.stopping:
            return f"the supervisor (pid {self.pid}) is stopping: it takes no new clients"
        return (f"the supervisor (pid {self.pid}) takes no new clients: {self.open} of its "
                f"{self.limit} open files (ulimit -n) are in use, {self.clients} by the "
                f"clients connected")

    @property
    def code(self) -> str:
        """The refusal's code: BUSY, short of open files (it serves again as clients
        leave); SUPERVISOR_UNAVAILABLE, stopping (it does not)."""
        return "SUPERVISOR_UNAVAILABLE" if self.stopping else "BUSY"

    @property
    def hint(self) -> str:
        return STOPPING_HINT if self.stopping else CLOSED_HINT

    def refusal(self) -> "Refusal":
        """What every client says of this closed door (a new command's, `kint supervisor
        status`, a client waiting on its request, a start's wait): the note's code, words
        and hint, unless the supervisor is stopped (SIGSTOP, a debugger). Stopped, it
        neither ends its stop nor takes new clients on its own, and "run it again once
        the supervisor has stopped" would be waited on forever: it is named stopped, with
        how to resume it or end it (`stopped_hint`). One place, so no door says otherwise."""
        stopped = stopped_note(self.pid)
        if not stopped:
            return Refusal(self.code, self.message(), self.hint)
        return Refusal(self.code, self.message() + stopped, stopped_hint(self.pid))


class Refusal(NamedTuple):
    """A refusal's code, its one-line message and its hint."""

    code: str
    message: str
    hint: str


def stopped_note(pid: int) -> str:
    """' (it is stopped: `kill -CONT PID` resumes it)' when /proc says the process `pid` is
    stopped (SIGSTOP, Ctrl-Z, a debugger), else ''. Imported here, not at the top, for the
    reason `process_began` gives: only a client that found a supervisor silent asks."""
    from kint.proc_stat import process_stopped

    return f" (it is stopped: `kill -CONT {pid}` resumes it)" if process_stopped(pid) else ""


def stopped_hint(pid: int) -> str:
    """The way out of a supervisor `pid` that is stopped: continued, or killed outright.
    Never a plain `kill PID`: its SIGTERM pends until the process is continued, so it
    would end nothing."""
    return f"`kill -CONT {pid}` resumes it; {kill_hint(pid)}"


def kill_hint(pid: int) -> str:
    """The way to end the supervisor `pid` outright, in the one set of words every hint
    gives it: one stopped (`stopped_hint`), or one stopping whose stop has not ended, on
    which a plain `kill` only asks again (kint.supervisor.autostart, `kint supervisor
    stop`)."""
    return (f"`kill -KILL {pid}` ends it now (its workers with it), and the next command "
            f"starts a new one")


def write_note(folder: Path, closed: FrontClosed) -> None:
    """Leave the note in the socket folder (0600 by the daemon's umask), whole or not at
    all: written aside and renamed."""
    tmp = folder / (NOTE + ".tmp")
    tmp.write_text(json.dumps(closed._asdict()))
    os.replace(tmp, folder / NOTE)


def remove_note(folder: Path) -> None:
    (folder / NOTE).unlink(missing_ok=True)


def remove_own_note(folder: Path, pid: int, started: float) -> None:
    """Remove the note only while it is the one the supervisor `pid`, which took its home
    at `started`, wrote: a supervisor that lost its home (`run/` removed under it) must
    not remove the note of the one that serves it now."""
    closed = _parse_note(folder)
    if closed is not None and closed.pid == pid and closed.started == started:
        remove_note(folder)


def clear_left_behind(folder: Path) -> None:
    """Remove the note and the moved socket a killed supervisor left in its socket
    `folder`: by the next one, as soon as it holds the home's pid lock, before any client
    reads them. In a container the next supervisor often has the same pid: its clients
    would be told BUSY by the dead one's note until its socket was bound. Only in a
    private folder: anywhere else the files are not kint's to remove."""
    if is_private_dir(folder):
        (folder / CLOSED_SOCKET).unlink(missing_ok=True)
        remove_note(folder)


def read_note(folder: Path, pid: int | None) -> FrontClosed | None:
    """The note in `folder` when the supervisor `pid` (the one holding the home now) left
    it and its socket is closed now; None otherwise (no note, another supervisor's, the
    socket open again, or a note that cannot be read)."""
    if (pid is None or pid <= 0 or not is_private_dir(folder)
            or os.path.exists(folder / FRONT_SOCKET)):
        return None
    closed = _parse_note(folder)
    return closed if closed is not None and closed.pid == pid else None


def read_stepped_down_note(folder: Path) -> FrontClosed | None:
    """The note in `folder` of a supervisor that stops with no pid file naming it (its pid
    file removed: it stepped down, and closed its door for its stop on its own socket):
    its socket moved aside, the note saying it stops, its process still there (not a later
    one given its pid: `process_began`); None otherwise. Read only where no pid file is
    there to name a supervisor."""
    if not is_private_dir(folder) or os.path.exists(folder / FRONT_SOCKET):
        return None
    closed = _parse_note(folder)
    if closed is None or not closed.stopping or not (folder / CLOSED_SOCKET).exists():
        return None
    try:
        os.kill(closed.pid, 0)
    except ProcessLookupError:
        return None  # killed mid-stop: its leftovers, cleared by the next one to start
    except OSError:
        pass  # another user's process: there all the same
    began = process_began(closed.pid)
    if began is not None and closed.started_boot > 0 and began > closed.started_boot:
        # Killed mid-stop, its pid since given to a process started after it took its
        # home: a leftover too, not a supervisor stopping.
        return None
    return closed


def process_began(pid: int, *, live: bool = False) -> float | None:
    """When the process `pid` began, on `boot_time`'s clock (/proc/PID/stat's start time, in
    clock ticks since boot, which CLOCK_BOOTTIME also counts), or None where /proc does not
    say; with `live`, None too for one that exited and is not reaped yet (a zombie, which
    answers nothing: kint.client_liveness.began_by). A supervisor took its home after its
    process began, so a process on its pid that began after the `started_boot` its note
    gives is another: the pid reused. Ticks are floored, so the supervisor's own never reads
    later than its note. A name the kernel cut mid-character reads all the same
    (kint.proc_stat): it made this None, and the note was believed again. Imported here, not
    at the top: every client loads this module, and only one that found a stepped-down note,
    or looks at the supervisor holding its request, asks (the plain status loads no module
    it does not use, tests/test_cli.py)."""
    from kint.proc_stat import read_stat, seconds_after_boot

    stat = read_stat(pid)
    if stat is None or (live and stat.state in ("Z", "X")):
        return None
    return seconds_after_boot(stat.start_ticks)


def _parse_note(folder: Path) -> FrontClosed | None:
    """The note in `folder` as it is, or None (none, or one that cannot be read)."""
    try:
        # The folder is private, but a client reads whatever is put there.
        data = json.loads(read_small_file(folder / NOTE, NOTE_MAX_BYTES))
        return FrontClosed(int(data["pid"]), int(data["open"]), int(data["limit"]),
                           int(data["clients"]), float(data["since"]),
                           float(data.get("started", 0.0)), data.get("stopping") is True,
                           float(data.get("since_boot", 0.0)),
                           float(data.get("started_boot", 0.0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None
