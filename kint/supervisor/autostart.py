"""Starting the supervisor: in the foreground (systemd, launchd, `--foreground`), as a
daemon, or on demand by a client whose call found nobody listening.

Two locks make "exactly one" hold however many clients race:
- `run/supervisor.lock`, the start lock: a client takes it before it checks and starts,
  so ten racing CLI calls start one daemon and the other nine find it answering.
- `run/supervisor.pid`, held by the running supervisor for its whole life: a second
  daemon that gets past a client anyway sees it held and exits at once.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kint.logs import setup_file_logging
from kint.paths import ensure_private_dir, log_path, run_dir

log = logging.getLogger("kint.supervisor")

START_LOCK = "supervisor.lock"
PID_FILE = "supervisor.pid"


class AlreadyRunning(Exception):
    pass


# A client checking whether a supervisor runs holds a shared lock on the pid file for an
# instant; a starting supervisor retries this long before deciding another one runs.
PID_LOCK_RETRY_S = 3.0


def _hold_pid_lock(home: Path) -> int:
    path = run_dir(home) / PID_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + PID_LOCK_RETRY_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as err:
            if err.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                os.close(fd)
                raise
            if time.monotonic() >= deadline:
                os.close(fd)
                raise AlreadyRunning(str(path)) from None
            time.sleep(0.02)
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def running_pid(home: Path) -> int | None:
    """The pid of the live supervisor of `home`, or None. Reads the lock, never the socket."""
    path = run_dir(home) / PID_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            raw = os.pread(fd, 32, 0).decode(errors="replace").strip()
            return int(raw) if raw.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def run_foreground(home: Path, extra_preload: tuple[str, ...] = ()) -> int:
    """Run the supervisor in this process until it is stopped. Returns the exit code.

    `extra_preload` is for code that embeds kint (the test suite, `kint demo`): modules the
    worker forkserver imports first."""
    from kint.supervisor.daemon import Supervisor
    from kint.supervisor.settings import Settings
    from kint.supervisor.spawner import Spawner

    ensure_private_dir(home)
    ensure_private_dir(run_dir(home))
    setup_file_logging(home)
    try:
        pid_fd = _hold_pid_lock(home)
    except AlreadyRunning:
        print(f"kint: a supervisor is already running for {home}", file=sys.stderr)
        return 0
    sup = Supervisor(home, Settings.from_env(), Spawner(extra_preload))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, sup.request_stop)
    try:
        sup.spawner.warm_up()
        sup.bind()
        sup.run()
    finally:
        sup.close()
        os.close(pid_fd)
    return sup.exit_code


DAEMON_STDERR = "supervisor.stderr"


def spawn_daemon(home: Path) -> subprocess.Popen[bytes]:
    """Start a detached supervisor: its own session, no terminal. Its raw stderr (what
    bypasses logging: a crash before logging is set up, interpreter warnings), and its
    workers', goes to run/supervisor.stderr, emptied at each start: the shared log is
    rotated by renaming, and a file descriptor held since start would follow the rename."""
    ensure_private_dir(home)
    ensure_private_dir(run_dir(home))
    fd = os.open(run_dir(home) / DAEMON_STDERR, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o600)
    try:
        # -P and cwd="/": the daemon imports the installed kint, never a `kint/` folder
        # that happens to sit in the caller's working directory.
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "kint.supervisor", "--home", str(home)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fd,
            start_new_session=True, close_fds=True, cwd="/",
        )
        # Reap it when it exits, so a long-lived client never holds a zombie.
        threading.Thread(target=proc.wait, name="kint-reap-supervisor", daemon=True).start()
        return proc
    finally:
        os.close(fd)


def ensure_running(home: Path, ping, wait_s: float = 30.0) -> None:
    """Make sure a supervisor answers on `home`'s socket, starting one if needed.

    `ping(timeout_s) -> bool` asks the socket. Raises TimeoutError when none answers.
    """
    if ping(0.5):
        return
    ensure_private_dir(home)
    ensure_private_dir(run_dir(home))
    lock_fd = os.open(run_dir(home) / START_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise TimeoutError("another kint process holds the start lock") from None
                time.sleep(0.05)
        if ping(0.5):
            return
        if running_pid(home) is None:
            spawn_daemon(home)
        while time.monotonic() < deadline:
            if ping(0.5):
                return
        raise TimeoutError(f"the supervisor did not answer within {wait_s:.0f}s "
                           f"(see {log_path(home)} and {run_dir(home) / DAEMON_STDERR})")
    finally:
        fcntl.flock(lock_fd, fcntl.LOCK_UN)
        os.close(lock_fd)
