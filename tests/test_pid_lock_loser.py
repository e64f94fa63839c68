"""A supervisor that finds KINT_HOME's pid lock held (kint/supervisor/pidlock.py), with real
processes: it tries again only while clients' shared looks hold the lock, and gives up at
once on another supervisor's exclusive one. It used to try for PID_LOCK_RETRY_S whoever
held it, so a loser of two starts at once took the home the moment a `kint supervisor
stop` let the winner go, and the home the user had just stopped was served again.

The first two tests wait for the starting supervisor to be inside its retry: its pid file
open and the process asleep (the retry's pause; no other step between the open and the
flock sleeps), with its retry lengthened through the test launcher's knob
(tests/support/kint_test_timings.py) so that a loaded box never ends it first. The next three
hold the lock as a winner does before it names itself, and check whom the loser names: the
holder, once it writes its pid, and no other process, gone or live.
The last (one test for each way the other start ends) is a client's start whose daemon
lost the lock to a start that takes no start lock, and what it does once that one is gone:
it starts again only after one that died starting."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import KINT, SUPPORT, wait_until
from kint.paths import run_dir
from kint.proc_stat import process_stopped, read_stat
from kint.supervisor.pidlock import PID_FILE, holder, running_pid

# Where /proc/PID/fd is not (macOS), a test that watches a process's open files is skipped.
ON_PROC = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/PID/fd")
# Longer than any test here waits: the retry must never be what ends the start.
RETRY_S = "120"
# Holds a shared lock on the pid file, as a client's look does for an instant (held_bytes),
# until its stdin closes: the look a starting supervisor must not take for a supervisor.
LOOKING = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
print("looking", flush=True)
sys.stdin.read()
"""


def _start_foreground(sandbox, err: Path, **env: str) -> subprocess.Popen[bytes]:
    """`kint supervisor start --foreground` of the sandbox's home, its stderr in `err`,
    `env` added to its environment."""
    with open(err, "wb") as fh:
        return subprocess.Popen(
            [sys.executable, str(SUPPORT / "run_kint.py"), "supervisor", "start", "--foreground"],
            env={**sandbox.env, "KINT_TEST_PID_LOCK_RETRY_S": RETRY_S, **env},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fh,
            start_new_session=True)


def _has_open(proc: subprocess.Popen[bytes], path: Path) -> bool:
    """Whether `proc` has `path` open (False once it exited)."""
    try:
        return any(os.readlink(f"/proc/{proc.pid}/fd/{fd}") == str(path)
                   for fd in os.listdir(f"/proc/{proc.pid}/fd"))
    except OSError:  # it exited, or a descriptor closed as it was read
        return False


def _retrying(proc: subprocess.Popen[bytes], pid_file: Path) -> bool:
    """Whether `proc` has the pid file open and sleeps: inside the lock's retry."""
    stat = read_stat(proc.pid)
    return stat is not None and stat.state == "S" and _has_open(proc, pid_file)


def test_a_start_beside_a_running_supervisor_never_takes_the_home_from_its_stop(sandbox,
                                                                               tmp_path):
    """A second supervisor started while one runs exits at once (2, naming it), so the
    `kint supervisor stop` that follows leaves no supervisor. Before, it waited on the
    lock and took the home as the stopped one let go: the stop said a new one had started
    since, and the home was served again."""
    first = sandbox.start()
    home = sandbox.kint_home
    pid_file = run_dir(home) / PID_FILE
    err = tmp_path / "second.err"
    second = _start_foreground(sandbox, err)
    try:
        assert wait_until(lambda: second.poll() is not None or _retrying(second, pid_file),
                          timeout=60)
        stopped = sandbox.kint("supervisor", "stop", "--json")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert json.loads(stopped.stdout) == {"stopped": True, "pid": first,
                                              "kint_home": str(home),
                                              "kint_home_exists": True,
                                              "started_since": None}, stopped.stdout
        # Exited, or (the fault) serving the home in its place.
        assert wait_until(lambda: second.poll() is not None or running_pid(home) is not None,
                          timeout=60)
        assert running_pid(home) is None
        assert second.wait(timeout=60) == 2
        said = err.read_text()
        assert said.startswith(f"kint: error: a supervisor is already running for {home} "
                               f"(pid {first}); this one exits [BUSY]\n"), said
    finally:
        if second.poll() is None:  # it took the home: stopped as any supervisor of it
            sandbox.shutdown()
            second.wait(timeout=60)


@ON_PROC
def test_a_start_waits_out_a_clients_look_at_the_lock(sandbox, tmp_path):
    """What the retry is for: a client looking whether a supervisor runs holds a shared
    lock on the pid file, and a supervisor starting meanwhile waits for the look to end
    and takes the home, rather than exit as if another supervisor ran."""
    home = sandbox.kint_home
    run_dir(home).mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    pid_file = run_dir(home) / PID_FILE
    look = subprocess.Popen([sys.executable, "-c", LOOKING, str(pid_file)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    started = None
    try:
        assert look.stdout.readline().strip() == "looking"
        started = _start_foreground(sandbox, tmp_path / "started.err")
        assert wait_until(lambda: started.poll() is not None or _retrying(started, pid_file),
                          timeout=60)
        assert started.poll() is None, (tmp_path / "started.err").read_text()
        probe = os.open(pid_file, os.O_RDONLY)
        try:  # the look still holds it alone: nobody has it exclusively
            fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
        finally:
            os.close(probe)
        look.stdin.close()
        look.wait(timeout=30)
        found = wait_until(lambda: (h := holder(home)) is not None and h.serving and h,
                           timeout=60)
        assert found and found.pid == started.pid, found
        assert sandbox.client().ping(10.0)
    finally:
        if look.poll() is None:
            look.stdin.close()
            look.wait(timeout=30)
        if started is not None and started.poll() is None:
            sandbox.shutdown()
            started.wait(timeout=60)


def gone_pid() -> int:
    """The pid of a process that exited and was reaped: no process's (until reused)."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=60)
    return gone.pid


def _held_over_a_gone_supervisors_line(home: Path, named: int | None = None
                                       ) -> tuple[int, int]:
    """The pid lock of `home` held by this process with the file still saying what a
    stopped supervisor wrote (`PID serving`), as the winner of two starts at once held it
    in the instant after it took it (pid_file_lock.hold_pid_file empties the file then, and
    writes its pid once what the last one left is cleared). The held descriptor, and the
    pid the file names: a gone one's, or `named` (one that took a gone supervisor's pid)."""
    run_dir(home).mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    said = gone_pid() if named is None else named
    pid_file = run_dir(home) / PID_FILE
    pid_file.write_text(f"{said} serving\n")
    pid_file.chmod(0o600)
    fd = os.open(pid_file, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd, said


def test_a_loser_never_names_a_gone_supervisor(sandbox, tmp_path):
    """A supervisor refused the lock while the file still names the last, stopped,
    supervisor names no pid (its hint points at `kint supervisor status`): it named that
    gone pid, which some other process may have by now, whenever the winner of two starts
    at once had taken the lock and not yet written its pid (2 races in 40, review36e)."""
    home = sandbox.kint_home
    held, gone = _held_over_a_gone_supervisors_line(home)
    err = tmp_path / "loser.err"
    try:
        loser = _start_foreground(sandbox, err)
        assert loser.wait(timeout=60) == 2
    finally:
        os.close(held)
    said = err.read_text()
    assert said.startswith(f"kint: error: a supervisor is already running for {home}; "
                           "this one exits [BUSY]\n"), (gone, said)


@ON_PROC
def test_a_loser_never_names_a_live_process_that_does_not_hold_the_lock(sandbox, tmp_path):
    """The file names a live process that does not hold the lock (a stranger here, as one
    that took a killed supervisor's pid since): the loser names no pid, where it named any
    live one, and told the user to stop a process that is no supervisor of this home. The
    holder is named only when the kernel says it holds the lock (pidlock.named_holder;
    tests above name a real supervisor, and this process once it writes its pid)."""
    stranger = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                stdin=subprocess.PIPE)
    home = sandbox.kint_home
    err = tmp_path / "loser.err"
    try:
        held, _named = _held_over_a_gone_supervisors_line(home, named=stranger.pid)
        try:
            loser = _start_foreground(sandbox, err)
            assert loser.wait(timeout=60) == 2
        finally:
            os.close(held)
    finally:
        stranger.stdin.close()
        stranger.wait(timeout=60)
    said = err.read_text()
    assert said.startswith(f"kint: error: a supervisor is already running for {home}; "
                           "this one exits [BUSY]\n"), (stranger.pid, said)


@ON_PROC
def test_a_loser_names_the_winner_once_it_writes_its_pid(sandbox, tmp_path):
    """The loser of two starts at once, refused before the winner wrote its pid, looks
    again and names the winner: this process writes its pid once the loser is seen asleep
    with the pid file closed, in its looks' pause (it sleeps nowhere else before it exits;
    were it seen so before its refusal, it would read this pid at once, and the test
    still holds). Before, it exited at once naming the gone supervisor."""
    home = sandbox.kint_home
    held, gone = _held_over_a_gone_supervisors_line(home)
    pid_file = run_dir(home) / PID_FILE
    err = tmp_path / "loser.err"
    try:
        loser = _start_foreground(sandbox, err, KINT_TEST_PID_NAMED_S=RETRY_S)

        def looking_again() -> bool:
            stat = read_stat(loser.pid)
            return (stat is not None and stat.state == "S"
                    and not _has_open(loser, pid_file))

        assert wait_until(lambda: loser.poll() is not None or looking_again(), timeout=60)
        assert loser.poll() is None, (gone, err.read_text())
        os.ftruncate(held, 0)  # as write_holder names the holder
        os.pwrite(held, f"{os.getpid()}\n".encode(), 0)
        assert loser.wait(timeout=60) == 2
    finally:
        os.close(held)
    said = err.read_text()
    assert said.startswith(f"kint: error: a supervisor is already running for {home} "
                           f"(pid {os.getpid()}); this one exits [BUSY]\n"), (gone, said)


# How a start that lost the lock says the one it lost to ended, by that one's last word.
ENDED = {"serving": "served and has ended since",
         "stopped": "was stopped by a signal as it started"}


def _daemon_of(home: Path) -> int | None:
    """The pid of a supervisor daemon of `home` (`python -m kint.supervisor --home HOME`,
    as a client's start spawns it), once it has its own command line; None before."""
    want = f"-m\0kint.supervisor\0--home\0{home}\0".encode()
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                if want in fh.read():
                    return int(name)
        except (OSError, ValueError):
            continue
    return None


def _gone(pid: int) -> bool:
    """Whether `pid` has exited (gone, or a zombie its parent has not reaped yet)."""
    stat = read_stat(pid)
    return stat is None or stat.state in ("Z", "X")


@ON_PROC
@pytest.mark.parametrize("said", [None, "serving", "stopped"],
                         ids=["died_starting", "served", "stopped"])
def test_a_start_that_lost_to_one_that_died_starting_starts_again(sandbox, tmp_path, said):
    """A client's start whose daemon lost the pid lock to another start that takes no start
    lock (`--foreground`, a service manager's) and that died before it served, starts
    again: it said the daemon exited (code 0: "a supervisor is already running") though
    none ran. This process is that other start. A look holds the lock (a shared one, as a
    client's) until the daemon is frozen (SIGSTOP), so the daemon takes it at no moment;
    then this process takes it, names itself, lets the daemon be refused, and lets go
    without ever saying `serving`, as a supervisor that died starting does.
    `served`: it lets go having said `serving`, as one `kint supervisor stop` ended does
    (that stop asks only a supervisor that answers): that stop wins, nothing is started
    again, and the start says so, that the one it gave way to served and has ended, where
    it said its supervisor "exited with code 0 before it answered". `stopped`: having said
    `stopped`, as one a stop signal ended in its start does (a service manager's stop, a
    Ctrl-C; tests/test_pid_lock_stopped.py): that stop wins as well, where it was read as
    died starting and undone, and the start says what is true, that it was stopped as it
    started and running the command again starts one, where it said a supervisor was
    already running (review36i N3). (The loser's stderr was read into `said`, this test's
    parameter: every case wrote that line as the file's state and took the `served` way.)
    The daemon's own retry through the look is the real PID_LOCK_RETRY_S (3 s: `python -m
    kint.supervisor` installs no test timings), and it is frozen within milliseconds of its
    exec, most often before it reaches the lock. Were it ever not frozen within those 3 s,
    it would exit refused and the SIGSTOP or the wait for it fail: the test errors, and
    never passes without what it checks."""
    home = sandbox.kint_home
    run_dir(home).mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    pid_file = run_dir(home) / PID_FILE
    look = os.open(pid_file, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(look, fcntl.LOCK_SH | fcntl.LOCK_NB)
    start = subprocess.Popen([KINT, "supervisor", "start", "--json"], env=sandbox.env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    daemon = held = None
    try:  # `look` and `held`: the descriptors open (None once closed)
        daemon = wait_until(lambda: _daemon_of(home), timeout=60, interval=0.005)
        assert daemon, start.communicate(timeout=60)
        while held is None:  # the look let go only while the daemon is frozen
            os.kill(daemon, signal.SIGSTOP)
            assert wait_until(lambda: process_stopped(daemon), timeout=60)
            fd = os.open(pid_file, os.O_RDWR)
            os.close(look)
            look = None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = fd
            except BlockingIOError:  # frozen inside its own look, or the client's look
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                look = fd
                os.kill(daemon, signal.SIGCONT)
        os.ftruncate(held, 0)  # as write_holder names the holder
        os.pwrite(held, f"{os.getpid()}\n".encode(), 0)
        os.kill(daemon, signal.SIGCONT)
        assert wait_until(lambda: _gone(daemon), timeout=60)
        lost = (run_dir(home) / "supervisor.stderr").read_text()
        assert f"already running for {home} (pid {os.getpid()})" in lost, lost
        if said is not None:  # as mark_serving, or mark_stopped, says so
            os.pwrite(held, f"{os.getpid()} {said}\n".encode(), 0)
        os.close(held)  # lets go: died starting, or stopped
        held = None
        out, err = start.communicate(timeout=120)
        if said is not None:
            assert start.returncode == 2, out + err
            assert running_pid(home) is None
            refused = json.loads(out)
            # It said "a supervisor is already running (pid N)" while none ran, and of the
            # one that served, that the supervisor "exited with code 0 before it answered".
            assert refused["message"] == (
                f"no supervisor runs for {home}: the one that took it first (pid "
                f"{os.getpid()}) " + ENDED[said] + ", and the one started here gave way "
                "to it"), out
            assert refused["hint"] == "run the command again to start one" + (
                "; the supervisor log may say how that one ended"
                if said == "serving" else ""), out
            return
        assert start.returncode == 0, out + err
        started = json.loads(out)
        found = holder(home)
        assert started["started"] is True and found is not None and found.serving
        assert found.pid == started["pid"] != os.getpid(), (started, found)
    finally:
        for fd in (look, held):
            if fd is not None:
                os.close(fd)
        if daemon is not None and not _gone(daemon):  # failed midway: never left frozen
            os.kill(daemon, signal.SIGKILL)
        if start.poll() is None:
            start.kill()
            start.wait(timeout=60)
        if running_pid(home) is not None:
            sandbox.shutdown()
