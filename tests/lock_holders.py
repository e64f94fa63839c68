"""A real process holding lock files as a kint worker holds its space's (an exclusive
flock, and what it writes in the file), for the tests of the worker lock
(tests/test_worker_lock.py) and of kint-server's look for an old worker
(tests/test_restore_wait.py), where a real worker would cost a supervisor for each case.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


def holding(locks: list[tuple[Path, str]], stop: bool = False) -> subprocess.Popen:
    """A process holding the exclusive flock of each file of `locks`, its text written at
    the file's start (`{pid}` in it is the process's own pid), once it has them all;
    SIGSTOPped when `stop`, as a debugger or a Ctrl-Z leaves a worker. It names itself as
    a worker does (kint.proc_name.WORKER): a pid the worker lock names is believed only
    when it is a live kint worker's (kint.tenant_worker.worker_lock.live_holder)."""
    proc = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        "from kint.proc_name import WORKER, set_process_name\n"
        "set_process_name(WORKER)\n"
        "for path, text in zip(sys.argv[1::2], sys.argv[2::2]):\n"
        "    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)\n"
        "    fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "    os.ftruncate(fd, 0); os.pwrite(fd, text.format(pid=os.getpid()).encode(), 0)\n"
        "print(flush=True); time.sleep(120)"),
        *[part for path, text in locks for part in (str(path), text)]],
        stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"\n"  # locked
    if stop:
        os.kill(proc.pid, signal.SIGSTOP)
    return proc


def end(proc: subprocess.Popen) -> None:
    """Kill it (stopped or not) and reap it."""
    proc.kill()
    proc.wait()
