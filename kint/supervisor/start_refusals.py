"""The refusals of a client that finds no supervisor answering although one holds
KINT_HOME: stopped (SIGSTOP), stuck, or stopping and not ending its stop, each with what to
do. A start's wait (`autostart`) gives them, and so do the commands that start nothing
(`kint supervisor status`, `stop`, `doctor`) and a client whose call is held: kept apart
so that those load only the words, never what starting a supervisor needs.
"""

from __future__ import annotations

import signal
from pathlib import Path

from kint.client_errors import SERVED_ENDED_HINT, STOPPED_STARTING_HINT
from kint.front_closed import FrontClosed, kill_hint, read_note, stopped_hint, stopped_note
from kint.paths import log_path, run_dir
from kint.seconds_text import seconds_text
from kint.socket_paths import front_address, socket_dir
from kint.supervisor.pidlock import PID_FILE, SERVING, STOPPED, holder, let_go_by


class SupervisorNotReachable(TimeoutError):
    """No supervisor answers, and waiting longer would not help. Carries what to do."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def stop_noted(home: Path, pid: int) -> FrontClosed | None:
    """The note of the supervisor `pid`, which holds `home` and does not answer, when it is
    stopping: its door closed as its stop began (kint/front_closed.py). Read at the looks
    while it is silent, until it is seen stopping: a stat where its socket file is there
    (one that is merely slow), the note's few bytes where it is not."""
    closed = read_note(socket_dir(home), pid)
    return closed if closed is not None and closed.stopping else None


def stop_not_ended(home: Path, pid: int, seen_s: float) -> SupervisorNotReachable:
    """The refusal of a wait that ran out on the supervisor `pid`, seen stopping and not
    stopped (SIGSTOP: `silent_supervisor`'s) for `seen_s`, past STOP_BOUND_S, the most a
    stop takes. Not "run it again once it has stopped", which would wait on a stop that
    may never end, nor `kill PID`: it is stopping already, and a SIGTERM changes nothing.
    The span said is the one it was seen stopping, not the whole wait: one silent for
    another reason first may have begun its stop late."""
    return SupervisorNotReachable(
        f"the supervisor (pid {pid}) is stopping and has not stopped within "
        f"{seconds_text(seen_s)}: it takes no new clients",
        f"see {log_path(home)} for what its stop waits on; {kill_hint(pid)}")


def silent_supervisor(home: Path, pid: int) -> SupervisorNotReachable:
    """The refusal of a call to `home`'s supervisor `pid`, which holds the pid lock and
    says it serves, but does not answer: stopped (SIGSTOP, a debugger) or stuck. Never
    "no supervisor is running", which would send the user to start one beside it. One that
    closed its socket to new clients for want of open files, or as it stops, says so
    (kint/front_closed.py), and, stopped as well, how to resume it. A `pid` that is none
    (its pid file's first word is no pid: -1) is never named, nor put in a kill: `kill -1`
    in a shell signals every process of the user (`silent_unnamed`)."""
    if pid <= 0:
        return silent_unnamed(home)
    closed = read_note(socket_dir(home), pid)
    if closed is not None:  # stopped too: said so, and how to resume it (its `refusal`)
        return note_refused(closed)
    # Stopped, its SIGTERM would pend until it is continued: `kill -CONT`, or `-KILL`.
    stopped = stopped_note(pid)
    hint = stopped_hint(pid) if stopped else (
        f"see {log_path(home)}; `kill {pid}` lets the next command start a new one")
    return SupervisorNotReachable(
        f"the supervisor (pid {pid}) runs but does not answer on {front_address(home)}"
        f"{stopped}", hint)


def silent_unnamed(home: Path) -> SupervisorNotReachable:
    """`silent_supervisor`'s refusal where the pid file of the one that holds `home` names
    no pid (garbled): it said `the supervisor (pid -1)`, its hint `kill -1`. The holder is
    found by its open pid file instead, as a worker lock held by a process nobody can name
    is (tenant_worker.worker_lock.unnamed_holder_hint)."""
    pid_file = run_dir(home) / PID_FILE
    return SupervisorNotReachable(
        f"a supervisor runs but does not answer on {front_address(home)}, and its pid file "
        f"names no pid", f"see {log_path(home)}; find it with `lsof {pid_file}` (or `fuser "
        f"{pid_file}`) and end it, and the next command starts a new one")


def note_refused(closed: FrontClosed) -> SupervisorNotReachable:
    """The refusal of a supervisor whose closed door's note says why (FrontClosed.refusal):
    a silent one's (`silent_supervisor`), and a stopping one's the start waited for."""
    said = closed.refusal()
    return SupervisorNotReachable(said.message, said.hint)


def unanswering_supervisor(home: Path) -> SupervisorNotReachable | None:
    """For a caller whose ping went unanswered: the refusal `silent_supervisor` gives when
    a supervisor holds `home`'s pid lock and serves, else None (none runs, or one is still
    starting)."""
    found = holder(home)
    if found is None or not found.serving:
        return None
    return silent_supervisor(home, found.pid)


def start_ended(home: Path, started: int, code: int) -> SupervisorNotReachable | None:
    """For a start whose supervisor `started` exited (`code`) while the pid lock was let
    go, before any answered: the refusal when the one that held the lock let go of it
    without dying in its start, else None (the exit code and the last words say it, or the
    one that died starting is started again in its place). Stopped by a signal as it
    started (a service manager's stop, a Ctrl-C; its pid file says `stopped`), or ended
    once it served (its file says `serving`: a `kint supervisor stop` ends only a
    supervisor that answers): none is started in its place here, which would undo that
    stop, and running the command again starts one.

    That one is `started` itself when it took the lock, then was stopped in its start, or
    served and was stopped (a SIGTERM, another terminal's `kint supervisor stop`) before
    this start's next look got its answer: said of the one started here (review37e M1 and
    S2), where it was called the one it gave way to, or said `exited with code -2 before it
    answered` with its stderr line. Else `started` lost the lock to it (code 0): never "a
    supervisor is already running" (the loser's last words), which it said while none ran,
    nor "exited with code 0 before it answered", as it said of the one that served. Named
    by its pid where its file's first word is one."""
    gone = let_go_by(home)
    if gone is None or gone.said not in (STOPPED, SERVING):
        return None
    if gone.pid == started:
        own = f"no supervisor runs for {home}: the one started here (pid {started})"
        if gone.said == STOPPED:
            return SupervisorNotReachable(
                f"{own} was stopped by {_signal_named(code)} as it started",
                STOPPED_STARTING_HINT)
        if code != 0:  # served, then failed: its code and last words say more
            return None
        return SupervisorNotReachable(f"{own} served and has ended since", SERVED_ENDED_HINT)
    if code != 0:  # it failed by itself, not by giving way
        return None
    first = f"no supervisor runs for {home}: the one that took it first" + (
        f" (pid {gone.pid})" if gone.pid is not None else "")
    if gone.said == STOPPED:
        return SupervisorNotReachable(
            f"{first} was stopped by a signal as it started, and the one started here gave "
            "way to it", STOPPED_STARTING_HINT)
    return SupervisorNotReachable(
        f"{first} served and has ended since, and the one started here gave way to it",
        SERVED_ENDED_HINT)


def _signal_named(code: int) -> str:
    """The signal an exit `code` says ended a process: -N (killed by it), or 128 + N (a
    supervisor as PID 1 of a pid namespace, start_signals); `a signal` when neither."""
    number = -code if code < 0 else code - 128
    try:
        return signal.Signals(number).name
    except ValueError:
        return "a signal"
