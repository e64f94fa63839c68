"""A start whose own supervisor took KINT_HOME's pid lock and ended before the start heard
from it, with real processes: the start says what became of the supervisor it started,
never that it gave way to another.

The supervisor served and was stopped (a SIGTERM, another terminal's `kint supervisor
stop`) before the start's next look got its answer: the start said "the one that took it
first (pid N) served and has ended since, and the one started here gave way to it", N its
own daemon's pid, both parts false (review37e M1).

The start is frozen (SIGSTOP) while its daemon is frozen before it serves, so no answer
can have reached it, and outside its looks at the pid lock, so the daemon takes the lock
meanwhile: no guessed times."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from conftest import KINT, wait_until
from kint.client_errors import SERVED_ENDED_HINT
from kint.paths import run_dir
from kint.proc_stat import process_stopped
from kint.supervisor.pidlock import PID_FILE, holder, running_pid
from test_pid_lock_loser import ON_PROC, _daemon_of, _gone


def _locks(pid: int, path: Path) -> bool:
    """Whether process `pid` holds a lock on `path` through any of its open files of it,
    as its /proc/PID/fdinfo says: a client keeps the pid file open between its looks
    (pidlock.HolderWatch), and holds a shared lock on it only inside one."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != str(path):
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as fh:
                if any(line.startswith("lock:") for line in fh):
                    return True
        except OSError:
            continue  # closed as it was read
    return False


def _frozen_outside_its_looks(pid: int, pid_file: Path) -> None:
    """Freeze `pid` (SIGSTOP) at a moment it holds no look at `pid_file`: frozen inside
    one, it would keep the supervisor from taking the lock (a supervisor retries through
    looks for 3 s, then gives up), so it is let go on and frozen again."""
    while True:
        os.kill(pid, signal.SIGSTOP)
        assert wait_until(lambda: process_stopped(pid), timeout=60)
        if not _locks(pid, pid_file):
            return
        os.kill(pid, signal.SIGCONT)


@ON_PROC
def test_a_start_whose_own_supervisor_served_and_ended_says_so(sandbox):
    """`kint supervisor start`'s own daemon serves and is SIGTERMed before the start hears
    from it: the start refuses saying the supervisor it started served and has ended (exit
    2, nothing started again: that stop wins), where it named that daemon as the one it
    gave way to."""
    home = sandbox.kint_home
    pid_file = run_dir(home) / PID_FILE
    start = subprocess.Popen([KINT, "supervisor", "start", "--json"], env=sandbox.env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    daemon = None
    try:
        daemon = wait_until(lambda: _daemon_of(home), timeout=60, interval=0.005)
        assert daemon, start.communicate(timeout=60)
        os.kill(daemon, signal.SIGSTOP)
        assert wait_until(lambda: process_stopped(daemon), timeout=60)
        found = holder(home)
        # The premise: it has not served, so the start has had no answer (it answers only
        # once its file says so, pidlock.mark_serving).
        assert found is None or not found.serving, found
        _frozen_outside_its_looks(start.pid, pid_file)
        assert start.poll() is None
        os.kill(daemon, signal.SIGCONT)
        assert wait_until(lambda: (h := holder(home)) is not None and h.serving
                          and h.pid == daemon, timeout=60), holder(home)
        os.kill(daemon, signal.SIGTERM)  # as a stop from elsewhere ends a serving one
        assert wait_until(lambda: _gone(daemon), timeout=60)
        assert pid_file.read_text() == f"{daemon} serving\n"
        os.kill(start.pid, signal.SIGCONT)
        out, err = start.communicate(timeout=120)
        assert start.returncode == 2, out + err
        assert running_pid(home) is None
        refused = json.loads(out)
        assert refused["message"] == (f"no supervisor runs for {home}: the one started here "
                                      f"(pid {daemon}) served and has ended since"), out
        assert refused["hint"] == SERVED_ENDED_HINT, out
    finally:
        if daemon is not None and not _gone(daemon):  # failed midway: never left frozen
            os.kill(daemon, signal.SIGKILL)
        if start.poll() is None:
            os.kill(start.pid, signal.SIGCONT)
            start.kill()
            start.wait(timeout=60)
        if running_pid(home) is not None:
            sandbox.shutdown()
