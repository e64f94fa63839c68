"""A supervisor stopped by a signal in its start's first moments (a service manager's stop,
a Ctrl-C, a closed terminal), before it hands the stop signals to the supervisor it builds,
with a real process: its pid file says `PID stopped` as it ends, so a start that lost the
pid lock to it reads a stop, not a death in the start, and starts none in its place
(pidlock.let_go_starting; tests/test_pid_lock_loser.py shows that start given each file).
Before, the signal's default action ended it with the file naming its pid alone, read as
"died starting", and a command's on-demand start served the home after `systemctl stop`.

The supervisor is held in that span at an event (tests/support/run_supervisor_start_held.py
prints `held` there and waits for its stdin), never a guessed time."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from conftest import SUPPORT
from kint.paths import run_dir
from kint.supervisor.pidlock import PID_FILE, holder, let_go_starting


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_supervisor_stopped_in_its_start_says_so(sandbox, sig):
    """The signal ends the supervisor as its default action does (killed by it), and its
    pid file says it was stopped: no later start takes it for one that died starting."""
    home = sandbox.kint_home
    proc = subprocess.Popen(
        [sys.executable, str(SUPPORT / "run_supervisor_start_held.py"), "--home", str(home)],
        env=sandbox.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "held", proc.communicate(timeout=60)
        pid_file = run_dir(home) / PID_FILE
        assert pid_file.read_text().split() == [str(proc.pid)]  # the premise: named, starting
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == -sig, (proc.returncode, err)
        # Ctrl-C ends it as before the handler: a KeyboardInterrupt (the CLI's `interrupted
        # (Ctrl-C)`, exit 130; here, with no CLI around it, Python's own end by SIGINT),
        # where the handler's kill of itself ended it with no word.
        assert ("KeyboardInterrupt" in err) == (sig == signal.SIGINT), err
        assert pid_file.read_text() == f"{proc.pid} stopped\n"
        assert holder(home) is None
        assert not let_go_starting(home)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
