"""`kint supervisor stop`: what the command does, apart from its click declaration
(kint.commands.supervisor), which keeps its help.

A stop is a few steps, each of which may find another stop's doing: look who holds the
home; ping it (a stopped or stuck one is said so at once); ask it `sup.stop`, naming it,
unless it is stopping meanwhile (its door closed, or gone); then wait for its process to
let go of the home, naming a successor that took it since (kint.commands.stop_wait).
Another stop (a second `kint supervisor stop`, a signal) may begin between any two: its
door turns this one away, or the supervisor exits first; it stops all the same, and this
one waits for it as for its own.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import click

from kint.client import Client, KintError, SupervisorUnavailable
from kint.commands.common import Ctx, echo_json, fail, refuse
from kint.commands.stop_wait import (EXITING_GRACE_S, exits_within, gone_or_replaced,
                                     read_past_unwritten, same_supervisor, wait_gone)
from kint.front_closed import kill_hint, stopped_hint
from kint.paths import kint_home, log_path, run_dir
from kint.proc_stat import process_stopped
from kint.protocol import ErrorCode
from kint.seconds_text import seconds_text

# How long `stop` waits, once the supervisor answered, for its process to be gone.
STOP_EXIT_WAIT_S = 10.0
# How long `stop` waits for the supervisor to answer `sup.stop` (its workers stopped).
STOP_CALL_S = 60.0
# How long a pid file that does not read is read again before it is taken for one that
# never will (corrupt) rather than a new holder's not written yet (written within moments).
PID_WRITE_GRACE_S = 3.0


def run(obj: Ctx, as_json: bool) -> None:
    """Stop the supervisor of KINT_HOME and say so (or that none runs)."""
    from kint.supervisor.pidlock import running_pid

    home = kint_home()
    client = obj.client(autostart=False)
    pid = running_pid(home)
    if pid is None and not client.ping(0.5):
        _say_none(home, as_json)
        return
    wait_s, successor, asked, stopping = _ask(obj, client, home, pid)
    pid = successor if successor is not None else wait_gone(home, stopping, wait_s)
    started = pid if pid is not None and (successor is not None
                                          or not same_supervisor(pid, stopping)) else None
    if pid is not None and started is None:
        _refuse_not_gone(obj, home, pid, wait_s, asked)
    if as_json:
        echo_json({"stopped": True, "pid": stopping, "kint_home": str(home),
                   "kint_home_exists": home.is_dir(), "started_since": started})
        return
    click.echo("supervisor stopped")
    if started is not None:
        named = f" (pid {started})" if started > 0 else ""
        click.echo(f"another supervisor{named} has started since: a kint-server or a "
                   f"command started one; `kint supervisor stop` again stops it")


def _say_none(home: Path, as_json: bool) -> None:
    """No supervisor runs. One whose home was removed under it cannot be reached here: it
    notices its pid lock gone and stops by itself, with its workers, within a second or
    two."""
    if as_json:
        echo_json({"stopped": False, "pid": None, "kint_home": str(home),
                   "kint_home_exists": home.is_dir(), "started_since": None})
        return
    gone = "" if home.is_dir() else f" ({home} does not exist)"
    click.echo(f"no supervisor is running for {home}{gone}")


def _ask(obj: Ctx, client: Client, home: Path,
         pid: int | None) -> tuple[float, int | None, str, int | None]:
    """Ask the supervisor `pid` to stop (by SIGTERM where its door is closed for want of
    open files), or find another stop's doing; how long its exit is then waited for, the
    pid of a successor found meanwhile (then nothing is waited for), how it was asked
    (for a refusal that says so, `_refuse_not_gone`), and the pid of the supervisor the
    stop meant (`pid`, or where the pid file named none, the one its ping found)."""
    from kint.supervisor import autostart

    # Asked by SIGTERM, the supervisor gets the whole time `sup.stop` would: the answer's
    # wait (its workers stopped first) and the exit's.
    if pid is not None and pid > 0 and _stopped_by_signal(home, pid):
        return STOP_CALL_S + STOP_EXIT_WAIT_S, None, SENT_SIGTERM, pid
    # Another stop may begin between the look above and the ping or the call: its door
    # turns this one away, or it exits first.
    answer = client.ping_answer(autostart.UNREACHABLE_AFTER_S)
    return _asked(obj, client, home, _meant(pid, answer), answer)


def _meant(pid: int | None, answer: dict[str, Any] | None) -> int | None:
    """The pid of the supervisor a stop means: the pid file's (`pid`), or where it named
    none (not written yet, -1, or none held the home at the first look) the one whose
    ping answered. Unnamed, the stop went to whichever supervisor read it: one started
    after the one that answered exited (another stop's doing) was stopped, unasked."""
    named = (answer or {}).get("pid")
    if (pid is None or pid <= 0) and isinstance(named, int) and named > 0:
        return named
    return pid


def _asked(obj: Ctx, client: Client, home: Path, pid: int | None,
           answer: dict[str, Any] | None) -> tuple[float, int | None, str, int | None]:
    """`_ask`'s part once the supervisor `pid` was pinged (`answer`, None: no answer),
    with the pid the stop then meant."""
    from kint.supervisor.pidlock import running_pid

    answered = answer is not None
    meanwhile = not answered and (_stopping_meanwhile(home, pid)
                                  or exits_within(home, pid, EXITING_GRACE_S))
    if not answered and not meanwhile and (pid is None or pid <= 0):
        # Named by neither the pid file's first look nor a ping: one just started
        # writes its pid within moments, and is named by it rather than the stop
        # going to whichever supervisor reads it. Nobody holding the home by then, the
        # one there exited meanwhile (another stop, a crash): stopped, nothing to ask.
        pid = read_past_unwritten(home, running_pid(home), PID_WRITE_GRACE_S)
        meanwhile = pid is None
    if not answered and not meanwhile:
        # Stopped (SIGSTOP) or stuck, it would not answer the stop either: said now,
        # not after the stop's whole minute as "no answer".
        refuse_if_silent(obj)
        if pid is None or pid <= 0:
            _refuse_unnamed(obj, home)
    wait_s, successor, asked = _stop_or_meanwhile(obj, client, home, pid, answer, meanwhile)
    return wait_s, successor, asked, pid


def _refuse_unnamed(obj: Ctx, home: Path) -> None:
    """Refuse (exit 2) a stop that found no supervisor to name: none answered its ping and
    the pid file, still held, named none after PID_WRITE_GRACE_S (corrupt).
    A `sup.stop` naming none stops whichever supervisor reads it: one started meanwhile
    (a kint-server's call, a command's autostart) as well as the one meant."""
    from kint.supervisor.pidlock import PID_FILE

    fail(SupervisorUnavailable(
        f"no supervisor answered and {run_dir(home) / PID_FILE} names none (not after "
        f"{seconds_text(PID_WRITE_GRACE_S)}); nothing was asked to stop, as a stop naming "
        f"none would stop whichever supervisor read it",
        f"`kint supervisor status` says whether one runs; see {log_path(home)}; run "
        f"`kint supervisor stop` again once that file names it"), obj.debug)


def _stop_or_meanwhile(obj: Ctx, client: Client, home: Path, pid: int | None,
                       answer: dict[str, Any] | None,
                       meanwhile: bool) -> tuple[float, int | None, str]:
    """Send the stop to the supervisor `pid` unless it stops `meanwhile` (another stop's
    doing), or find that it did: how long its exit is then waited for, the pid of a
    successor found meanwhile, how it was asked."""
    try:
        if not meanwhile:
            _ask_stop(client, pid, answer)
    except FirstAskedGone as gone:
        # Another stop ended it: the one holding the home since is a successor, whatever
        # its pid (the same, in a container), named once its pid file reads.
        return 0.0, _successor_named(home, gone.successor), ANOTHER_STOP
    except StoppingMeanwhile:
        meanwhile = True
    except KintError as err:
        # Another stop's doing only when this one's sup.stop never went out (its door
        # turned it away) or the supervisor is gone or replaced: its own call's
        # failure (no answer in a minute, a supervisor stopped mid-stop) is said as
        # before, not followed by SIGTERM and a wait of 70 s more.
        meanwhile = gone_or_replaced(home, pid) or (
            "(sup.stop was not sent)" in err.message and _stopping_meanwhile(home, pid))
        if not meanwhile:
            fail(err, obj.debug)
    if meanwhile:
        return STOP_CALL_S + STOP_EXIT_WAIT_S, None, ANOTHER_STOP
    return STOP_EXIT_WAIT_S, None, ASKED


def _successor_named(home: Path, successor: int | None) -> int | None:
    """The pid of the supervisor that took the home after the one a stop asked (None:
    nobody holds it now, and the stop's wait looks for one). One that has just taken the
    lock may not have written its pid yet (-1): read again for up to STOP_EXIT_WAIT_S,
    then -1 still (a successor all the same, its pid unsaid), never the first one's wait."""
    return read_past_unwritten(home, successor, STOP_EXIT_WAIT_S)


def _refuse_not_gone(obj: Ctx, home: Path, pid: int, wait_s: float, asked: str) -> None:
    """The supervisor asked to stop (as `asked` says) still holds the home after `wait_s`:
    refused, saying why where it is stopped (SIGSTOP), which acts on no SIGTERM until
    continued (said once it has been for UNREACHABLE_AFTER_S, not after the whole wait as
    TIMEOUT). Running, it is stopping already (asked, or sent SIGTERM): another SIGTERM only
    sets what its stop has set, so the hint is `kill -KILL`, never a plain kill."""
    if process_stopped(pid):
        fail(SupervisorUnavailable(
            f"the supervisor (pid {pid}) is stopped (SIGSTOP, a debugger) and has not "
            f"exited; it was asked to stop and does once it runs again",
            stopped_hint(pid)),
            obj.debug)
    refuse(ErrorCode.TIMEOUT.value, f"the supervisor (pid {pid}) {asked} has not exited "
           f"{seconds_text(wait_s)} later",
           f"see {log_path(home)}; it is stopping already, which a plain `kill` only asks "
           f"again: {kill_hint(pid)}")


def _stopped_by_signal(home: Path, pid: int) -> bool:
    """Whether the supervisor `pid` closed its socket to new clients for want of open
    files (kint/front_closed.py), and was asked to stop by SIGTERM instead: no new
    connection reaches it, and the stop is what its refusal tells a user to do. It stops
    on SIGTERM as on `sup.stop`, its workers first."""
    import signal

    from kint.front_closed import read_note
    from kint.socket_paths import socket_dir

    if read_note(socket_dir(home), pid) is None:
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # gone meanwhile: the wait below finds it so
    return True


# How the supervisor was asked to stop, as a refusal that it has not exited says it.
SENT_SIGTERM = "was sent SIGTERM and"
ANOTHER_STOP = "was being stopped by another stop and"
ASKED = "stopped its workers but"


class StoppingMeanwhile(Exception):
    """The supervisor a stop first asked is stopping by another stop's doing (its door
    closed, or its exit under way): the stop's wait is all that is left to do."""


class FirstAskedGone(Exception):
    """The supervisor a stop first asked no longer holds the home: another stop ended it
    between its refusal and the stop's asking again. `successor`: the pid of the one
    holding the home now (None: nobody)."""

    def __init__(self, successor: int | None) -> None:
        super().__init__(successor)
        self.successor = successor


def _naming(pid: int | None, answer: dict[str, Any] | None) -> dict[str, Any] | None:
    """The arguments that name the supervisor `pid` to its `sup.stop`: its pid, and when it
    took its home as its ping (`answer`) said it, where it said it (a supervisor of a kint
    before session 28 does not: its pid alone names it)."""
    if pid is None or pid <= 0:
        return None
    args: dict[str, Any] = {"pid": pid}
    if _pinged(answer, pid):
        args.update({name: answer[name] for name in ("started", "started_boot")
                     if isinstance(answer.get(name), (int, float))})
    return args


def _ask_stop(client: Client, pid: int | None, answer: dict[str, Any] | None = None) -> None:
    """Send `sup.stop` naming the supervisor `pid` it is meant for, and when it took its
    home as its ping said (`answer`): another refuses it (one started since, were it
    delivered late), one with the same pid too (either, the ping answered by `pid`:
    FirstAskedGone, the one pinged is gone).
    A supervisor older than the `pid` argument refuses the argument itself: asked again
    without it, only while it is still the one that refused (`_still_first_asked`; else
    FirstAskedGone, or StoppingMeanwhile)."""
    from kint.supervisor.pidlock import running_pid

    args = _naming(pid, answer)
    try:
        client.call("sup.stop", args=args, timeout_s=STOP_CALL_S)
    except KintError as err:
        if (pid is not None and args is not None and err.code == "BAD_REQUEST"
                and _pinged(answer, pid) and _refused_as_meant_for(err.message, pid)):
            # Read by another supervisor, its pid the same as the one pinged (another
            # start) or not: the one pinged exited since (another stop's doing) and a
            # successor took the home, whoever holds it now. Only when the ping was
            # answered by `pid` itself: one answered by another (a stepped-down one whose
            # socket file is still there) says nothing of `pid`, which may hold the home
            # unasked, and the refusal ends the stop (exit 2).
            raise FirstAskedGone(running_pid(client.home)) from None
        if (pid is None or args is None or err.code != "BAD_REQUEST"
                or "unknown argument 'pid'" not in err.message):
            raise
        _still_first_asked(client, pid, time.monotonic())
        client.call("sup.stop", timeout_s=STOP_CALL_S)


def _pinged(answer: dict[str, Any] | None, pid: int) -> bool:
    """Whether the stop's ping (`answer`) was answered by the supervisor `pid` it names."""
    return answer is not None and answer.get("pid") == pid


def _refused_as_meant_for(message: str, pid: int) -> bool:
    """Whether `message` is a supervisor's refusal of a stop naming `pid`, as meant for
    another (kint/supervisor/commands.py: `... pid P; this one (pid Q) keeps running`, or
    `... pid P that started ...; this one, ... with the same pid, keeps running`)."""
    named = f"sup.stop was meant for the supervisor pid {pid}"
    return (message.startswith((named + ";", named + " that"))
            and message.endswith("keeps running"))


def _still_first_asked(client: Client, pid: int, refused_at: float) -> None:
    """Return while the supervisor holding the home is the one that refused the stop's
    `pid` by `refused_at` (time.monotonic()); FirstAskedGone when another holds it or
    none does. Asked without `pid`, whichever supervisor reads the stop stops: had the
    first exited meanwhile (another stop's doing), the one that took the home since would.
    Such an old supervisor says when it started only by its ping's uptime: `now -
    uptime_s` on this box's monotonic clock, a little late at most (its answer's way
    back). One that started after the refusal is a successor, its pid the same or not:
    the first must have exited before it could take the home. A pid file that does not
    read (-1) is a successor's not written yet when it reads within PID_WRITE_GRACE_S,
    whatever pid it reads then, the first's own included, without the ping's uptime: the
    first writes its pid file only as it starts (its pid, then `mark_serving` in place,
    which never reads -1), before it serves, so once its ping answered, a -1 is another
    holder's write under way; and that successor, just started, may not answer a ping
    yet (not bound): asked, it was taken for the first gone silent, and the stop refused
    (tests/test_stop_names_its_run.py, a same-pid successor whose pid file does not read
    yet). One that never reads (corrupt) names nobody, and the ping tells: it was taken
    for a successor, and the stop stopped nothing."""
    from kint.supervisor import autostart
    from kint.supervisor.pidlock import running_pid

    now = running_pid(client.home)
    if now == -1:
        now = read_past_unwritten(client.home, now, PID_WRITE_GRACE_S)
        if now != -1:
            raise FirstAskedGone(now)
    elif now != pid:
        raise FirstAskedGone(now)
    again = client.ping_answer(autostart.UNREACHABLE_AFTER_S)
    answered_at = time.monotonic()
    uptime = (again or {}).get("uptime_s")
    if again is None and (_stopping_meanwhile(client.home, pid)
                          or exits_within(client.home, pid, EXITING_GRACE_S)):
        # Another stop closed its door, or ended it, since the refusal: stopping all the
        # same, and the stop's wait names any successor.
        raise StoppingMeanwhile
    if again is None or not isinstance(uptime, (int, float)):
        raise SupervisorUnavailable(
            f"the supervisor (pid {pid}), of a kint older than this one, refused the stop "
            f"naming it and did not answer again; it was not asked to stop",
            "run `kint supervisor stop` again")
    if again.get("pid") != pid or answered_at - uptime >= refused_at:
        raise FirstAskedGone(again.get("pid") if isinstance(again.get("pid"), int) else None)


def _stopping_meanwhile(home: Path, pid: int | None) -> bool:
    """Whether the supervisor `pid`, asked nothing yet by this stop, is gone already or
    has closed its socket to new clients (stopping, or short of open files: then it is
    sent SIGTERM, `_stopped_by_signal`): the stop's wait is all that is left to do."""
    if gone_or_replaced(home, pid):
        return True
    return pid is not None and pid > 0 and _stopped_by_signal(home, pid)


def refuse_if_silent(obj: Ctx) -> None:
    """Refuse (exit 2) when a supervisor holds KINT_HOME's pid lock and serves but did not
    answer: stopped or stuck, it is no "no supervisor is running"."""
    from kint.supervisor.start_refusals import unanswering_supervisor

    silent = unanswering_supervisor(kint_home())
    if silent is not None:
        fail(SupervisorUnavailable(str(silent), silent.hint), obj.debug)


