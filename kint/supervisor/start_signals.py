"""What a stop signal does to a supervisor in its start: after it took the pid lock and
before it hands the stop signals to the supervisor it builds (autostart.run_foreground).

Kept apart from `autostart`, which starts supervisors and waits for them: this is the one
piece of a start that runs inside a signal handler, where what it may touch (a raw write,
the held pid file) is narrower than anywhere else.
"""

from __future__ import annotations

import os
import signal
from typing import Any, Callable

from kint.supervisor.pidlock import mark_stopped


def stop_in_start_handler(pid_fd: int, before: dict[int, Any], daemon: bool
                          ) -> Callable[[int, Any], None]:
    """The handler of a stop signal between taking the pid lock (`pid_fd`) and serving:
    the pid file says `stopped`, then the signal ends the process as it did before this
    handler (`before`): SIGINT's KeyboardInterrupt, so the CLI still says `interrupted
    (Ctrl-C)` and exits 130; else the default action, and an exit of 128 + the signal
    where that action does not end it (PID 1 of a pid namespace, a container's, whose own
    default-action signals the kernel drops). A `daemon` (`python -m kint.supervisor`) has
    no CLI around it: it says in one line of its stderr (run/supervisor.stderr) which
    signal ended it, then ends by the default action, SIGINT's too, whose KeyboardInterrupt
    left a traceback there that read as a crash's (and as its start's `exited ... before
    it answered: KeyboardInterrupt`). A file naming the pid alone reads as "died starting"
    to a start that lost the lock to this one, which starts again (let_go_starting): a
    service manager's stop, or a Ctrl-C, of a `--foreground` start would be followed by a
    daemon serving the home outside the unit. A signal in the instant between the lock
    taken and the pid written (pid_file_lock.hold_pid_file) is ended by the default action
    alone."""
    def stopped(sig: int, frame: Any) -> None:
        try:
            mark_stopped(pid_fd)
        except OSError:
            pass  # the signal's end is what matters; a lost mark is the old behaviour
        if daemon:
            _say_ended(sig)
        elif callable(previous := before.get(sig)):
            previous(sig, frame)
            return
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)

    return stopped


def _say_ended(sig: int) -> None:
    """One line on stderr: the stop signal `sig` ended this supervisor as it started. A
    raw write: a handler that interrupted a write to sys.stderr could not write there."""
    try:
        os.write(2, f"kint: {signal.Signals(sig).name} ended the supervisor as it started, "
                    "before it served\n".encode())
    except OSError:
        pass  # no stderr to say it on: the pid file's `stopped` says it still
