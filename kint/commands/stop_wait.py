"""How `kint supervisor stop` waits for the supervisor it asked to let go of KINT_HOME:
the pid lock's holder looked at until it is gone, replaced by a successor (named once its
pid file reads), or seen stopped (SIGSTOP); and a pid file that does not read yet read
again until it does.

Apart from kint.commands.supervisor_stop, which asks the supervisor and says what came of
it: these only look at the pid lock and the process, and ask nothing.
"""

from __future__ import annotations

import time
from pathlib import Path

from kint.proc_stat import process_stopped

# How long `stop`, once nobody holds the pid lock, looks for a supervisor that was waiting
# to take it (wait_gone).
SUCCESSOR_GRACE_S = 0.5
# How long an unanswered supervisor is given to exit before it is called silent: the end
# of another stop (its note and socket gone, its pid lock held until the process ends).
EXITING_GRACE_S = 2.0


def read_past_unwritten(home: Path, pid: int | None, wait_s: float) -> int | None:
    """`pid`, as the pid file read, read again while it reads -1 (its holder has not
    written its pid yet) for up to `wait_s`: what it reads then."""
    from kint.supervisor.pidlock import running_pid

    deadline = time.monotonic() + wait_s
    while pid == -1 and time.monotonic() < deadline:
        time.sleep(0.02)
        pid = running_pid(home)
    return pid


def gone_or_replaced(home: Path, pid: int | None) -> bool:
    """Whether the supervisor `pid` no longer holds the home: none does, or another."""
    from kint.supervisor.pidlock import running_pid

    now = running_pid(home)
    return now is None or (pid is not None and pid > 0 and now != pid)


def exits_within(home: Path, pid: int | None, grace_s: float) -> bool:
    """Whether the supervisor `pid` lets go of the home within `grace_s`: one at the very
    end of another stop has removed its closed-door note and moved socket, and holds its
    pid lock only until its exit, answering nothing meanwhile (CI saw a stop's ping
    refused by the note, the note gone at the next look, the supervisor exiting)."""
    holder = wait_gone(home, pid, grace_s)
    return holder is None or not same_supervisor(holder, pid)


def same_supervisor(pid: int, stopping: int | None) -> bool:
    """Whether the pid lock's holder may still be the supervisor that was asked to stop:
    the same pid, or one of the two unknown (a pid file not readable yet, or none read
    before the stop), where only its going tells."""
    return stopping is None or pid in (stopping, -1) or stopping == -1


def wait_gone(home: Path, stopping: int | None, wait_s: float) -> int | None:
    """Wait up to `wait_s` for the supervisor asked to stop to let go of its pid
    lock; the holder then (None: nobody). A supervisor started meanwhile (a kint-server's
    call, a command's autostart) takes the lock once the old one lets go: its pid is
    another, and the wait ends there. The lock is not handed over, though: its waiter is
    woken and takes it when it next runs, so a look in between finds nobody. Nobody is
    looked for again for SUCCESSOR_GRACE_S, so such a successor is named once its pid file
    reads (on a busy box a woken process can wait tens of milliseconds for a core). One
    seen stopped (SIGSTOP) at every look for UNREACHABLE_AFTER_S ends the wait too: it
    exits only once continued, which nobody here can tell."""
    from kint.supervisor import autostart
    from kint.supervisor.pidlock import running_pid

    deadline = time.monotonic() + wait_s
    stopped_since: float | None = None
    while (pid := running_pid(home)) is not None and same_supervisor(pid, stopping):
        now = time.monotonic()
        if now >= deadline:
            return pid
        if pid <= 0 or not process_stopped(pid):
            stopped_since = None
        elif stopped_since is None:
            stopped_since = now
        elif now - stopped_since >= autostart.UNREACHABLE_AFTER_S:
            return pid
        time.sleep(0.05)
    if pid is not None:
        return pid
    settled = time.monotonic() + SUCCESSOR_GRACE_S
    while time.monotonic() < settled:  # the stopped one is gone: only a successor is named
        time.sleep(0.02)
        if (pid := running_pid(home)) is not None and pid != -1:
            return pid
    return None
