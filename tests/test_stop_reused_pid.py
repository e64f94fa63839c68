"""A stepped-down supervisor killed mid-stop, its pid since given to another process, and a
stop that meant one supervisor while another answers: session 28's leftovers, lane door29.

- a stepped-down supervisor's note (its pid file removed) whose pid now names a process
  that began after that supervisor took its home is a leftover: "no supervisor is
  running", not "is stopping";
- `kint supervisor stop` whose look at the pid file named nobody (unreadable, -1) names the
  supervisor its ping found: one started since with the same pid is not stopped, and the
  stop says so (exit 0);
- (review29e) one whose pid file still names nobody after PID_WRITE_GRACE_S, its ping
  unanswered, sends no unnamed stop: refused, exit 2; one written within it is named.

Real supervisors throughout. A pid cannot be given back on purpose here: where a reused
pid is needed, the note names a process of the test's own, started after the supervisor
took its home, as a reused pid's process would have.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import make_sandbox, pid_alive
from kint.client import Client, KintError
from kint.front_closed import CLOSED_SOCKET, NOTE, FrontClosed, write_note
from kint.paths import run_dir
from kint.socket_paths import socket_dir
from kint.supervisor.pidlock import PID_FILE
from support.closed_by_hand import close_by_hand


def _killed_mid_step_down(sb) -> FrontClosed:
    """A real supervisor whose pid file was removed, held (SIGSTOP) with its door closed
    for its stop as its step-down closes it, then SIGKILLed: its note and moved socket
    left behind, as one killed mid-step-down leaves them. The note, as it wrote it."""
    pid = sb.start()
    with Client(sb.kint_home, autostart=False) as client:
        answer = client.ping_answer(10)
    assert answer is not None and answer["pid"] == pid, answer
    folder = socket_dir(sb.kint_home)
    os.kill(pid, signal.SIGSTOP)
    (run_dir(sb.kint_home) / PID_FILE).unlink()
    note = FrontClosed(pid, 30, 1024, 0, answer["started"] + 1, answer["started"], True,
                       answer["started_boot"] + 1, answer["started_boot"])
    close_by_hand(folder, note)
    os.kill(pid, signal.SIGKILL)
    sb.wait_for(lambda: not pid_alive(pid), what="the supervisor killed")
    assert (folder / NOTE).exists() and (folder / CLOSED_SOCKET).exists()
    return note


def _ping_refusal(sb) -> KintError:
    with Client(sb.kint_home, autostart=False) as client, \
            pytest.raises(KintError) as refused:
        client.call("sup.ping", timeout_s=10)
    return refused.value


def test_a_killed_stepped_down_supervisors_reused_pid_is_not_stopping(tmp_path):
    """Before, the note was believed while any process had its pid: a client was told
    "the supervisor (pid N) is stopping" until the next start cleared the note. A
    process that began after the note's supervisor took its home is not that supervisor;
    one that began before it (this test's own process) may be, and is still believed."""
    sb = make_sandbox(tmp_path)
    later = None
    try:
        note = _killed_mid_step_down(sb)
        folder = socket_dir(sb.kint_home)
        later = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        write_note(folder, note._replace(pid=later.pid))
        err = _ping_refusal(sb)
        assert "no supervisor is running" in err.message, err
        out = sb.kint("supervisor", "status")
        assert out.returncode == 3, out.stdout + out.stderr
        assert "is stopping" not in out.stderr, out.stderr
        # The check keeps what it was for: a process that began before the note's
        # supervisor took its home may be that supervisor, still stopping.
        write_note(folder, note._replace(pid=os.getpid()))
        err = _ping_refusal(sb)
        assert f"the supervisor (pid {os.getpid()}) is stopping" in err.message, err
    finally:
        if later is not None:
            later.kill()
            later.wait(30)
        sb.shutdown()


def test_a_reused_pid_whose_process_name_is_cut_mid_character_is_not_stopping(tmp_path):
    """The kernel keeps 15 bytes of a process's name, so a name of é's (two bytes each) is
    cut inside its eighth: /proc/PID/stat then holds bytes that are not UTF-8. Read as
    strict UTF-8, the start time was "not known" and the note was believed again ("the
    supervisor (pid N) is stopping"); a stopped such process was not said stopped either
    (the read raised). Both read it now (kint.proc_stat). A copy of /bin/sleep so named
    stands for the process given the killed supervisor's pid."""
    from kint.front_closed import stopped_note

    sb = make_sandbox(tmp_path)
    later = None
    try:
        note = _killed_mid_step_down(sb)
        sleeper = tmp_path / ("\u00e9" * 9)
        shutil.copy("/bin/sleep", sleeper)
        later = subprocess.Popen([str(sleeper), "120"])
        sb.wait_for(lambda: _comm_bytes(later.pid) == "\u00e9".encode() * 7 + b"\xc3",
                    what="the cut name")
        write_note(socket_dir(sb.kint_home), note._replace(pid=later.pid))
        err = _ping_refusal(sb)
        assert "no supervisor is running" in err.message, err
        os.kill(later.pid, signal.SIGSTOP)
        sb.wait_for(lambda: "(it is stopped" in stopped_note(later.pid),
                    what="the cut name seen stopped")
    finally:
        if later is not None:
            later.kill()
            later.wait(30)
        sb.shutdown()


def _comm_bytes(pid: int) -> bytes:
    with open(f"/proc/{pid}/comm", "rb") as fh:
        return fh.read().rstrip(b"\n")


def _named_and_serving(sb, out: str, successor: int) -> None:
    """The stop said the supervisor it meant stopped and named `successor`, which serves."""
    assert out.startswith("supervisor stopped\n"), out
    assert f"another supervisor (pid {successor}) has started since" in out, out
    assert pid_alive(successor)
    with Client(sb.kint_home, autostart=False) as client:
        assert client.call("sup.ping", timeout_s=10)["pid"] == successor


def test_a_stop_whose_pid_file_named_nobody_stops_only_the_one_its_ping_found(
        tmp_path, monkeypatch, capsys):
    """The pid file did not read as the stop looked (-1: a supervisor that has just taken
    the home writes its pid a moment later), its ping found one supervisor, and another
    stop ended that one; the one started since (with the same pid, as in a container)
    took the home. Before, the stop named nobody, so whichever supervisor read it stopped:
    the successor, unasked, and the stop said "supervisor stopped". Now it names the one
    its ping found: the successor refuses it and keeps running, and the stop says the one
    it meant is gone and names the successor (exit 0). The supervisor is real; its pid
    file reads as nothing for the stop's first look and is written back as the ping is
    answered (the successor's pid written), and the ping's `started` is given as the
    earlier run's would be (60 s before), the same pid being out of reach here."""
    from test_stop_names_its_run import _rewrite, _stop_with

    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        path = run_dir(sb.kint_home) / PID_FILE
        held = path.read_bytes()

        class PingedAnEarlierRun(Client):
            def ping_answer(self, timeout_s: float = 1.0):  # type: ignore[override]
                answer = super().ping_answer(timeout_s)
                _rewrite(path, held)
                return answer and {**answer, "started": answer["started"] - 60,
                                   "started_boot": answer["started_boot"] - 60}

        _rewrite(path, b"- serving\n")
        out = _stop_with(PingedAnEarlierRun(sb.kint_home, autostart=False), monkeypatch,
                         capsys)
        _named_and_serving(sb, out, pid)
    finally:
        sb.shutdown()


def test_a_stop_whose_supervisor_another_stop_ended_after_its_ping_names_the_successor(
        tmp_path, monkeypatch, capsys):
    """The race the stop's naming is for, with another pid: the stop pinged one supervisor,
    another stop ended it before this one's `sup.stop` went out, and a command started the
    next. The next refuses the stop meant for the first (BAD_REQUEST on the wire) and keeps
    running; the stop says the one it meant stopped and names the successor, exit 0, as
    docs/commands.md says, never that refusal. Real supervisors; the other stop and the
    start are made by the test as the ping's answer comes back."""
    sb = make_sandbox(tmp_path)
    started: list[int] = []

    class EndedAfterItsPing(Client):
        def ping_answer(self, timeout_s: float = 1.0):  # type: ignore[override]
            answer = super().ping_answer(timeout_s)
            if answer is not None and not started:
                _ended_and_replaced(sb, answer["pid"], started)
            return answer

    try:
        first = sb.start()
        _stop_finds_a_successor(sb, EndedAfterItsPing(sb.kint_home, autostart=False), first,
                                started, monkeypatch, capsys)
    finally:
        sb.shutdown()


def _ended_and_replaced(sb, first: int, started: list[int]) -> None:
    """Another stop ends the supervisor `first`, and a command starts the next: its pid
    added to `started`."""
    sb.shutdown()  # the other stop
    sb.wait_for(lambda: not pid_alive(first), what="the first exited")
    started.append(sb.start())


def _stop_finds_a_successor(sb, client: Client, first: int, started: list[int], monkeypatch,
                            capsys) -> None:
    """A stop through `client`, during which the supervisor `first` was replaced by the
    one `started` names: it says so, and that one serves on."""
    from test_stop_names_its_run import _stop_with

    out = _stop_with(client, monkeypatch, capsys)
    (successor,) = started
    assert successor != first
    _named_and_serving(sb, out, successor)


def test_a_stop_no_look_named_names_the_one_its_pid_file_names_by_then(tmp_path, monkeypatch,
                                                                        capsys):
    """Neither the pid file's first look (-1: just started, its pid not written) nor the
    ping (unanswered: still starting) named a supervisor. Before, its `sup.stop` went out
    unnamed after the stop's looks (seconds), by when the pid file named it: a successor
    started as that stop went out (another stop ended the first) read it and stopped,
    unasked. Now the pid file is read again and names it: the successor refuses and keeps
    running, and the stop says it stopped and names it (exit 0). Real supervisors; the
    ping is answered None as a supervisor still starting answers nothing (stubbed: one
    cannot be held between its bind and its first answer here), its pid written back then
    without `serving`; the other stop and the start are the test's."""
    from test_stop_names_its_run import _rewrite

    sb = make_sandbox(tmp_path)
    started: list[int] = []
    try:
        first = sb.start()
        path = run_dir(sb.kint_home) / PID_FILE

        class StillStarting(Client):
            def ping_answer(self, timeout_s: float = 1.0):  # type: ignore[override]
                _rewrite(path, f"{first}\n".encode())  # its pid written, not serving yet
                return None

            def call(self, op, **kw):  # type: ignore[override]
                if op == "sup.stop" and not started:
                    _ended_and_replaced(sb, first, started)
                return super().call(op, **kw)

        _rewrite(path, b"-\n")
        _stop_finds_a_successor(sb, StillStarting(sb.kint_home, autostart=False), first,
                                started, monkeypatch, capsys)
    finally:
        sb.shutdown()


class _Unanswered(Client):
    """A client whose stop's ping is answered None, as a supervisor still starting answers
    nothing (stubbed: one cannot be held between its bind and its first answer here), and
    whose calls are recorded in `asked` (op, args) before they go out."""

    def __init__(self, home, asked: list) -> None:
        super().__init__(home, autostart=False)
        self.asked = asked

    def ping_answer(self, timeout_s: float = 1.0):  # type: ignore[override]
        return None

    def call(self, op, **kw):  # type: ignore[override]
        self.asked.append((op, kw.get("args")))
        return super().call(op, **kw)


def test_a_stop_whose_pid_file_never_names_one_sends_no_unnamed_stop(tmp_path, monkeypatch,
                                                                     capsys):
    """review29e: the pid file did not read at the stop's first look nor at its one look
    again (corrupt, here `-`), and the ping got no answer. Before, `sup.stop` went out
    naming nobody, and whichever supervisor read it stopped ("supervisor stopped"): a
    successor started meanwhile too. Now the pid file is read again for PID_WRITE_GRACE_S;
    still naming none, the stop is refused (exit 2, SUPERVISOR_UNAVAILABLE) with nothing
    sent, and the supervisor serves on. A real supervisor; its ping stubbed (_Unanswered)."""
    from kint.commands import supervisor_stop
    from test_stop_names_its_run import _StopCtx, _rewrite

    sb = make_sandbox(tmp_path)
    asked: list = []
    try:
        pid = sb.start()
        path = run_dir(sb.kint_home) / PID_FILE
        held = path.read_bytes()
        _rewrite(path, b"-\n")
        monkeypatch.setenv("KINT_HOME", str(sb.kint_home))
        try:
            with _Unanswered(sb.kint_home, asked) as client, \
                    pytest.raises(SystemExit) as refused:
                supervisor_stop.run(_StopCtx(client), as_json=False)
        finally:
            _rewrite(path, held)
        err = capsys.readouterr().err
        assert refused.value.code == 2, err
        assert asked == [], asked
        assert "[SUPERVISOR_UNAVAILABLE]" in err, err
        assert f"{path} names none (not after 3s); nothing was asked to stop" in err, err
        with Client(sb.kint_home, autostart=False) as client:
            assert client.call("sup.ping", timeout_s=10)["pid"] == pid
    finally:
        sb.shutdown()


def test_a_stop_waits_for_a_pid_file_written_after_its_looks(tmp_path, monkeypatch, capsys):
    """review29e: the pid file did not read through the stop's looks (its ping unanswered,
    the holder not gone 2 s later) and was written only just after them, as a supervisor
    slow to start writes it. Before, the one look again read it unwritten and the stop went
    out naming nobody; now it is read again until it names the supervisor, and the stop
    names it (its pid, as its ping gave no start time). Real supervisor; its ping stubbed
    (_Unanswered), its pid written back (without `serving`: still starting) by the test at
    the first read of the pid file after those looks."""
    from kint.commands import supervisor_stop
    from kint.supervisor import pidlock
    from test_stop_names_its_run import _rewrite, _stop_with

    sb = make_sandbox(tmp_path)
    asked: list = []
    looked: list[bool] = []
    try:
        pid = sb.start()
        path = run_dir(sb.kint_home) / PID_FILE
        looks, read = supervisor_stop.exits_within, pidlock.running_pid

        def after_its_looks(*args):
            gone = looks(*args)
            looked.append(True)
            return gone

        def written_after_a_read(home):
            now = read(home)
            if looked == [True]:
                looked.append(True)
                _rewrite(path, f"{pid}\n".encode())
            return now

        monkeypatch.setattr(supervisor_stop, "exits_within", after_its_looks)
        monkeypatch.setattr(pidlock, "running_pid", written_after_a_read)
        _rewrite(path, b"-\n")
        out = _stop_with(_Unanswered(sb.kint_home, asked), monkeypatch, capsys)
        assert asked == [("sup.stop", {"pid": pid})], asked
        assert out == "supervisor stopped\n", out
        assert not pid_alive(pid)
    finally:
        sb.shutdown()


def test_a_stop_whose_unnamed_supervisor_exits_during_its_looks_says_stopped(tmp_path,
                                                                            monkeypatch,
                                                                            capsys):
    """The pid file did not read through the stop's looks (its ping unanswered) and the
    supervisor there exited while the stop read the pid file again (another stop, a crash):
    nobody holds KINT_HOME, so what the user asked for is done. Before, the stop refused
    (exit 2, "names none") as if a supervisor still ran; now it says "supervisor stopped"
    (exit 0) with nothing sent. Real supervisor, ended by SIGTERM between the looks and the
    reads again; its ping stubbed (_Unanswered)."""
    from kint.commands import supervisor_stop
    from test_stop_names_its_run import _rewrite, _stop_with

    sb = make_sandbox(tmp_path)
    asked: list = []
    try:
        pid = sb.start()
        path = run_dir(sb.kint_home) / PID_FILE
        looks = supervisor_stop.exits_within

        def ended_after_its_looks(*args):
            gone = looks(*args)
            os.kill(pid, signal.SIGTERM)
            sb.wait_for(lambda: not pid_alive(pid), timeout=60, what="the supervisor's exit")
            return gone

        monkeypatch.setattr(supervisor_stop, "exits_within", ended_after_its_looks)
        _rewrite(path, b"-\n")
        out = _stop_with(_Unanswered(sb.kint_home, asked), monkeypatch, capsys)
        assert asked == [], asked
        assert out == "supervisor stopped\n", out
    finally:
        sb.shutdown()
