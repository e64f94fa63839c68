"""Starting the supervisor: in the foreground (systemd, launchd, `--foreground`), as a
daemon, or on demand by a client whose call found nobody listening.

Two locks make "exactly one" hold however many clients race:
- `run/supervisor.lock`, the start lock: a client takes it before it checks and starts,
  so ten racing CLI calls start one daemon and the other nine find it answering.
- `run/supervisor.pid`, held by the running supervisor for its whole life: a second
  daemon that gets past a client anyway sees it held and exits at once (`pidlock`).

A client that finds no answer never spins and never waits on nothing: it starts a
supervisor when none holds the lock, says at once when the one it started exited, and
gives up within seconds on a supervisor that is serving but does not answer.
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kint.front_closed import FrontClosed, clear_left_behind
from kint.logs import setup_file_logging
from kint.open_files import (FDS_PER_WORKER, RAISE_SOFT_TO, START_FDS, START_ROOM_HINT, open_files,
                             out_of_files, raise_soft_limit)
from kint.proc_name import SUPERVISOR, set_process_name
from kint.proc_stat import process_stopped
from kint.pid_file_lock import flock_by, open_own_file
from kint.paths import HOME_REFUSAL_CODE, UnsafePathError, ensure_private_dir, log_path, run_dir
from kint.protocol import ErrorCode
from kint.seconds_text import seconds_text
from kint.socket_paths import socket_dir
from kint.supervisor.pidlock import (PID_FILE, AlreadyRunning, hold_pid_lock, holder,
                                     let_go_starting, mark_serving, named_holder)
from kint.supervisor.settings import STOP_BOUND_S
from kint.supervisor.start_refusals import (SupervisorNotReachable, note_refused,
                                            silent_supervisor, start_ended, stop_not_ended,
                                            stop_noted)
from kint.supervisor.start_signals import stop_in_start_handler

log = logging.getLogger("kint.supervisor")

START_LOCK = "supervisor.lock"
BESIDE_RUNNING_HINT = ("that one serves this KINT_HOME (`kint supervisor status` shows it); to "
                       "run it here instead, `kint supervisor stop` it, then start this again "
                       "(a systemd unit or launchd agent does so itself on its next restart)")
# What stops a supervisor (a service manager's stop, a Ctrl-C, a closed terminal).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# The daemon's umask, inherited by the worker forkserver and every worker.
PRIVATE_UMASK = 0o077


# `kint supervisor start --foreground` beside a running supervisor: a service manager
# (systemd's Restart=on-failure, launchd's KeepAlive) reads 0 as a clean end, neither
# restarting the unit once the other one is gone nor showing it failed (09-cli.md's 2).
FOREGROUND_BESIDE_RUNNING = 2


def run_foreground(home: Path, extra_preload: tuple[str, ...] = (), *,
                   refuse_beside_running: bool = False, daemon: bool = False) -> int:
    """Run the supervisor in this process until it is stopped. Returns the exit code.

    `extra_preload` is for code that embeds kint (the test suite, `kint demo`): modules the
    worker forkserver imports first. `refuse_beside_running` is `--foreground`'s: a
    supervisor already serving the home is an error it exits non-zero on, where a daemon
    that lost a race of on-demand starts has nothing to report and exits 0. `daemon` is
    `python -m kint.supervisor`'s: a stop signal in its start says so in one line of its
    stderr (start_signals), where there is no CLI to say `interrupted`."""
    # Everything this process, its forkserver and its workers create is the user's alone,
    # whoever wrote it: kint's own files say 0600 themselves, but a library's (Sibyl's
    # store journal, a temporary file) would otherwise follow the caller's umask (0022).
    os.umask(PRIVATE_UMASK)
    set_process_name(SUPERVISOR)
    try:
        ensure_private_dir(home)
        ensure_private_dir(run_dir(home))
    except UnsafePathError as err:
        print(f"kint: error: {err} [{HOME_REFUSAL_CODE}]\nhint: {err.hint}", file=sys.stderr)
        return 2
    setup_file_logging(home)
    raised = raise_soft_limit()  # before the forkserver and the workers inherit it
    if raised is not None:
        log.info("open-file limit raised from %d to %d (its hard limit, or %d)", *raised,
                 RAISE_SOFT_TO)
    try:
        pid_fd = hold_pid_lock(home, before_named=lambda: _clear_left_behind(home))
    except AlreadyRunning:
        # Named by its pid, so that a second one started by hand (or a service manager
        # beside an on-demand start) says which process serves the home: a live one's
        # only, the winner of a start at once given a moment to write its (named_holder).
        named = named_holder(home)
        who = f" (pid {named})" if named is not None else ""
        if refuse_beside_running:
            print(f"kint: error: a supervisor is already running for {home}{who}; this one "
                  f"exits [{ErrorCode.BUSY.value}]\nhint: {BESIDE_RUNNING_HINT}",
                  file=sys.stderr)
            return FOREGROUND_BESIDE_RUNNING
        print(f"kint: a supervisor is already running for {home}{who}; this one exits",
              file=sys.stderr)
        return 0
    # Until `_serve` hands the stop signals to the supervisor: marked `stopped`. One this
    # process ignores (`nohup`, a background job's SIGINT) stays ignored until then.
    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    stopped = stop_in_start_handler(pid_fd, before, daemon)
    try:
        for sig, handler in before.items():  # inside: a signal among them still restores
            if handler is not signal.SIG_IGN:
                signal.signal(sig, stopped)
        files = open_files()
        if files is not None and files.too_few_to_start():
            return _out_of_files(f"it needs {START_FDS} for itself, {FDS_PER_WORKER} a "
                                 f"worker and {files.reserve} kept for clients")
        return _serve(home, pid_fd, extra_preload)
    except Exception as err:
        if not out_of_files(err):
            raise
        return _out_of_files(str(err))
    finally:
        # Each given back, whoever holds it now: this start's (never left to write a closed
        # descriptor) or the supervisor's (`_serve`), which, kept, asked a supervisor
        # stopped already to stop, and a Ctrl-C after the return was lost.
        for sig, handler in before.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        os.close(pid_fd)


def _clear_left_behind(home: Path) -> None:
    """What a killed predecessor left of its closed front door (front_closed.py) goes with
    the pid lock held and before the pid file names this process: a client that finds the
    file naming this pid (in a container, often the dead one's too) never reads the old
    note as this one's."""
    try:
        clear_left_behind(socket_dir(home))
    except OSError as err:
        log.warning("could not remove what the last supervisor left in its socket folder: "
                    "%s", err)


def _out_of_files(why: str) -> int:
    """Below what the supervisor needs to start (its sockets, its forkserver, one worker):
    said with the limit, in the words and code of a refusal, not as a traceback or an
    abort inside libzmq."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    message = f"the supervisor ran out of open files (its limit is {soft}, ulimit -n): {why}"
    log.error("%s", message)
    print(f"kint: error: {message} [BUSY]\nhint: {START_ROOM_HINT}", file=sys.stderr)
    return 2


def _serve(home: Path, pid_fd: int, extra_preload: tuple[str, ...]) -> int:
    """Build the supervisor of `home`, whose pid lock `pid_fd` holds, and serve until it
    stops; its exit code."""
    from kint.supervisor.daemon import Supervisor
    from kint.supervisor.ownership import Ownership
    from kint.supervisor.settings import Settings
    from kint.supervisor.spawner import Spawner
    from kint.supervisor.tighten import tighten_home

    sup = Supervisor(home, Settings.load(), Spawner(extra_preload),
                     Ownership(run_dir(home) / PID_FILE, pid_fd))
    # Files an older kint or a loose umask left open to others are reused as they are:
    # made private again, now that this supervisor alone holds the home.
    tighten_home(home, sup.bindings.stores())
    for sig in STOP_SIGNALS:
        signal.signal(sig, sup.request_stop)
    try:
        sup.bind()
        # The forkserver imports in the background while this one answers; no worker is
        # spawned before it is done (kint/supervisor/spawner.py). The door counts what
        # the warm-up opens from here (front_door.FrontDoor.before_warm_up).
        sup.door.before_warm_up()
        sup.spawner.warm_up_in_background()
        sup.resume_after_upgrade()  # before serving: what an upgrade's exit left this one
        mark_serving(pid_fd)
        sup.run()
    finally:
        sup.close()
    return sup.process_exit_code


DAEMON_STDERR = "supervisor.stderr"
# The previous supervisor's raw stderr, kept one start: what a supervisor that died without
# a line in the log said last (libzmq's abort, a crash before logging was set up).
PREVIOUS_STDERR = "supervisor.stderr.1"


def spawn_daemon(home: Path, *, on_demand: bool = True) -> subprocess.Popen[bytes]:
    """Start a detached supervisor: its own session, no terminal. Its raw stderr (what
    bypasses logging: a crash before logging is set up, interpreter warnings), and its
    workers', goes to run/supervisor.stderr, new at each start: the shared log is rotated
    by renaming, and a file descriptor held since start would follow the rename. The
    previous one, if it said anything, is kept as run/supervisor.stderr.1: emptied, it lost
    the last words of a supervisor that died silently (an abort inside libzmq) to the very
    command that started its successor.
    `on_demand` (started for a command's request, not by `kint supervisor start`): the
    command's one-off switches stay its own (schema.CALL_SWITCHES); its request carries
    them."""
    from kint.settings.schema import environment_for

    ensure_private_dir(home)
    ensure_private_dir(run_dir(home))
    # Never through a link, nor another user's file: it is kept aside or emptied, and only
    # then (the rename moves the name in this user's 0700 folder, never a file elsewhere).
    stderr_path = run_dir(home) / DAEMON_STDERR
    fd = open_own_file(stderr_path)
    said = os.fstat(fd).st_size > 0
    if said:
        os.fchmod(fd, 0o600)  # kept, it is this user's alone, as what replaces it is
        os.close(fd)
        os.replace(stderr_path, run_dir(home) / PREVIOUS_STDERR)
        fd = open_own_file(stderr_path)
    try:
        os.ftruncate(fd, 0)
    except OSError:
        os.close(fd)
        raise
    try:
        # -P and cwd="/": the daemon imports the installed kint, never a `kint/` folder
        # that happens to sit in the caller's working directory.
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "kint.supervisor", "--home", str(home)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fd,
            start_new_session=True, close_fds=True, cwd="/",
            # Less the secrets no daemon reads (the owner's key): it outlives this command.
            env=environment_for("daemon", os.environ, call_switches=not on_demand),
        )
        # Reap it when it exits, so a long-lived client never holds a zombie.
        threading.Thread(target=proc.wait, name="kint-reap-supervisor", daemon=True).start()
        return proc
    finally:
        os.close(fd)


# How long a start waits for a supervisor to answer, at most: the one it starts, or the
# next one beside a supervisor that is stopping, once that has let go. A call's start waits
# what is left of the call's bound when that is less (kint.client).
START_WAIT_S = 30.0
# A supervisor that says it is serving but does not answer for this long is stuck or
# stopped: the client says so rather than wait out its whole start window.
UNREACHABLE_AFTER_S = 10.0
# Between two looks: ping returns at once when there is no socket, so without this pause
# the wait would spin a CPU. A look costs ~0.1 ms (a stat and the pid file read) while the
# daemon starts, and the socket is there within a look's pause of its bind: every 20 ms
# rather than 100 answers a started supervisor ~40 ms sooner at the same CPU (the CLI's
# own ~0.1 s). Every first command of a fresh home pays the wait, as do most test machines.
RETRY_EVERY_S = 0.02
# The longest one look waits for an answer: less when less is left of the wait.
PING_S = 0.5


def ensure_running(home: Path, ping, wait_s: float | None = None, *,
                   on_demand: bool = True) -> int | None:
    """Make sure a supervisor answers on `home`'s socket, starting one if needed. Returns
    the pid of the supervisor this call started, None when it started none: `kint
    supervisor start` tells its start from one another process made while it looked,
    whose environment it was not (compared with the pid that answers, for the one it
    started may lose the home to a `--foreground` one that takes no start lock).

    `ping(timeout_s) -> bool` asks the socket. Raises SupervisorNotReachable (a
    TimeoutError) when none answers: at once when the supervisor this call started exited,
    after UNREACHABLE_AFTER_S when one is serving but silent, after `wait_s` otherwise.
    Every look ends by the one deadline `wait_s` from the call: a caller passes what is left
    of its own bound, and a first look of a fixed half second, with the deadline taken
    after it, ran that bound over (a call's refusal came past the bound it names). None:
    START_WAIT_S, read at the call.
    """
    if wait_s is None:
        wait_s = START_WAIT_S
    deadline = time.monotonic() + wait_s
    if ping(_look_s(deadline)):
        return None
    ensure_private_dir(home)
    ensure_private_dir(run_dir(home))
    lock_fd = open_own_file(run_dir(home) / START_LOCK)
    try:
        if not flock_by(lock_fd, deadline, 0.05):
            raise SupervisorNotReachable("another kint process holds the start lock",
                                         "try again in a moment")
        return _wait_for_supervisor(home, ping, deadline, wait_s, on_demand)
    finally:
        # Closing lets the lock go (the descriptor is close-on-exec: the supervisor
        # started under it holds no copy). An unlock first could itself fail after a
        # flock that did (no locks on that file system) and leak the descriptor.
        os.close(lock_fd)


def _wait_for_supervisor(home: Path, ping, deadline: float, wait_s: float,
                         on_demand: bool) -> int | None:
    """Under the start lock: start a supervisor when none holds the pid lock, then wait
    (never spinning) until one answers or waiting cannot help. Returns the pid of the one
    started here, None when one answered without (another process started it)."""
    started: subprocess.Popen[bytes] | None = None
    started_again = False
    silent_since: float | None = None
    # The note of the holder that said it stops (its pid, `stop_note.pid`, is the
    # holder's: read_note): its stop's end removes the note a moment before it lets go of
    # the home (its sockets closed first), and it never serves again, so once seen
    # stopping it is waited for as such to the end. Kept as then seen: read again at the
    # end, it could be gone already, and the refusal a plain kill of a stopping supervisor.
    stop_note: FrontClosed | None = None
    stop_seen_at = 0.0  # when `stop_note` was first seen
    while True:
        if ping(_look_s(deadline)):
            return started.pid if started is not None else None
        now = time.monotonic()
        found = holder(home)
        if found is None:
            silent_since = stop_note = None
            if started is None:
                started = spawn_daemon(home, on_demand=on_demand)
            elif started.poll() is not None:
                if started_again or started.returncode != 0 or not let_go_starting(home):
                    # Its own, or the one it lost to, stopped by a signal as it started or
                    # ended after it served: said so, none started.
                    gone = start_ended(home, started.pid, started.returncode)
                    if gone is not None:
                        raise gone
                    raise SupervisorNotReachable(
                        f"the supervisor exited with code {started.returncode} before it "
                        f"answered{_last_words(home)}",
                        f"see {log_path(home)}, or run `kint supervisor start --foreground` "
                        "to watch it start")
                # It lost the pid lock to one that takes no start lock (`--foreground`, a
                # service manager's) and died starting, which no `kint supervisor stop`
                # ends, nor a stop signal (its file says `stopped`): said to be running
                # where none was. Started again, once.
                started, started_again = spawn_daemon(home, on_demand=on_demand), True
        elif found.serving:
            silent_since = silent_since if silent_since is not None else now
            if ((stop_note is None or stop_note.pid != found.pid)
                    and (noted := stop_noted(home, found.pid)) is not None):
                stop_seen_at, stop_note = now, noted
            # One that is ending its stop is no silent one: it lets go of the home within
            # its stop's own bound (its workers' 10 s grace for an op in flight, SIGKILL at
            # 15 s, then its close: 11.4 s measured with an op held), past this one's
            # 10 s, which refused a start a second before the stop ended. Waited for to
            # the deadline, unless stopped (SIGSTOP: it never ends its stop), the next look
            # after it lets go (every RETRY_EVERY_S) starting the new one.
            if now - silent_since >= UNREACHABLE_AFTER_S:
                if stop_note is None or stop_note.pid != found.pid:
                    raise silent_supervisor(home, found.pid)
                stopped = process_stopped(found.pid)
                if stopped or now >= deadline:
                    # `kill -KILL` only for a stop seen past the most a stop takes: a
                    # command with seconds left of its bound would advise it of a healthy
                    # stop, which still ends by itself (its note's refusal, as seen).
                    seen_s = now - stop_seen_at
                    if not stopped and seen_s >= STOP_BOUND_S:
                        raise stop_not_ended(home, found.pid, seen_s)
                    raise note_refused(stop_note)
        if now >= deadline:
            raise SupervisorNotReachable(
                f"the supervisor did not answer within {seconds_text(wait_s)}",
                f"see {log_path(home)} and {run_dir(home) / DAEMON_STDERR}, or run "
                "`kint supervisor start --foreground` to see why it does not start")
        time.sleep(RETRY_EVERY_S)


def _look_s(deadline: float) -> float:
    """How long the next look may wait for an answer: PING_S, or what is left before
    `deadline` (none once it passed: the look then asks without waiting)."""
    return max(0.0, min(PING_S, deadline - time.monotonic()))


def _last_words(home: Path) -> str:
    """The last line the daemon wrote to its raw stderr, for a start that failed."""
    try:
        with open(run_dir(home) / DAEMON_STDERR, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 2048))
            lines = fh.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    # A refusal the daemon printed ends with its hint: the line before says what happened.
    said = [line for line in lines if not line.startswith("hint: ")] or lines
    if not said:
        return ""
    # Read into the start's own refusal, which says `kint: error:` once itself.
    line = said[-1].strip().removeprefix("kint: ").removeprefix("error: ")
    return f": {line[:300]}"
