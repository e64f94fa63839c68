"""What `kint supervisor start` says of the settings its environment gives when a supervisor
was already running: the ones it did not apply, that differ from the running one's.

Why: `kint supervisor start` is how a user gives the supervisor settings for its life (the
service's own, the one-off switches too: kint.settings.schema.CALL_SWITCHES). Beside a
running supervisor it starts nothing, so the settings of its environment go nowhere: the
running one keeps those it was started with. A setting a user gives is honoured or
reported, never silently dropped, so the start says so in one line (a `notices` entry under
--json), naming the settings only: a value may be a secret or hold an endpoint's key. One
the running supervisor has already (the same passphrase, exported for both as settings.md
asks) is no instruction to restart it, so the supervisor compares them (`sup.ping` with
the settings, kint.settings.wire.differing) and only those that differ are named.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from kint.client import Client, KintError, SupervisorUnavailable
from kint.front_closed import read_note, stopped_note
from kint.proc_stat import process_stopped
from kint.seconds_text import seconds_text
from kint.settings.started_with import started_with
from kint.settings.wire import outgoing
from kint.socket_paths import socket_dir
from kint.supervisor.pidlock import holder


# How long the start waits for a running supervisor's first answer before it says what it
# waits for: its whole wait is autostart.UNREACHABLE_AFTER_S (10 s), for under load a ping
# can take seconds, and one missed left the start unable to tell it found one running.
# SAY_AFTER_S for one /proc says is stopped (SIGSTOP, a debugger): it answers nothing until
# continued. SAY_BUSY_AFTER_S for one that runs: pings over 1 s were seen under load (fix28g),
# and a line at 1 s beside a merely busy supervisor told of a wait that was none.
SAY_AFTER_S = 1.0
SAY_BUSY_AFTER_S = 4.0


def answering_pid(home: Path, say: Callable[[str], None]) -> int | None:
    """The pid of the supervisor answering on `home`'s socket now, or None when none does
    (asked without starting one; none is known at once when no pid file names one, or no
    socket file is there). One that holds the home and serves but has not answered within
    SAY_AFTER_S is waited for up to UNREACHABLE_AFTER_S in all, a line through `say`
    telling the user so (it was a silent 10 s) once it has not answered for SAY_AFTER_S
    while stopped, SAY_BUSY_AFTER_S otherwise; then SupervisorUnavailable, the refusal the
    start's own wait would give after as long again (`silent_supervisor`). One that holds
    the home but is not serving yet (still starting) is not waited for here: the start's
    own wait is. One that has closed its socket to new clients for want of open files
    (kint/front_closed.py) is refused at once, BUSY in the note's words, as every client
    is refused by it (`_stopping_pid`): its socket file moved aside, the start's own
    wait went on for UNREACHABLE_AFTER_S unsaid before that refusal. One closed as it
    stops is left to the start's own wait (None), a line through `say` saying how long
    that waits for it. `say` may drop the line (--json keeps stderr quiet)."""
    from kint.supervisor import autostart
    from kint.supervisor.start_refusals import unanswering_supervisor

    wait_s = autostart.UNREACHABLE_AFTER_S
    began = time.monotonic()
    with Client(home, autostart=False) as client:
        answer = client.ping_answer(min(SAY_AFTER_S, wait_s))
        stopping = _stopping_pid(home) if answer is None else None
        if stopping is not None:
            # The start's own wait is for its stop's end: up to autostart.START_WAIT_S, it
            # was unsaid. One stopped (SIGSTOP) never ends it, and is refused at the silent
            # bound. /proc read once: the bound and the note said beside it agree.
            note = stopped_note(stopping)
            up_to = wait_s if note else autostart.START_WAIT_S
            say(f"kint: waiting up to {seconds_text(up_to)} for the supervisor (pid "
                f"{stopping}) to finish stopping{note}")
            return None
        pid = _silent_holder(client, home, answer)
        said_s = SAY_AFTER_S
        if pid is not None and not process_stopped(pid):
            said_s = SAY_BUSY_AFTER_S
            answer = client.ping_answer(_left(began, min(said_s, wait_s)))
            pid = _silent_holder(client, home, answer)
        if pid is not None:
            say(f"kint: waiting for the supervisor (pid {pid}) to answer: it holds "
                f"{home} and has not answered for {seconds_text(min(said_s, wait_s))}"
                f"{stopped_note(pid)}; it is said stuck if it has not "
                f"within {seconds_text(wait_s)}")
            answer = client.ping_answer(_left(began, wait_s))
            silent = unanswering_supervisor(home) if answer is None else None
            if silent is not None:
                raise SupervisorUnavailable(str(silent), silent.hint)
    return int(answer["pid"]) if answer and "pid" in answer else None


def _stopping_pid(home: Path) -> int | None:
    """The pid of the supervisor holding `home` and serving when it has closed its socket to
    new clients as it stops: the start's own wait sees it exit and starts the next one, or
    says it has not stopped (kint.supervisor.autostart). KintError (BUSY, the note's words
    and hint) when it closed it for want of open files. None otherwise."""
    found = holder(home)
    if found is None or not found.serving or found.pid <= 0:
        return None
    closed = read_note(socket_dir(home), found.pid)
    if closed is None:
        return None
    if not closed.stopping:
        raise KintError(*closed.refusal())
    return found.pid


def _silent_holder(client: Client, home: Path, answer: dict[str, Any] | None) -> int | None:
    """The pid of the supervisor holding `home` and serving when its ping went unanswered
    (`answer` None) and its socket file is there; None otherwise."""
    if answer is not None or not client.socket_exists():
        return None
    found = holder(home)
    return found.pid if found is not None and found.serving and found.pid > 0 else None


def _left(began: float, wait_s: float) -> float:
    """What is left of `wait_s` counted from `began` (time.monotonic()), none once past."""
    return max(0.0, began + wait_s - time.monotonic())


def ping_with_settings(client: Client) -> dict[str, Any]:
    """`sup.ping`'s answer, told which of this environment's settings the supervisor does
    not run with (`differs`). A supervisor older than that comparison refuses the argument
    (BAD_REQUEST): it is asked plainly then, and `not_applied` names every setting given,
    as before, rather than the start failing beside it."""
    try:
        return client.call("sup.ping", args={"settings": outgoing()}, timeout_s=5)
    except KintError as err:
        if err.code != "BAD_REQUEST":
            raise
        return client.call("sup.ping", timeout_s=5)


def not_applied(started: bool, answer: Mapping[str, Any],
                environ: Mapping[str, str] | None = None) -> list[str]:
    """The line for a start whose `sup.ping` (sent with this environment's settings,
    `outgoing`) was answered by a supervisor this start did not start (`started` false):
    one running already, or one another process started while this one looked, which was
    given none of them either. The settings `environ` (this process's) sets that it does
    not run with. None when this start started it, with them all, or the running one has
    them all already. A supervisor too old to compare them is taken to differ in each, as
    is a value too long to be sent."""
    env = os.environ if environ is None else environ
    running = int(answer["pid"])
    given = [entry["name"] for entry in started_with(env)]
    if started or not given:
        return []
    differs = answer.get("differs")
    compared = isinstance(differs, list)
    if compared:
        sent = outgoing(env)
        given = [name for name in given if name in differs or name not in sent]
    if not given:
        return []
    which = " that differ from its own" if compared else ""
    return [f"kint: a supervisor was already running (pid {running}): this start applied "
            f"none of this environment's settings{which} ({', '.join(given)}); it keeps "
            f"the ones it was started with (`kint supervisor status` lists them). To run "
            f"it with these, `kint supervisor stop`, then `kint supervisor start` again"]
