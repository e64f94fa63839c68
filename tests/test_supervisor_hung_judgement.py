"""The supervisor's judgement of a hung worker, turn by turn (kint/supervisor/lifecycle.py),
against a real process that is really stopped.

The host is the part of `Supervisor` that `_check_alive` reads (tests/support/
lifecycle_host.py). The turns are given explicit monotonic times, so what happens between SIGKILL
and the moment the loop reads the worker's exit is not left to the scheduler: on a busy supervisor,
client requests wake the loop in that gap (the many-tenants benchmark saw it within 9 ms).
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time

from support.lifecycle_host import LifecycleHost

from kint.supervisor.settings import Settings
from kint.supervisor.workers import WorkerHandle


def test_a_hung_worker_is_judged_hung_once_until_its_exit_is_read(caplog):
    settings = Settings(heartbeat_timeout_s=3.0, kill_grace_s=5.0)
    host = LifecycleHost(settings)
    # A worker stopped and wedged: once continued (the SIGTERM comes with a SIGCONT) it
    # still does not exit on SIGTERM, so only the SIGKILL after the grace ends it.
    child = subprocess.Popen([sys.executable, "-c", "import signal, time\n"
                              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                              "print('ready', flush=True)\ntime.sleep(120)\n"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGSTOP)  # a stopped worker: it beats no more
        t0 = time.monotonic()
        handle = WorkerHandle(space_id="ab" * 32, label="t@hermes:x", tenant="t", db="/x.db")
        handle.process, handle.pid, handle.state = child, child.pid, "ready"
        handle.spawned_at = handle.last_beat_at = t0
        caplog.set_level(logging.INFO, logger="kint.supervisor")

        host._check_alive(handle, t0 + 3.5)  # silent past the timeout: hung, SIGTERM
        assert handle.state == "hung" and handle.hung_reason == "no heartbeat for 4s"
        host._check_alive(handle, t0 + 6.0)  # within the grace: nothing more
        host._check_alive(handle, t0 + 8.6)  # the grace is over: SIGKILL
        assert child.wait(timeout=30) == -signal.SIGKILL
        # The loop turns again before it reads the exit (a client's request woke it).
        host._check_alive(handle, t0 + 8.61)
        host._check_alive(handle, t0 + 9.0)

        assert handle.state == "hung"
        assert handle.hung_reason == "no heartbeat for 4s"  # why it was found hung, kept
        hung = [r.getMessage() for r in caplog.records if "is hung" in r.getMessage()]
        assert len(hung) == 1, hung
        killed = [r.getMessage() for r in caplog.records if "SIGKILL" in r.getMessage()
                  and "did not exit" in r.getMessage()]
        assert len(killed) == 1, killed
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()


def _sleeper() -> subprocess.Popen:
    """A worker stand-in that runs until it is killed: only a SIGKILL ends it here."""
    child = subprocess.Popen([sys.executable, "-c", "import signal, time\n"
                              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                              "print('ready', flush=True)\ntime.sleep(120)\n"],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    return child


def _ended(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.kill()
        child.wait()
    child.stdout.close()


def test_a_stop_grace_that_ran_out_during_the_supervisors_pause_is_given_again():
    """A Ctrl-Z stops a foreground supervisor's whole process group, its workers too. A
    worker told to stop (a recycle, with a push in flight) had its 15 s grace run out
    while everything was stopped, and was SIGKILLed at the first sweep after `fg`, before
    it had run a moment. The grace now counts from the resume, as the silence does."""
    settings = Settings(stop_grace_s=15.0)
    host = LifecycleHost(settings)
    child = _sleeper()
    try:
        t0 = time.monotonic()
        handle = WorkerHandle(space_id="cd" * 32, label="t@hermes:x", tenant="t", db="/x.db")
        handle.process, handle.pid, handle.state = child, child.pid, "ready"
        handle.spawned_at = handle.last_beat_at = t0
        handle.stop_reason, handle.state = "recycle", "stopping"
        handle.stop_deadline = t0 + settings.stop_grace_s
        resumed = t0 + 40.0  # stopped from t0 + 1 s, past the whole grace
        handle.excuse_silence(resumed)  # what the loop does on finding its own pause
        host._check_alive(handle, resumed + 0.1)
        assert handle.stop_deadline is not None and child.poll() is None  # not killed
        host._check_alive(handle, resumed + settings.stop_grace_s - 0.1)
        assert handle.stop_deadline is not None
        host._check_alive(handle, resumed + settings.stop_grace_s)  # its grace, whole
        assert handle.stop_deadline is None
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        _ended(child)


def test_a_hung_workers_kill_grace_that_ran_out_during_the_pause_is_given_again(caplog):
    """The same for the grace between a hung worker's SIGTERM and its SIGKILL: a worker
    stopped with the supervisor gets the time to run its SIGTERM handler after both
    resume, rather than a SIGKILL at once."""
    settings = Settings(heartbeat_timeout_s=3.0, kill_grace_s=5.0)
    host = LifecycleHost(settings)
    child = _sleeper()
    try:
        child.send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        handle = WorkerHandle(space_id="ef" * 32, label="t@hermes:x", tenant="t", db="/x.db")
        handle.process, handle.pid, handle.state = child, child.pid, "ready"
        handle.spawned_at = handle.last_beat_at = t0
        caplog.set_level(logging.INFO, logger="kint.supervisor")
        host._check_alive(handle, t0 + 3.5)  # hung: SIGTERM (and SIGCONT), kill at t0 + 8.5
        assert handle.state == "hung" and abs(handle.kill_at - (t0 + 8.5)) < 1e-6
        resumed = t0 + 30.0  # the supervisor stopped from t0 + 4 s
        handle.excuse_silence(resumed)
        host._check_alive(handle, resumed + 0.1)
        host._check_alive(handle, resumed + settings.kill_grace_s - 0.1)
        assert not [r for r in caplog.records if "SIGKILL" in r.getMessage()
                    and "did not exit" in r.getMessage()]
        assert child.poll() is None
        host._check_alive(handle, resumed + settings.kill_grace_s)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        _ended(child)
