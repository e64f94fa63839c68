"""A client waiting on a request whose supervisor's pid file is removed while that
supervisor still serves it (lane client33).

A supervisor whose pid file goes steps down: it stops, and its stop drains the requests it
holds before it exits (kint/supervisor/housekeeping.py). The client watched only the pid
file: gone, it said "the supervisor (pid N) exited before answering" within a second,
although process N was alive and answered moments later, the answer thrown away. Now it
waits while process N is still the supervisor it sent to (alive, and begun before the
look that named it: a reused pid's process begins later), and says it exited once it has.
What proves the request reached it is looked for in the socket folder the request went to,
which for a long KINT_HOME may no longer be the home's (kint/client_liveness.py `_reached`).

Real supervisors, workers and files: the request is an agent's `attach` held on the
worker's pool (KINT_TEST_HOLD_ATTACH, tests/support/kint_test_faults.py) while the test
removes the pid file.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import make_sandbox, pid_alive, write_store
from support.attach_in_flight import attach_in_flight
from support.stop_read import stop_read
from kint.client import Client, KintError
from kint.client_liveness import began_by
from kint.front_closed import boot_time
from kint.paths import run_dir
from kint.socket_paths import SOCKET_DIR_RECORD, socket_dir
from kint.supervisor.pidlock import PID_FILE, running_pid


@dataclass
class SteppingDown:
    """A machine whose supervisor steps down (its pid file removed) with an `attach` sent
    on `client` and held in the worker until `hold` goes."""
    sb: Any
    hold: Path
    pid: int
    client: Client
    outcome: dict[str, Any]
    caller: threading.Thread
    # A second client whose socket a ping connected before the pid file went (`pinged`).
    other: Client | None = None

    @property
    def log(self) -> str:
        return (self.sb.kint_home / "supervisor.log").read_text(errors="replace")

    def looked_without_pid_file(self) -> bool:
        """Whether the waiting client has looked at the pid file since it went (its watch
        forgets the run it found at a look that finds no file), or has given up already.
        Read, not looked: a look from this thread would race the caller's."""
        return self.client._holder.run is None or bool(self.outcome)

    def answered_once_let_go(self) -> None:
        """The client still waiting, no error yet; then, the held attach let go, the
        worker's real reply is the call's answer (the supervisor answered it, stepping
        down, and the client did not give up on it)."""
        assert "error" not in self.outcome, self.outcome["error"].message
        self.hold.unlink()
        self.caller.join(60)
        assert not self.caller.is_alive()
        assert "error" not in self.outcome, self.outcome["error"].message
        assert self.outcome["reply"]["sessions"] == 1, self.outcome


@contextmanager
def _stepping_down(tmp_path: Path, held: bool = False, folder_moved: bool = False,
                   pinged: bool = False) -> Iterator[SteppingDown]:
    """The held attach in flight, then the pid file removed; afterwards the hold let go, the
    client closed, and the supervisor gone however the test left it (stopped included).
    `held`: the supervisor stopped (SIGSTOP) before its pid file goes, for the test to
    continue: its once-a-second ownership look then lags, as on a loaded box.
    `folder_moved`: a KINT_HOME too long for a unix socket, whose short socket folder is
    taken (planted open to others), so the supervisor binds in a fresh folder it records in
    `run/socket-dir`; the record goes with the pid file (run/ cleaned), and the home's
    socket folder is the planted one again (kint.socket_paths.socket_dir), not the one the
    request went to. `pinged`: a second client's socket connected (a ping answered on it)
    before the pid file goes, left idle for the test to use."""
    hold = tmp_path / "hold-attach"
    root = tmp_path / ("d" * 60) / ("e" * 60) if folder_moved else tmp_path / "machine"
    sb = make_sandbox(root, KINT_TEST_HOLD_ATTACH=str(hold),
                      KINT_WORKER_HEARTBEAT_TIMEOUT="60")
    client = Client(sb.kint_home, autostart=False)
    other = Client(sb.kint_home, autostart=False) if pinged else None
    pid = caller = None
    planted = socket_dir(sb.kint_home)
    if folder_moved:
        assert planted != run_dir(sb.kint_home)  # the home is too long for run/
        planted.mkdir(mode=0o700)
        planted.chmod(0o755)  # open to others: refused, never used
    try:
        sb.start_entitled()
        if folder_moved:
            assert socket_dir(sb.kint_home) not in (planted, run_dir(sb.kint_home))
        write_store(sb.sibyl_db, tenant=sb.tenant)
        sb.call("status", sb.sibyl_db, timeout_s=60)
        pid = running_pid(sb.kint_home)
        assert pid is not None and pid > 0
        outcome: dict[str, Any] = {}
        hold.touch()
        caller = attach_in_flight(sb, outcome, client=client)
        if other is not None:
            other.call("sup.ping", timeout_s=60)
        if held:
            os.kill(pid, signal.SIGSTOP)
        if folder_moved:  # first: a look between the two would still find the record
            (run_dir(sb.kint_home) / SOCKET_DIR_RECORD).unlink()
        (run_dir(sb.kint_home) / PID_FILE).unlink()
        yield SteppingDown(sb, hold, pid, client, outcome, caller, other)
    finally:
        hold.unlink(missing_ok=True)
        if pid is not None and pid_alive(pid):
            os.kill(pid, signal.SIGCONT)  # stopped, it answers or ends the attach it holds
        if caller is not None:
            # Closed under the caller's receive, the client's socket aborts this process
            # (libzmq's signaler.cpp assertion): a test that leaves it waiting waits here.
            caller.join(60)
        client.close()
        if other is not None:
            other.close()
        sb.shutdown()  # where it failed first; a no-op with its pid file gone
        if pid is not None and pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
        if folder_moved:
            shutil.rmtree(planted, ignore_errors=True)


def test_a_stepping_down_supervisor_still_answers_the_request_it_holds(tmp_path):
    """The pid file removed with an attach held in the worker: the supervisor steps down
    and drains; the client, having looked with the file gone (and the drain begun), is
    still waiting, and gets the worker's real reply once the attach is let go."""
    with _stepping_down(tmp_path) as down:
        sb = down.sb
        sb.wait_for(lambda: "stepping down" in down.log, what="the supervisor stepping down")
        sb.wait_for(lambda: stop_read(down.log),
                    what="the stop read by the worker")
        sb.wait_for(down.looked_without_pid_file, what="a look at the pid file since it went")
        assert pid_alive(down.pid)  # what the client waits on: still there
        down.answered_once_let_go()
        sb.wait_for(lambda: not pid_alive(down.pid), what="the stepped-down supervisor's exit")


def test_a_request_is_waited_on_in_the_socket_folder_it_went_to(tmp_path):
    """The same step-down where the home's socket folder is no longer the one the request
    went to (a long KINT_HOME's fresh folder, its record removed with the pid file): what
    proves the request reached the supervisor (its note of the door it closed for its stop,
    or its socket file) is looked for where the client's socket was connected
    (`_reached`). Looked for in the home's folder of now, which holds neither, the client
    dropped the request ("may not have reached it") while the supervisor answered it."""
    with _stepping_down(tmp_path, folder_moved=True) as down:
        sb, outcome = down.sb, down.outcome
        connected = Path(down.client._connected[0]) if down.client._connected else None
        assert connected is not None and connected != socket_dir(sb.kint_home)
        sb.wait_for(lambda: "stepping down" in down.log, what="the supervisor stepping down")
        sb.wait_for(lambda: stop_read(down.log),
                    what="the stop read by the worker")
        sb.wait_for(down.looked_without_pid_file, what="a look at the pid file since it went")
        sb.wait_for(lambda: down.client._reached_by == down.pid or bool(outcome),
                    what="a look that read its note where the request went")
        down.answered_once_let_go()


def test_a_deadline_says_the_door_closed_in_the_socket_folder_the_request_went_to(tmp_path):
    """The same moved folder, met at a request's deadline (`_drop_if_closed`, called here on
    an idle client whose socket a ping connected before the pid file went; the waiting
    client's own is in a receive on its thread): the stepped-down supervisor's note is
    where the socket connected, so the refusal says it stops and the socket is dropped.
    The liveness look of a request sent on it (`_refuse_if_closed`, sent) reads the same
    note there, and keeps waiting on the connection that supervisor let in.
    Looked for in the home's folder of now (the planted one), it said only "no answer
    from the supervisor within N s" and kept the socket."""
    from kint.front_closed import read_stepped_down_note

    with _stepping_down(tmp_path, folder_moved=True, pinged=True) as down:
        sb, pid, other = down.sb, down.pid, down.other
        assert other is not None and other._connected is not None
        went = Path(other._connected[0])
        assert went != socket_dir(sb.kint_home)
        sb.wait_for(lambda: read_stepped_down_note(went) is not None, interval=0.02,
                    what="its door closed for its stop, where the socket connected")
        closed = read_stepped_down_note(went)
        assert closed is not None and closed.pid == pid
        # A request sent on that socket, its supervisor's door closed for its stop: the
        # liveness look (`_refuse_if_closed`, sent) reads the note where the socket
        # connected, the home's folder holding none, and keeps waiting on a connection
        # that supervisor let in (the ping's, made while its socket file was there).
        # Looked for in the home's folder alone, it found no closed door at all (False).
        assert other._note_of(pid, sent=False) is None  # the home's folder: no note
        assert other._refuse_if_closed(pid, "sup.ping", sent=True) is True
        assert other._sock is not None  # kept: that supervisor answers it
        said = other._drop_if_closed(pid)
        assert said == f"; {closed.refusal().message}", said
        assert other._sock is None  # dropped: nothing queued on it waits for that folder


def test_a_request_is_given_up_on_once_that_supervisor_is_gone(tmp_path):
    """The same wait ends, saying the supervisor exited, once the process it sent to is
    gone (killed here mid-drain): long before the request's 90 s deadline, and the socket
    dropped, so nothing queued on it reaches a later supervisor."""
    with _stepping_down(tmp_path) as down:
        sb, outcome, pid = down.sb, down.outcome, down.pid
        sb.wait_for(lambda: "stepping down" in down.log, what="the supervisor stepping down")
        sb.wait_for(down.looked_without_pid_file, what="a look at the pid file since it went")
        assert "error" not in outcome, outcome["error"].message
        os.kill(pid, signal.SIGKILL)
        down.caller.join(30)  # a look a second: far less than the attach's 90 s
        assert not down.caller.is_alive()
        err = outcome["error"]
        assert err.code == "SUPERVISOR_UNAVAILABLE", err.message
        assert f"the supervisor (pid {pid}) exited before answering attach" in err.message
        assert down.client._sock is None  # dropped: nothing on it goes to the next supervisor


def test_a_stepping_down_supervisor_stopped_mid_drain_is_named_with_how_to_resume_it(
        tmp_path):
    """The same step-down, its supervisor then stopped (SIGSTOP) while it drains: it never
    ends its stop on its own, so after the bound a command gives a stopped one (10 s) the
    client names it, that it stops and is stopped, with `kill -CONT PID`, and the human's
    hint, not "run it again once the supervisor has stopped"."""
    from kint.front_closed import STOPPING_HINT

    with _stepping_down(tmp_path) as down:
        sb, outcome, pid = down.sb, down.outcome, down.pid
        sb.wait_for(lambda: stop_read(down.log),
                    what="the stop read by the worker")
        sb.wait_for(down.looked_without_pid_file, what="a look at the pid file since it went")
        os.kill(pid, signal.SIGSTOP)
        down.caller.join(40)  # named 10 s after a look finds it stopped
        assert not down.caller.is_alive()
        err = outcome["error"]
        assert err.code == "SUPERVISOR_UNAVAILABLE", err.message
        assert err.message.startswith(f"the supervisor (pid {pid}) is stopping"), err.message
        assert f"(it is stopped: `kill -CONT {pid}` resumes it)" in err.message, err.message
        assert err.hint != STOPPING_HINT and f"`kill -CONT {pid}`" in (err.hint or ""), err.hint


def test_a_stopped_stepping_down_supervisor_is_named_stopped_at_every_door(tmp_path):
    """The same step-down stopped (SIGSTOP) mid-drain, met by the doors that read its note
    rather than wait on it: `kint supervisor status` and a command started meanwhile (a
    client that starts no supervisor). They said it stops, to run them again once it has
    stopped, which it never does while stopped: now they name it stopped, with `kill -CONT
    PID` (kint.front_closed.FrontClosed.refusal, which every door says it with)."""
    from kint.front_closed import read_stepped_down_note
    from kint.proc_stat import process_stopped

    with _stepping_down(tmp_path) as down:
        sb, pid = down.sb, down.pid
        sb.wait_for(lambda: read_stepped_down_note(socket_dir(sb.kint_home)) is not None,
                    interval=0.02, what="its door closed for its stop")
        os.kill(pid, signal.SIGSTOP)
        # The premise: the kernel has stopped it (/proc says T), as the doors read it.
        sb.wait_for(lambda: process_stopped(pid), interval=0.02, what="it stopped")
        said = (f"the supervisor (pid {pid}) is stopping: it takes no new clients (it is "
                f"stopped: `kill -CONT {pid}` resumes it)")
        status = sb.kint("supervisor", "status")
        assert status.returncode == 1, (status.returncode, status.stderr)
        assert said in status.stderr and f"`kill -KILL {pid}`" in status.stderr, status.stderr
        assert "once the supervisor has stopped" not in status.stderr, status.stderr
        with pytest.raises(KintError) as refused:
            sb.call("sup.ping")
        assert refused.value.message == f"{said} (sup.ping was not sent)", refused.value.message
        assert (refused.value.hint or "").startswith(f"`kill -CONT {pid}` resumes it"), \
            refused.value.hint


def test_a_request_that_reached_it_is_waited_on_though_a_successor_holds_the_home(tmp_path):
    """An attach held in the supervisor N's worker (it surely reached N), N stopped for a
    moment (a loaded box: its once-a-second ownership look lags) while its pid file goes and
    a successor S takes KINT_HOME, so N leaves no stepping-down note: N's socket file is
    there (S's by now), and the client waits on N, which answers as it steps down. It
    dropped the request ("may not have reached it") once S held the home with no note."""
    with _stepping_down(tmp_path, held=True) as down:
        sb, outcome, client = down.sb, down.outcome, down.client
        successor = sb.start()
        os.kill(down.pid, signal.SIGCONT)
        assert successor != down.pid
        sb.wait_for(lambda: (client._holder.run is not None
                             and client._holder.run[0] == successor) or bool(outcome),
                    what="a look naming the successor")
        sb.wait_for(lambda: stop_read(down.log) or bool(outcome),
                    what="N's stop")
        down.answered_once_let_go()


def test_a_request_that_may_not_have_reached_it_is_not_waited_on(sandbox):
    """The drop-the-socket guard kept: a request sent while the supervisor's socket file
    was not there (moved aside here, the supervisor held by SIGSTOP so that it binds no
    other) sits queued on the client's socket, for whichever supervisor binds there next.
    Its pid file removed, the client does not wait on that supervisor, though its process
    is there: it drops the socket at the next look, and says the supervisor no longer
    holds the home and the request may not have reached it, not that it exited."""
    from kint.socket_paths import FRONT_SOCKET

    sb = sandbox
    pid = sb.start()
    front = socket_dir(sb.kint_home) / FRONT_SOCKET
    aside = front.with_name(FRONT_SOCKET + ".aside")
    outcome: dict[str, Any] = {}
    client = Client(sb.kint_home, autostart=False)

    def ping() -> None:
        try:
            outcome["reply"] = client.call("sup.ping", timeout_s=60)
        except KintError as err:
            outcome["error"] = err

    os.kill(pid, signal.SIGSTOP)
    try:
        front.rename(aside)
        caller = threading.Thread(target=ping, daemon=True)
        caller.start()
        # Sent (queued) to the supervisor the pid file names: its first look is a second on.
        sb.wait_for(lambda: client.sent_to == pid or outcome, interval=0.01,
                    what="the request sent")
        (run_dir(sb.kint_home) / PID_FILE).unlink()
        caller.join(30)  # a look a second, where the stop is named after 10 s
        assert not caller.is_alive()
        err = outcome["error"]
        assert err.code == "SUPERVISOR_UNAVAILABLE", err.message
        assert err.message == (f"the supervisor (pid {pid}) no longer holds {sb.kint_home} "
                               f"and sup.ping may not have reached it; whether sup.ping ran "
                               f"is unknown"), err.message
        assert "starts one" in (err.hint or "")
        assert client._sock is None  # dropped: the queued request goes to nobody
        assert pid_alive(pid)
    finally:
        client.close()
        os.kill(pid, signal.SIGKILL)


def test_a_process_is_the_one_looked_at_only_if_it_began_by_the_look():
    """Whether process `pid` is the supervisor a look named, by when it began: one begun
    after the look has the pid of one that exited since (reused), and is not waited on;
    nor is a pid nobody has."""
    before = subprocess.Popen(["sleep", "30"])
    try:
        looked = boot_time()
        after = subprocess.Popen(["sleep", "30"])
        try:
            assert began_by(before.pid, looked)
            assert began_by(os.getpid(), looked)
            # Ticks are 10 ms: a process begun within a tick of the look could read as
            # begun at it. Looked at a tick before, the later process began after.
            assert not began_by(after.pid, looked - 0.02)
        finally:
            after.kill()
            after.wait()
        assert not began_by(after.pid, boot_time())  # reaped: no such process
    finally:
        before.kill()
        before.wait()



def test_the_client_does_not_wait_on_a_process_given_the_pid_after_its_send(sandbox):
    """The client's own use of `began_by`: its request went (`_named_at`) before process
    P began, so P, on the pid the request went to, is a later process given that pid
    (the supervisor exited since): said to have exited, never taken for the supervisor
    still there ("no longer holds ... may not have reached it"). A process begun by the
    send is taken for it. No supervisor runs in the home: its pid file names nobody."""
    client = Client(sandbox.kint_home, autostart=False)
    try:
        # Sent 50 ms ago: past the 10 ms tick /proc counts a start time in.
        client._named_at = time.monotonic() - 0.05
        later = subprocess.Popen(["sleep", "30"])
        try:
            with pytest.raises(KintError) as refused:
                client._check_serving(later.pid, "x")
            assert refused.value.message == (f"the supervisor (pid {later.pid}) exited before "
                                             f"answering x; whether x ran is unknown")
            client._named_at = time.monotonic()  # sent after it began: it is the one
            with pytest.raises(KintError) as refused:  # no socket: nothing says it got it
                client._check_serving(later.pid, "x")
            assert refused.value.message.startswith(
                f"the supervisor (pid {later.pid}) no longer holds {sandbox.kint_home}")
        finally:
            later.kill()
            later.wait()
    finally:
        client.close()


def test_a_pid_file_that_cannot_be_read_is_not_said_to_name_another(sandbox):
    """The pid file still held (by the supervisor it named, as far as anyone can tell) but
    no longer readable as a pid (-1): the client does not wait on a request nothing proves
    reached that supervisor, but it says the supervisor may no longer hold the home, as
    its pid file cannot be read, not that it no longer does."""
    sb = sandbox
    pid = sb.start()
    client = Client(sb.kint_home, autostart=False)
    try:
        client._named_at = time.monotonic()  # sent to it, on no socket: not proved reached
        with open(run_dir(sb.kint_home) / PID_FILE, "r+") as pid_file:  # its lock stays
            pid_file.write("garbled\n")
        assert client.serving_pid() == -1
        with pytest.raises(KintError) as refused:
            client._check_serving(pid, "x")
        assert refused.value.message == (
            f"the supervisor (pid {pid}) may no longer hold {sb.kint_home} (its pid file "
            f"cannot be read) and x may not have reached it; whether x ran is unknown")
    finally:
        client.close()
        os.kill(pid, signal.SIGKILL)
