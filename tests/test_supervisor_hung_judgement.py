"""The supervisor's judgement of a hung worker, turn by turn (kint/supervisor/lifecycle.py),
against a real process that is really stopped.

The host is the part of `Supervisor` that `_check_alive` reads (tests/support/
lifecycle_host.py). The turns are given explicit monotonic times, so what happens between SIGKILL and the
moment the loop reads the worker's exit is not left to the scheduler: on a busy
supervisor, client requests wake the loop in that gap (the many-tenants benchmark saw it
within 9 ms).
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
