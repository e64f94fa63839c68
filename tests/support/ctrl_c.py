"""Ctrl-C (SIGINT) for the processes the tests start, however the suite itself was started.

A shell without job control starts a background job (`make test &` in a script, a CI step
sent to the background) with SIGINT ignored, and an ignored signal stays ignored across
fork and exec: Python then keeps it ignored instead of raising KeyboardInterrupt, and every
`kint` command a test interrupts as a user's Ctrl-C would (`supervisor status --watch`,
`join`, the authorize page) runs on until its test's deadline. A handler, unlike an
ignored signal, is reset to the default at exec: set in the suite's process, every process
it starts takes SIGINT as Ctrl-C again. conftest.py calls this first.

SIGHUP likewise: `nohup make test` starts the suite with it ignored, and the tests that stop
a supervisor with SIGHUP (test_pid_lock_stopped) each waited out their 60 s bound and
failed. The suite itself keeps ignoring a hang-up (a handler that does nothing, as nohup
meant), while each process it starts takes SIGHUP at its default again."""

from __future__ import annotations

import signal


def let_ctrl_c_through() -> None:
    """Python's own SIGINT handler in this process where SIGINT was ignored at its start."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _hang_up_ignored)


def _hang_up_ignored(signum: int, frame: object) -> None:
    """The suite's own SIGHUP under nohup: ignored, as nohup asked, yet (a handler, not
    SIG_IGN) reset to the default in every process the suite starts."""
