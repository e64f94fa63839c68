"""`kint supervisor start` beside a supervisor that is stopping (lane follow33, an older
note: "a start beside a stopping supervisor waiting 10 s").

A stopping supervisor closes its door as its stop begins, answers no new client, and lets
go of KINT_HOME once its workers have stopped: within their grace for an op in flight (10
s, SIGKILLed at 15 s), then its own close. Measured with an op held through the grace, its
pid lock was freed 11.2 to 11.4 s after the door closed. The start's wait
(kint.supervisor.autostart) took it for a silent supervisor and refused it at 10 s, "the
supervisor (pid N) is stopping", a second before the stop ended. Now a supervisor whose
note says it stops, and that is not stopped (SIGSTOP), is waited for to the start's own
deadline (30 s), and the start starts the next one as soon as it lets go (a look every
20 ms: within a look of the release, as measured). Seen stopping once, it is waited for to
the end, its note gone too: the stop's end removes it a moment before the lock goes. One
stopped (SIGSTOP) mid-stop never ends it, and is refused at the bound as before.

Real parts: the test supervisor and its worker, an `attach` held on the worker's pool
(KINT_TEST_HOLD_ATTACH, tests/support/kint_test_faults.py) through its stop grace, the
stop asked as `kint supervisor stop` asks it, and `kint supervisor start` through the
test launcher, whose 10 s for a silent supervisor is cut to 1 s
(KINT_TEST_UNREACHABLE_AFTER_S): the stop outlasts it by seconds, whatever the box's load.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

from conftest import SUPPORT, make_sandbox, pid_alive, write_store
from kint.client import KintError
from kint.client import Client
from kint.front_closed import STOPPING_HINT, FrontClosed, read_note, remove_note, write_note
from kint.paths import ensure_private_dir, run_dir
from kint.proc_stat import process_stopped
from kint.socket_paths import prepare_socket_dir, socket_dir
from kint.supervisor import autostart
from kint.supervisor.pidlock import PID_FILE, running_pid
from support.attach_in_flight import attach_in_flight
from support.closed_by_hand import closed_by_hand
from support.start_lock import start_lock_held

# Far past the start's 1 s here, far short of its own 30 s: what it tells apart is a start
# that waited on a stop that cannot end.
STOPPED_REFUSAL_MAX_S = 20


@contextmanager
def _stopping(tmp_path, **env: str) -> Iterator[tuple[Any, int, dict, subprocess.Popen]]:
    """A real supervisor stopping, held in its stop by an `attach` its worker finishes
    through its grace (seconds yet), and `kint supervisor start` (with `env`) in its wait
    beside it: (the machine, the stopping supervisor's pid, the stop's outcome, the
    start). Afterwards the hold let go, the start and both supervisors gone."""
    hold = tmp_path / "hold-attach"
    sb = make_sandbox(tmp_path / "machine", KINT_TEST_HOLD_ATTACH=str(hold),
                      KINT_WORKER_HEARTBEAT_TIMEOUT="60")
    start = None
    old = None
    try:
        sb.start_entitled()
        old = running_pid(sb.kint_home)
        assert old is not None and old > 0
        write_store(sb.sibyl_db, tenant=sb.tenant)
        sb.call("status", sb.sibyl_db, timeout_s=60)
        hold.touch()
        attach_in_flight(sb, {}, timeout_s=90)  # held through the worker's stop grace

        stopped: dict = {}

        def stop() -> None:
            try:
                stopped["reply"] = sb.call("sup.stop", timeout_s=60)
            except KintError as err:
                stopped["error"] = err

        threading.Thread(target=stop, daemon=True).start()
        folder = socket_dir(sb.kint_home)
        sb.wait_for(lambda: (note := read_note(folder, old)) is not None and note.stopping,
                    interval=0.02, what="the door closed for the stop")
        start = subprocess.Popen([sys.executable, str(SUPPORT / "run_kint.py"), "supervisor",
                                  "start"], env={**sb.env, "KINT_TEST_UNREACHABLE_AFTER_S": "1",
                                                 **env},
                                 text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 stdin=subprocess.DEVNULL)
        sb.wait_for(lambda: start_lock_held(sb) or start.poll() is not None, interval=0.02,
                    what="the start in its wait")
        # The premise: the start waits beside the old supervisor, which still holds the
        # home, its worker held for seconds yet (its grace) where the start's bound is 1 s.
        assert running_pid(sb.kint_home) == old and start.poll() is None
        yield sb, old, stopped, start
    finally:
        hold.unlink(missing_ok=True)
        if start is not None and start.poll() is None:
            start.kill()
            start.communicate()
        sb.shutdown()
        if old is not None and pid_alive(old):
            os.kill(old, signal.SIGKILL)


def test_a_start_beside_a_stop_outlasting_the_silent_bound_waits_and_starts_one(tmp_path):
    with _stopping(tmp_path) as (sb, old, stopped, start):
        out, err = start.communicate(timeout=90)
        assert start.returncode == 0, (start.returncode, out, err)
        new = running_pid(sb.kint_home)
        assert new not in (None, old) and out == f"supervisor started, pid {new} " \
                                                 f"({sb.kint_home})\n", out
        assert "is stopping" not in err, err
        # Said as the wait begins, where it waited up to 30 s unsaid.
        assert err.startswith(f"kint: waiting up to 30s for the supervisor (pid {old}) to "
                              f"finish stopping\n"), err
        assert not pid_alive(old)
        assert "reply" in stopped, stopped  # the stop was answered, its workers stopped


def test_a_start_beside_a_stop_that_outlasts_its_wait_says_it_has_not_stopped(tmp_path):
    """The same stop, where the start's wait (30 s, cut to 3 s here) runs out first, past
    the most a stop takes (STOP_BOUND_S, cut to 2 s), as on a stop that never ends:
    refused naming the pid, that it has not stopped within the span it was seen stopping,
    the log and `kill -KILL PID` (a SIGTERM changes nothing on one stopping already),
    where it said to run the start again once it had stopped."""
    with _stopping(tmp_path, KINT_TEST_START_WAIT_S="3", KINT_TEST_STOP_BOUND_S="2") as (
            sb, old, _, start):
        out, err = start.communicate(timeout=90)
        # The premise first: still in its stop (a box loaded past the stop's ~11 s fails
        # here, not as a refusal that did not come).
        assert running_pid(sb.kint_home) == old, (start.returncode, out, err)
        assert start.returncode == 2, (start.returncode, out, err)
        assert err.startswith(f"kint: waiting up to 3s for the supervisor (pid {old}) to "
                              f"finish stopping\n"), err
        said = re.search(rf"the supervisor \(pid {old}\) is stopping and has not stopped "
                         r"within ([0-9.]+)s: it takes no new clients", err)
        assert said is not None and 2 <= float(said[1]) <= 3, err
        assert f"`kill -KILL {old}` ends it now" in err and "once the supervisor has " \
                                                          "stopped" not in err, err


def test_a_start_beside_a_stopping_supervisor_that_is_stopped_is_refused_at_the_bound(
        tmp_path):
    """One stopped (SIGSTOP) mid-stop never ends its stop: the start does not wait its 30 s
    on it, but refuses it once it has been silent for the bound (1 s here), naming it as
    stopping and how to resume it, as before: its line says it waits that bound, and that
    it is stopped, and the hint gives `kill -CONT` or `kill -KILL`, never a plain `kill`
    (its SIGTERM would pend); under --json neither the line nor anything else is on
    stderr, and the line is not on stdout. Its door closed for the stop by hand, the
    supervisor held (tests/support/closed_by_hand.py): a stop cannot be held at its
    start otherwise."""
    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        now = time.time()
        runs = {}
        with closed_by_hand(pid, socket_dir(sb.kint_home),
                            FrontClosed(pid, 30, 1024, 1, now, now - 5, True)):
            # The premise: the kernel has stopped it (/proc says T), as the start reads it.
            sb.wait_for(lambda: process_stopped(pid), interval=0.02, what="it stopped")
            for args in ((), ("--json",)):
                runs[args] = subprocess.run(
                    [sys.executable, str(SUPPORT / "run_kint.py"), "supervisor", "start",
                     *args], env={**sb.env, "KINT_TEST_UNREACHABLE_AFTER_S": "1"},
                    text=True, capture_output=True, stdin=subprocess.DEVNULL,
                    timeout=STOPPED_REFUSAL_MAX_S)
        out = runs[()]
        assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
        assert out.stderr.startswith(
            f"kint: waiting up to 1s for the supervisor (pid {pid}) to finish stopping (it "
            f"is stopped: `kill -CONT {pid}` resumes it)\n"), out.stderr
        assert (f"the supervisor (pid {pid}) is stopping: it takes no new clients (it is "
                f"stopped: `kill -CONT {pid}` resumes it)") in out.stderr, out.stderr
        assert f"`kill -KILL {pid}`" in out.stderr and f"`kill {pid}`" not in out.stderr, \
            out.stderr
        quiet = runs[("--json",)]
        assert quiet.returncode == 2, (quiet.returncode, quiet.stdout, quiet.stderr)
        assert quiet.stderr == "" and "waiting up to" not in quiet.stdout, quiet
        assert json.loads(quiet.stdout)["error"] == "SUPERVISOR_UNAVAILABLE", quiet.stdout
        assert running_pid(sb.kint_home) == pid
    finally:
        sb.shutdown()


def _hold_as_stopping(home) -> tuple[Any, int]:
    """This process as a stopping supervisor of `home`: the pid lock held, serving, and
    the note of a door closed for its stop. (The socket folder, the pid file's descriptor:
    closing it lets go of the home.)"""
    ensure_private_dir(run_dir(home))
    folder, _ = prepare_socket_dir(home)
    fd = os.open(run_dir(home) / PID_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, f"{os.getpid()} serving\n".encode())
    now = time.time()
    write_note(folder, FrontClosed(os.getpid(), 10, 1024, 1, now, now - 5, True))
    return folder, fd


@contextmanager
def _waiting_beside_stand_in(tmp_path, monkeypatch) -> Iterator[tuple[Any, Any, Client]]:
    """A machine's environment in this process, this process its stopping supervisor
    (`_hold_as_stopping`), a client that starts none, and a silent bound of 0.2 s: the
    home, the socket folder and the client; all let go after."""
    sb = make_sandbox(tmp_path)
    for name, value in sb.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(autostart, "UNREACHABLE_AFTER_S", 0.2)
    folder, fd = _hold_as_stopping(sb.kint_home)
    client = Client(sb.kint_home, autostart=False)
    try:
        yield sb.kint_home, folder, client
    finally:
        os.close(fd)
        client.close()
        sb.shutdown()


def test_a_command_with_seconds_left_beside_a_stop_is_told_it_stops_not_to_kill_it(
        tmp_path, monkeypatch):
    """A command's autostart waits what is left of the command's bound (client.py), often
    less than a stop takes (STOP_BOUND_S: its workers' stop grace and the stop's end). Its wait
    running out on a stop seen for less than that is no stop that does not end: it says
    the supervisor stops and to run it again once it has, the old words, where it said
    the stop had not ended, with `kill -KILL` of a stop within its normal bound. Seen for
    the bound (cut here), the wait says so. The stopping supervisor is the stand-in of the
    test below (a real one's stop cannot be held at a chosen length); the wait and its
    looks are real."""
    me = os.getpid()
    with _waiting_beside_stand_in(tmp_path, monkeypatch) as (home, _, client):
        with pytest.raises(autostart.SupervisorNotReachable) as within:
            autostart.ensure_running(home, client.ping, wait_s=0.6)
        assert str(within.value) == f"the supervisor (pid {me}) is stopping: it takes no " \
                                    "new clients", within.value
        assert within.value.hint == STOPPING_HINT and "kill" not in within.value.hint
        monkeypatch.setattr(autostart, "STOP_BOUND_S", 0.4)
        with pytest.raises(autostart.SupervisorNotReachable) as past:
            autostart.ensure_running(home, client.ping, wait_s=0.6)
        said = re.fullmatch(rf"the supervisor \(pid {me}\) is stopping and has not stopped "
                            r"within ([0-9.]+)s: it takes no new clients", str(past.value))
        assert said is not None and float(said[1]) >= 0.4, past.value  # past the stop's bound
        assert f"`kill -KILL {me}` ends it now" in past.value.hint, past.value.hint


def test_a_stop_seen_whose_note_is_gone_at_the_end_of_the_wait_is_still_said_stopping(
        tmp_path, monkeypatch):
    """A stop's end removes its note a moment before the supervisor lets go of the home.
    The wait's end read the note again, and in that moment, the note gone, said the
    supervisor "runs but does not answer" with a plain `kill PID`: of a supervisor seen
    stopping, whose SIGTERM only sets what its stop has set. It says the note it saw. The
    note is removed right after the wait's look that sees it (that look wrapped), as the
    stop's end would, so the moment is there every run; the stand-in supervisor and the
    wait's looks are the test above's."""
    noted = autostart.stop_noted
    me = os.getpid()
    with _waiting_beside_stand_in(tmp_path, monkeypatch) as (home, folder, client):

        def seen_then_removed(at, pid: int):  # noqa: ANN202 - what `stop_noted` returns
            seen = noted(at, pid)
            if seen:
                remove_note(folder)  # the stop's end, between the look and the wait's end
            return seen

        monkeypatch.setattr(autostart, "stop_noted", seen_then_removed)
        with pytest.raises(autostart.SupervisorNotReachable) as said:
            autostart.ensure_running(home, client.ping, wait_s=0.6)
        assert read_note(folder, me) is None  # the premise: the note was gone at the end
        assert str(said.value) == f"the supervisor (pid {me}) is stopping: it takes no " \
                                  "new clients", said.value
        assert said.value.hint == STOPPING_HINT and "kill" not in said.value.hint


def _looked_past(looks: list[float], since: float, bound_s: float) -> bool:
    """Whether the wait has looked twice since `bound_s` past `since` (its clock)."""
    return sum(1 for at in looks if at >= since + bound_s) >= 2


def test_a_stop_whose_note_goes_before_it_lets_go_is_still_waited_for(tmp_path, monkeypatch):
    """A stop's end removes its note (`FrontDoorStop.shut`) before the supervisor lets go
    of KINT_HOME (its sockets and context closed first: up to their half-second linger).
    A look in between found a holder silent with no note, and refused the start, "the
    supervisor (pid N) runs but does not answer", a moment before the stop ended (seen in
    one run of three of the test above). One seen stopping is waited for to the end.

    The stopping supervisor is a stand-in (this process holds the pid lock, serving, and
    writes and removes the note as the door does): a real one cannot be held in that
    moment, for one held by SIGSTOP is, rightly, refused at the bound. The wait, its
    looks (the real ping, timed) and the supervisor it starts once the lock goes are real,
    the start under the machine's environment."""
    sb = make_sandbox(tmp_path)
    for name, value in sb.env.items():
        monkeypatch.setenv(name, value)
    bound_s = 0.2
    monkeypatch.setattr(autostart, "UNREACHABLE_AFTER_S", bound_s)
    home = sb.kint_home
    folder, fd = _hold_as_stopping(home)
    looks: list[float] = []
    outcome: dict = {}
    client = Client(home, autostart=False)

    def ping(timeout_s: float) -> bool:
        looks.append(time.monotonic())
        return client.ping(timeout_s)

    def wait() -> None:
        try:
            autostart.ensure_running(home, ping, wait_s=60)
            outcome["started"] = True
        except autostart.SupervisorNotReachable as err:
            outcome["error"] = err

    waiter = threading.Thread(target=wait, daemon=True)
    try:
        waiter.start()
        sb.wait_for(lambda: looks and _looked_past(looks, looks[0], bound_s) or outcome,
                    interval=0.02, what="the wait past its bound, the note read")
        assert not outcome, outcome
        remove_note(folder)  # the stop's end, the lock still held
        gone = time.monotonic()
        sb.wait_for(lambda: _looked_past(looks, gone, bound_s) or outcome, interval=0.02,
                    what="looks with the note gone")
        assert not outcome, outcome
        os.close(fd)  # lets go of the home: the wait starts the next supervisor
        fd = -1
        waiter.join(60)
        assert outcome == {"started": True}, outcome
        assert running_pid(home) not in (None, os.getpid())
    finally:
        if fd >= 0:
            os.close(fd)
        waiter.join(60)
        client.close()
        sb.shutdown()
