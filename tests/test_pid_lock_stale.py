"""A supervisor killed in the instant after it took KINT_HOME's pid lock, before its file
names it, with real processes: what the last supervisor wrote there is not left as its
last words (pid_file_lock.hold_pid_file empties the file as the lock is taken).

Before, the file still said what the one before wrote until the new one named itself: a
supervisor stopped as it started long ago (`X stopped`), then a winner killed in that
instant (SIGKILL, the OOM killer), and a start whose daemon lost the lock to it refused
naming X, `the one that took it first (pid X) was stopped by a signal as it started`, a
pid long gone, and started none in the place of one that died starting (review36j N2).

A file whose first word is no pid (garbled) has the start name none, where it said
`(pid -1)` (review36j N3), and so has the refusal of a supervisor that holds the lock over
such a file and does not answer, where its hint said `kill -1` (review37e M2).

The winner is held in that instant at an event (tests/support/run_supervisor_start_held.py
`--at lock` prints `held` there), and the client's daemon is frozen (SIGSTOP) while the
winner takes the lock, as in tests/test_pid_lock_loser.py: no guessed times."""

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
from kint.proc_stat import process_stopped
from kint.socket_paths import front_address
from kint.supervisor.pidlock import PID_FILE, holder, running_pid
from kint.supervisor.start_refusals import start_ended
from test_pid_lock_loser import ON_PROC, _daemon_of, _gone, gone_pid


def _frozen_with_the_lock_free(daemon: int, pid_file, look: int) -> None:
    """Freeze `daemon` (SIGSTOP) at a moment it holds no lock on `pid_file`, and let go of
    this process's shared `look` (closed): frozen inside its own look at the lock, it
    would keep the next supervisor from taking it, so it is let go on and frozen again."""
    while True:
        os.kill(daemon, signal.SIGSTOP)
        assert wait_until(lambda: process_stopped(daemon), timeout=60)
        probe = os.open(pid_file, os.O_RDWR)
        os.close(look)
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.close(probe)  # free, and nobody but a client's instant look takes it now
            return
        except BlockingIOError:  # the daemon's look, or the client's
            fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
            look = probe
            os.kill(daemon, signal.SIGCONT)


@ON_PROC
def test_a_winner_killed_before_it_names_itself_leaves_no_pid_of_another(sandbox, tmp_path):
    """`kint supervisor start`'s daemon loses the pid lock to a `--foreground` start (which
    takes no start lock) killed before its file names it, over a file that said a long-gone
    supervisor was stopped as it started: the file says nothing while the winner holds it,
    so the start reads a death in the start and starts its supervisor again, serving, where
    it refused naming the gone pid with none running."""
    home = sandbox.kint_home
    run_dir(home).mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    pid_file = run_dir(home) / PID_FILE
    gone = gone_pid()
    pid_file.write_text(f"{gone} stopped\n")
    pid_file.chmod(0o600)
    look = os.open(pid_file, os.O_RDWR)
    fcntl.flock(look, fcntl.LOCK_SH | fcntl.LOCK_NB)  # as a client's look, till it is frozen
    start = subprocess.Popen([KINT, "supervisor", "start", "--json"], env=sandbox.env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    daemon = winner = None
    try:
        daemon = wait_until(lambda: _daemon_of(home), timeout=60, interval=0.005)
        assert daemon, start.communicate(timeout=60)
        _frozen_with_the_lock_free(daemon, pid_file, look)
        winner = subprocess.Popen(
            [sys.executable, str(SUPPORT / "run_supervisor_start_held.py"), "--home",
             str(home), "--at", "lock"], env=sandbox.env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        assert winner.stdout.readline().strip() == "held", winner.communicate(timeout=60)
        assert pid_file.read_text() == "", (gone, pid_file.read_text())
        os.kill(daemon, signal.SIGCONT)
        assert wait_until(lambda: _gone(daemon), timeout=60)
        lost = (run_dir(home) / "supervisor.stderr").read_text()
        assert f"already running for {home}; this one exits" in lost, lost
        winner.kill()  # in the instant before it names itself
        winner.communicate(timeout=60)
        out, err = start.communicate(timeout=120)
        assert start.returncode == 0, out + err
        started = json.loads(out)
        found = holder(home)
        assert started["started"] is True and found is not None and found.serving
        assert found.pid == started["pid"] not in (gone, winner.pid, daemon), (started, found)
    finally:
        if daemon is not None and not _gone(daemon):  # failed midway: never left frozen
            os.kill(daemon, signal.SIGKILL)
        if winner is not None and winner.poll() is None:
            winner.kill()
            winner.communicate(timeout=60)
        if start.poll() is None:
            start.kill()
            start.wait(timeout=60)
        if running_pid(home) is not None:
            sandbox.shutdown()


@pytest.mark.parametrize("said", ["stopped", "serving"])
def test_a_garbled_pid_is_named_by_no_pid(sandbox, said):
    """The start that lost the lock to a supervisor that let go of it, its file's first
    word no pid, says what became of that one naming no pid, where it said `(pid -1)`. Read
    from a real pid file nobody holds, as the start reads it once its daemon exited."""
    home = sandbox.kint_home
    run_dir(home).mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    pid_file = run_dir(home) / PID_FILE
    pid_file.write_text(f"4x2 {said}\n")
    pid_file.chmod(0o600)
    refused = start_ended(home, started=os.getpid(), code=0)
    assert refused is not None
    ended = ("was stopped by a signal as it started" if said == "stopped"
             else "served and has ended since")
    assert str(refused) == (f"no supervisor runs for {home}: the one that took it first "
                            f"{ended}, and the one started here gave way to it"), refused


# Holds the pid lock, its file saying argv[2] (`{pid}`: this process's pid), until its stdin
# closes, as a supervisor holds it.
HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.ftruncate(fd, 0)
os.pwrite(fd, sys.argv[2].replace("{pid}", str(os.getpid())).encode(), 0)
print("held", flush=True)
sys.stdin.read()
"""


def _held(home: Path, says: str) -> subprocess.Popen[str]:
    """A process holding `home`'s pid lock, its file saying `says` (HOLDER's argv[2])."""
    run_dir(home).mkdir(parents=True, mode=0o700, exist_ok=True)
    home.chmod(0o700)
    held = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir(home) / PID_FILE),
                             says], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert held.stdout.readline().strip() == "held"
    return held


def _let_go(held: subprocess.Popen[str]) -> None:
    held.stdin.close()
    held.wait(timeout=60)


@pytest.mark.parametrize("command", [("supervisor", "status"), ("status",)],
                         ids=["supervisor_status", "status"])
def test_a_silent_holder_with_a_garbled_pid_is_never_named_nor_killed(sandbox, command):
    """A supervisor that holds the pid lock, says it serves and does not answer, its pid
    file's first word no pid: the refusal names no pid and finds the holder by its open
    pid file (`lsof`), where it said `the supervisor (pid -1)` and `` `kill -1` lets the
    next command start a new one``, which in a shell signals every process of the user
    (review37e M2). `kint supervisor status` says it at once (start_refusals.
    unanswering_supervisor); `kint status` at the end of its start's wait (autostart), cut
    to a second (KINT_TEST_UNREACHABLE_AFTER_S through tests/support/run_kint.py)."""
    home = sandbox.kint_home
    pid_file = run_dir(home) / PID_FILE
    # No real supervisor writes such a file: this process stands in for one whose file is.
    held = _held(home, "4x2 serving\n")
    try:
        said = subprocess.run(
            [sys.executable, str(SUPPORT / "run_kint.py"), *command, "--json"],
            env={**sandbox.env, "KINT_TEST_UNREACHABLE_AFTER_S": "1"}, text=True,
            capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    finally:
        _let_go(held)
    refused = json.loads(said.stdout)
    assert "(pid -1)" not in said.stdout and "kill -1" not in said.stdout, said.stdout
    assert refused["error"] == "SUPERVISOR_UNAVAILABLE", said.stdout
    assert refused["message"] == (f"a supervisor runs but does not answer on "
                                  f"{front_address(home)}, and its pid file names no pid"
                                  ), said.stdout
    assert refused["hint"] == (f"see {home / 'supervisor.log'}; find it with `lsof {pid_file}` "
                               f"(or `fuser {pid_file}`) and end it, and the next command "
                               "starts a new one"), said.stdout


def test_without_proc_a_loser_names_the_live_pid_the_held_file_names(sandbox, tmp_path,
                                                                    monkeypatch):
    """Where /proc cannot say who holds the lock (macOS; here lock_table.PROC points at a
    folder that is not there), a refused supervisor names the live pid the held file names,
    at once, rather than none after waiting out NAMED_WITHIN_S at every refused start
    (review37e S1). Safe now that the file is emptied as the lock is taken: a held file names its
    holder's own pid. A pid that is gone is still never named (the file read again until
    NAMED_WITHIN_S, here cut, runs out), nor is the none of a garbled first word."""
    from kint.supervisor import pidlock
    from kint import lock_table

    monkeypatch.setattr(lock_table, "PROC", str(tmp_path / "no-proc"))
    monkeypatch.setattr(pidlock, "NAMED_WITHIN_S", 0.2)
    home = sandbox.kint_home
    held = _held(home, "{pid}\n")
    try:
        assert pidlock.named_holder(home) == held.pid
    finally:
        _let_go(held)
    for says in (f"{gone_pid()} serving\n", "4x2 serving\n"):
        held = _held(home, says)
        try:
            assert pidlock.named_holder(home) is None, says
        finally:
            _let_go(held)
