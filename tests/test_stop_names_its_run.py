"""A stop reaches the supervisor run it was meant for, and the client tells one supervisor
from another with its pid: session 27's review leftovers, lane door28.

- `sup.stop` names the supervisor by its pid and when it took its home (its ping's
  `started` and `started_boot`): one with the same pid refuses it;
- a stop asking an older supervisor again without `pid` asks only while that one still
  holds the home: another stop may end it meanwhile, and the next one must not be stopped;
- a supervisor whose pid file was removed closes its door for its stop on its own socket;
- the client's remembered socket folder is another supervisor's proof of nothing, one with
  the same pid too;
- a call reads the pid file once;
- (review28e) a stop refused by a same-pid successor, or meeting another stop of an older
  supervisor, ends 0; a successor whose pid file does not read yet is named once it does;
  `Ownership.nobody_else_holds` against a real pid lock; a stepped-down supervisor's
  clients are told it stops.

Real supervisors throughout. A supervisor older than the `pid` argument cannot be had here
(another kint version): a client answers as one would, over a real supervisor. Nor can a
successor with the same pid (another pid namespace, root only): where one is needed the
test writes the pid file as it would, or sends the `started` it would give.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from unittest.mock import ANY

import pytest

from conftest import make_sandbox, pid_alive, serving
from kint.client import Client, KintError
from kint.commands.common import Ctx
from kint.commands.supervisor_stop import FirstAskedGone, _ask_stop
from kint.front_closed import CLOSED_SOCKET, NOTE, FrontClosed
from kint.paths import run_dir
from kint.socket_paths import FRONT_SOCKET, socket_dir
from kint.supervisor.pidlock import PID_FILE, running_pid


def test_a_stop_meant_for_an_earlier_supervisor_with_the_same_pid_is_refused(tmp_path):
    """Before, `sup.stop` named its supervisor by pid alone: in a container the next one
    often has the same pid, and a stop queued for the last one stopped it. Its ping says
    when it took its home; a stop naming another time is refused, its own stops it."""
    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        with sb.client() as client:
            answer = client.ping_answer(5)
            assert answer is not None and answer["pid"] == pid, answer
            assert isinstance(answer["started"], float), answer
            assert isinstance(answer["started_boot"], float), answer
            earlier = {"pid": pid, "started": answer["started"] - 60,
                       "started_boot": answer["started_boot"] - 60}
            with pytest.raises(KintError) as refused:
                client.call("sup.stop", args=earlier, timeout_s=10)
            err = refused.value
            assert err.code == "BAD_REQUEST", err
            assert "with the same pid, keeps running" in err.message, err
            time.sleep(1.0)
            assert pid_alive(pid) and running_pid(sb.kint_home) == pid
            assert client.call("sup.ping", timeout_s=10)["pid"] == pid
            own = {"pid": pid, "started": answer["started"],
                   "started_boot": answer["started_boot"]}
            assert client.call("sup.stop", args=own, timeout_s=60) == {"stopped": True}
        sb.wait_for(lambda: not pid_alive(pid), timeout=30, what="the supervisor stopped")
    finally:
        sb.shutdown()


class _OlderThanPid(Client):
    """A client of a supervisor older than `sup.stop`'s `pid`, as it answers: the stop
    naming it is refused as an unknown argument; one without it goes to the supervisor.
    `meanwhile` runs as the refusal is on its way."""

    def __init__(self, sb) -> None:
        super().__init__(sb.kint_home, autostart=False)
        self.sb = sb
        self.successor: int | None = None
        self.asked: list = []

    def call(self, op, *, args=None, timeout_s=None, **kw):  # type: ignore[override]
        self.asked.append((op, args))
        if op != "sup.stop" or not args:
            return super().call(op, args=args, timeout_s=timeout_s, **kw)
        self.meanwhile()
        raise KintError("BAD_REQUEST", f"{op}: unknown argument 'pid'")

    def meanwhile(self) -> None:
        pass


class _EndedMeanwhile(_OlderThanPid):
    """Another stop ends the supervisor as its refusal is on its way, and a command starts
    the next one: `successor`."""

    def meanwhile(self) -> None:
        first = running_pid(self.sb.kint_home)
        self.sb.shutdown()  # the other stop
        assert running_pid(self.sb.kint_home) is None
        self.sb.wait_for(lambda: not pid_alive(first), timeout=30, what="the first exited")
        self.successor = self.sb.start()


def _not_asked_again(client: _OlderThanPid, first: int) -> int:
    """`_ask_stop` of the supervisor `first` through `client`: FirstAskedGone, no second
    stop sent, and the supervisor it names still serving a second on; its pid."""
    with client, pytest.raises(FirstAskedGone) as gone:
        _ask_stop(client, first, client.ping_answer(5))
    assert [op for op, _ in client.asked if op == "sup.stop"] == ["sup.stop"]
    serving = gone.value.successor
    time.sleep(1.0)
    assert serving is not None and pid_alive(serving)
    assert running_pid(client.sb.kint_home) == serving
    return serving


def test_a_stop_asks_an_older_supervisor_again_only_while_it_holds_the_home(tmp_path):
    """Before, the stop asked again without `pid` whatever held the home by then: the
    supervisor started after the first one exited got the bare stop, and stopped."""
    sb = make_sandbox(tmp_path)
    try:
        first = sb.start()
        client = _EndedMeanwhile(sb)
        assert _not_asked_again(client, first) == client.successor != first
    finally:
        sb.shutdown()


def test_a_same_pid_successor_of_an_older_supervisor_is_not_asked_again(tmp_path):
    """The pid lock's holder has the pid the stop first asked, but it started after that
    one refused (in a container the next supervisor often has the same pid): not asked
    again. The successor's ping is answered here as it would answer (just started); the
    supervisor behind it is real, and still serves."""

    class SameNumber(_OlderThanPid):
        def ping_answer(self, timeout_s: float = 1.0):  # type: ignore[override]
            answer = super().ping_answer(timeout_s)
            return answer if not self.asked else {**(answer or {}), "uptime_s": 0.0}

    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        assert _not_asked_again(SameNumber(sb), pid) == pid
    finally:
        sb.shutdown()


def test_an_older_supervisor_still_holding_the_home_is_asked_again(tmp_path):
    """The same refusal from the supervisor that still serves (nobody else stopped it):
    asked again without `pid`, it stops, as that supervisor's own clients stopped it."""

    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        client = _OlderThanPid(sb)
        with client:
            _ask_stop(client, pid, client.ping_answer(5))
        assert [args for op, args in client.asked if op == "sup.stop"][1] is None
        sb.wait_for(lambda: not pid_alive(pid), timeout=30, what="the supervisor stopped")
    finally:
        sb.shutdown()


def test_an_older_supervisor_whose_pid_file_does_not_read_is_asked_again(tmp_path):
    """The same, its pid file reading as nothing (-1, corrupt): before, -1 was taken for
    another supervisor holding the home, and the stop said "supervisor stopped; another
    supervisor has started since" and stopped nothing. A pid file that does not read names
    nobody: the ping says it is the one that refused, asked again, it stops."""
    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        _rewrite(run_dir(sb.kint_home) / PID_FILE, b"- serving\n")
        client = _OlderThanPid(sb)
        with client:
            _ask_stop(client, pid, client.ping_answer(5))
        stops = [args for op, args in client.asked if op == "sup.stop"]
        assert stops[0]["pid"] == pid and stops[1:] == [None], client.asked
        sb.wait_for(lambda: not pid_alive(pid), timeout=30, what="the supervisor stopped")
    finally:
        sb.shutdown()


def test_a_supervisor_whose_pid_file_was_removed_closes_its_door_for_its_stop(tmp_path):
    """Its pid file removed, the supervisor steps down; its socket is still its own (no
    other supervisor bound there). Before, its stop left the door open (the door was
    closed only while the lock was its own): for the whole stop (its worker held here,
    SIGSTOP, as a busy one holds it) a new client connected and waited for nothing. Then
    (review28e) its note was read by nobody, no pid file naming it: a new client was told
    "no supervisor is running", and so was `kint supervisor status`; they say it stops."""
    with serving(tmp_path) as sb:
        pid = running_pid(sb.kint_home)
        worker = sb.row(sb.sibyl_db)["pid"]
        folder = socket_dir(sb.kint_home)
        assert pid and worker
        os.kill(worker, signal.SIGSTOP)
        try:
            (run_dir(sb.kint_home) / PID_FILE).unlink()
            sb.wait_for(lambda: (folder / NOTE).exists(), timeout=15,
                        what="the door closed for the stop")
            assert not (folder / FRONT_SOCKET).exists() and (folder / CLOSED_SOCKET).exists()
            from kint.front_closed import _parse_note

            note = _parse_note(folder)
            assert isinstance(note, FrontClosed) and note.pid == pid and note.stopping, note
            # A new client is told it stops (no pid file names it): before, "no
            # supervisor is running".
            with Client(sb.kint_home, autostart=False) as client, \
                    pytest.raises(KintError) as refused:
                client.call("sup.ping", timeout_s=10)
            err = refused.value
            assert err.code == "SUPERVISOR_UNAVAILABLE", err
            assert f"the supervisor (pid {pid}) is stopping" in err.message, err
            assert "(sup.ping was not sent)" in err.message, err
            out = sb.kint("supervisor", "status")
            assert out.returncode == 1, out.stdout + out.stderr
            assert f"the supervisor (pid {pid}) is stopping" in out.stderr, out.stderr
        finally:
            os.kill(worker, signal.SIGCONT)
        sb.wait_for(lambda: not pid_alive(pid), timeout=60, what="the supervisor stepped down")
        assert not (folder / NOTE).exists() and not (folder / CLOSED_SOCKET).exists()


def test_the_clients_remembered_socket_folder_is_not_a_same_pid_successors(tmp_path):
    """The client keeps the folder a supervisor answered from, so as not to look it up at
    every call. Before, it kept it by pid alone: a successor with the same pid (in a
    container) that bound in another folder was taken for the one that answered, and the
    client's call waited out its deadline on the old folder's path, where nobody serves.
    A long KINT_HOME: the first supervisor binds in the short folder; stopped, that folder
    left open to others, the next one binds in a fresh one (tests/test_client.py's
    follow). Its pid file is then made to name the first one's pid, the same bytes a
    same-pid successor writes (the same pid cannot be had otherwise): the client's next
    call is answered by it, at its own folder."""
    import shutil

    from test_supervisor_socket_dir import _long_sandbox

    sb = _long_sandbox(tmp_path)
    first_folder = second_folder = None
    try:
        assert sb.kint("supervisor", "start").returncode == 0
        first = running_pid(sb.kint_home)
        first_folder = socket_dir(sb.kint_home)
        with Client(sb.kint_home, autostart=False) as client:
            assert client.call("sup.ping", timeout_s=10)["pid"] == first
            assert sb.kint("supervisor", "stop").returncode == 0
            os.chmod(first_folder, 0o777)  # anyone could put a socket there now
            assert sb.kint("supervisor", "start").returncode == 0
            second_folder = socket_dir(sb.kint_home)
            assert second_folder != first_folder
            successor = running_pid(sb.kint_home)
            assert successor not in (None, -1, first)
            path = run_dir(sb.kint_home) / PID_FILE
            held = path.read_bytes()
            assert held.split()[0] == str(successor).encode()
            time.sleep(0.05)  # a later write, on any clock the file system keeps
            _rewrite(path, held.replace(str(successor).encode(), str(first).encode(), 1))
            try:
                assert running_pid(sb.kint_home) == first
                assert client.call("sup.ping", timeout_s=10)["pid"] == successor
            finally:
                _rewrite(path, held)  # the clean-up's stop names no pid the test made up
    finally:
        sb.shutdown()
        for folder in (first_folder, second_folder):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)


def _rewrite(path, data: bytes) -> None:
    """The held pid file's bytes replaced in place (its lock and inode kept), as the
    supervisor holding it writes them."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    finally:
        os.close(fd)


def test_a_call_reads_the_pid_file_once(tmp_path):
    """Before, a call on a new socket read the pid file twice: once for the call and once
    more as the socket was made. One read says which supervisor the call is for."""
    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        with Client(sb.kint_home, autostart=False) as client:
            reads = []
            read = client._holder.pid

            def counted():
                reads.append(1)
                return read()

            client._holder.pid = counted  # type: ignore[method-assign]
            assert client.call("sup.ping", timeout_s=10)["pid"] == pid
            assert len(reads) == 1
            assert client.call("sup.ping", timeout_s=10)["pid"] == pid
            assert len(reads) == 2
    finally:
        sb.shutdown()


# review28e's findings on door28, lane fix28e.


class _StopCtx(Ctx):
    """The command's context, handing `supervisor_stop.run` the test's client."""

    def __init__(self, client: Client) -> None:
        super().__init__(None, None, False)
        self._client = client

    def client(self, autostart: bool = True) -> Client:
        return self._client


def _stop_with(client: Client, monkeypatch, capsys) -> str:
    """`kint supervisor stop`'s flow (supervisor_stop.run) through `client`: what it
    printed, once it ended with exit 0 (a refusal exits 2: SystemExit, failing here)."""
    from kint.commands import supervisor_stop

    monkeypatch.setenv("KINT_HOME", str(client.home))
    with client:
        supervisor_stop.run(_StopCtx(client), as_json=False)
    return capsys.readouterr().out


def test_a_stop_read_by_a_same_pid_successor_says_it_started_since(tmp_path, monkeypatch,
                                                                    capsys):
    """The stop pinged one supervisor; it exited and a successor with the same pid (a
    container's) took the home, and refused the stop named for the first's start. Before,
    the refusal ended the stop with exit 2; with another pid it said "supervisor stopped;
    another supervisor (pid N) has started since", exit 0: so now with the same one. The
    supervisor is real; its ping's `started` is given as the first one's would be (60 s
    earlier), the same pid being out of reach here."""

    class PingedAnEarlierRun(Client):
        def ping_answer(self, timeout_s: float = 1.0):  # type: ignore[override]
            answer = super().ping_answer(timeout_s)
            return answer and {**answer, "started": answer["started"] - 60,
                               "started_boot": answer["started_boot"] - 60}

    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        out = _stop_with(PingedAnEarlierRun(sb.kint_home, autostart=False), monkeypatch,
                         capsys)
        assert "supervisor stopped" in out, out
        assert f"another supervisor (pid {pid}) has started since" in out, out
        assert pid_alive(pid) and running_pid(sb.kint_home) == pid
    finally:
        sb.shutdown()


class _ReadByAnother(Client):
    """A client whose `sup.stop` naming a pid P is refused as another supervisor (pid P+1)
    refuses a stop meant for P, in its words (kint/supervisor/commands.py)."""

    def call(self, op, *, args=None, timeout_s=None, **kw):  # type: ignore[override]
        if op == "sup.stop" and args:
            raise KintError("BAD_REQUEST", f"sup.stop was meant for the supervisor pid "
                            f"{args['pid']}; this one (pid {args['pid'] + 1}) keeps running")
        return super().call(op, args=args, timeout_s=timeout_s, **kw)


def test_a_stop_another_pid_refused_while_the_pid_file_names_the_first_says_it_started_since(
        tmp_path, monkeypatch, capsys):
    """The stop pinged supervisor A (pid P); A exited (another stop), B (pid Q) took the
    home and read the stop queued for A, refusing it as meant for P; B exited too, and C,
    with P again (a container's), took the home: the pid file names P. Before, a refusal
    naming another pid with the pid file naming the first's ended the stop BAD_REQUEST,
    exit 2; whoever holds the home after such a refusal is a successor, named as a
    same-pid refusal names it: "supervisor stopped; another supervisor (pid P) has started
    since", exit 0. B's refusal is given here in its words (three supervisors and a reused
    pid are out of reach); the real supervisor plays C, and keeps serving."""

    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        out = _stop_with(_ReadByAnother(sb.kint_home, autostart=False), monkeypatch, capsys)
        assert "supervisor stopped" in out, out
        assert f"another supervisor (pid {pid}) has started since" in out, out
        assert pid_alive(pid) and running_pid(sb.kint_home) == pid
    finally:
        sb.shutdown()


def test_a_stop_refused_by_another_after_its_ping_named_another_stops_nothing(
        tmp_path, monkeypatch, capsys):
    """(review30f) The stop's ping was answered by supervisor Q (a stepped-down one whose
    socket file is still at the path) while P, which took the home since, holds it and is
    named by the pid file; Q refuses the stop meant for P. That refusal says nothing of P:
    before, it was taken as "P is gone" and the stop said "supervisor stopped" (exit 0)
    with P running, never asked. Now it ends the stop BAD_REQUEST, exit 2. Q's answers
    are given in its words (a stepped-down supervisor beside a new one is out of reach
    here); the real supervisor plays P, and keeps serving."""

    class PingedAnother(_ReadByAnother):
        def ping_answer(self, timeout_s: float = 1.0):  # type: ignore[override]
            answer = super().ping_answer(timeout_s)
            return answer and {**answer, "pid": answer["pid"] + 1}

    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        with pytest.raises(SystemExit) as ended:
            _stop_with(PingedAnother(sb.kint_home, autostart=False), monkeypatch, capsys)
        assert ended.value.code == 2
        said = capsys.readouterr()
        assert "supervisor stopped" not in said.out, said.out
        assert f"meant for the supervisor pid {pid}" in said.err, said.err
        assert pid_alive(pid) and running_pid(sb.kint_home) == pid
    finally:
        sb.shutdown()


@pytest.mark.parametrize("after", ["nobody", "a successor"])
def test_a_stop_refused_by_another_once_the_one_it_named_is_gone_says_it_stopped(
        tmp_path, monkeypatch, capsys, after):
    """(note 30) As above, the stop's ping was answered by supervisor Q (a stepped-down one
    whose socket file is still at the path), and Q refuses the stop meant for P; but P,
    the one it named, exited before that refusal came back (another stop, a crash). The
    stop's work is done: it says "supervisor stopped" (exit 0), naming the successor
    that took the home since, if one did (docs/commands.md), where `BAD_REQUEST`, exit 2,
    is only for a P that still holds the home. Q's answers are given in its words; P and
    the successor are real supervisors, P stopped as the call goes out."""

    class PingedAnotherThenNamedGone(_ReadByAnother):
        def ping_answer(self, timeout_s: float = 1.0):  # type: ignore[override]
            answer = super().ping_answer(timeout_s)
            return answer and {**answer, "pid": answer["pid"] + 1}

        def call(self, op, *, args=None, timeout_s=None, **kw):  # type: ignore[override]
            if op == "sup.stop" and args:
                sb.shutdown()  # P ends meanwhile, unasked by this stop
                sb.wait_for(lambda: not pid_alive(args["pid"]), what="P exited")
                assert running_pid(sb.kint_home) is None
                if after == "a successor":
                    started.append(sb.start())
            return super().call(op, args=args, timeout_s=timeout_s, **kw)

    sb = make_sandbox(tmp_path)
    started: list[int] = []
    try:
        sb.start()
        out = _stop_with(PingedAnotherThenNamedGone(sb.kint_home, autostart=False),
                         monkeypatch, capsys)
        if after == "nobody":
            assert out.strip() == "supervisor stopped", out
        else:
            [successor] = started
            assert out.startswith("supervisor stopped\n"), out
            assert f"another supervisor (pid {successor}) has started since" in out, out
            assert pid_alive(successor) and running_pid(sb.kint_home) == successor
    finally:
        sb.shutdown()


def _go_on(pid: int) -> None:
    """Continue the process `pid` (SIGCONT), if it is still there."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


def test_an_older_supervisor_another_stop_ends_mid_stop_is_waited_for(tmp_path, monkeypatch,
                                                                      capsys):
    """The older supervisor refused `pid`; before the stop asked again, another stop (a
    SIGTERM here) closed its door, so the second ping found no socket and no answer.
    Before, the stop failed "did not answer again; it was not asked to stop", exit 2; a
    second stop meanwhile is waited for, exit 0 (docs/commands.md). Its worker is held
    (SIGSTOP) until the ping, so that the stop is still under way then."""

    class StoppedMeanwhile(_OlderThanPid):
        def meanwhile(self) -> None:
            os.kill(self.first, signal.SIGTERM)
            self.sb.wait_for(lambda: (socket_dir(self.sb.kint_home) / NOTE).exists(),
                             timeout=15, what="the other stop closed the door")

        def ping_answer(self, timeout_s: float = 1.0):  # type: ignore[override]
            answer = super().ping_answer(timeout_s)
            if self.asked:
                _go_on(self.worker)
            return answer

    with serving(tmp_path) as sb:
        client = StoppedMeanwhile(sb)
        client.first = running_pid(sb.kint_home)
        client.worker = sb.row(sb.sibyl_db)["pid"]
        os.kill(client.worker, signal.SIGSTOP)
        try:
            out = _stop_with(client, monkeypatch, capsys)
        finally:
            _go_on(client.worker)
        assert out.strip() == "supervisor stopped", out
        assert not pid_alive(client.first) and running_pid(sb.kint_home) is None
        assert [args for op, args in client.asked if op == "sup.stop"] == [
            {"pid": client.first, "started": ANY, "started_boot": ANY}]


def test_a_same_pid_successor_whose_pid_file_does_not_read_yet_is_named(tmp_path,
                                                                       monkeypatch, capsys):
    """The older supervisor was ended by another stop as its refusal came back, and the
    next one, with the same pid (a container's), has taken the lock without having
    written its pid yet (-1). Before, the stop then waited for it as for "the supervisor
    asked" (the same pid): the whole 70 s, and said it "was sent SIGTERM", which nothing
    sent it. The first is gone: the holder is named once its pid reads. The next one here
    is a process of the test's own that takes the real pid lock, its file empty for a
    second (write_holder's truncate before its write, held open), and writes the first
    one's pid, as a same-pid successor does (the same pid cannot be had otherwise)."""

    class EndedForASamePidOne(_OlderThanPid):
        def meanwhile(self) -> None:
            first = running_pid(self.sb.kint_home)
            self.sb.shutdown()
            self.sb.wait_for(lambda: not pid_alive(first), timeout=30, what="the first exited")
            self.holder = subprocess.Popen(
                [sys.executable, "-c", "import os, sys, time\nfrom pathlib import Path\n"
                 "import kint.pid_file_lock as lock\n"
                 "from kint.supervisor.pidlock import hold_pid_lock\n"
                 "home, first = Path(sys.argv[1]), sys.argv[2]\n"
                 "lock.write_holder = lambda fd, *more: os.pwrite(\n"
                 "    fd, f'{first} serving\\n'.encode(), 0)\n"
                 "hold_pid_lock(home, before_named=lambda: (\n"
                 "    (home / 'run' / 'supervisor.pid').write_bytes(b''),\n"
                 "    print('held', flush=True), time.sleep(1.0)))\n"
                 "time.sleep(120)", str(self.sb.kint_home), str(first)],
                stdout=subprocess.PIPE, text=True)
            assert self.holder.stdout.readline().strip() == "held"
            assert running_pid(self.sb.kint_home) == -1

    sb = make_sandbox(tmp_path)
    client = EndedForASamePidOne(sb)
    client.holder = None
    try:
        first = sb.start()
        out = _stop_with(client, monkeypatch, capsys)
        assert client.holder is not None and running_pid(sb.kint_home) == first
        assert f"another supervisor (pid {first}) has started since" in out, out
    finally:
        if client.holder is not None:
            client.holder.kill()
            client.holder.wait(30)
        sb.shutdown()


@pytest.mark.parametrize("lock", ["held by another", "not held", "missing"])
def test_nobody_else_holds_the_home_unless_another_holds_its_pid_lock(tmp_path, lock):
    """`Ownership.nobody_else_holds`, for a supervisor whose own pid file was removed:
    False while another process holds the pid lock at run/supervisor.pid (the real lock,
    taken by a process of the test's own), True when the file there is held by nobody or
    is not there at all. What lets a stepped-down supervisor close its door for its stop
    on its own socket, and never on another's."""
    from kint.supervisor.ownership import Ownership

    home = tmp_path / "kint"
    run = home / "run"
    run.mkdir(parents=True, mode=0o700)
    own = os.open(tmp_path / "removed.pid", os.O_RDWR | os.O_CREAT, 0o600)
    ownership = Ownership(run / PID_FILE, own)
    holder = None
    try:
        if lock != "missing":
            holder = subprocess.Popen(
                [sys.executable, "-c", "import sys, time\nfrom pathlib import Path\n"
                 "from kint.supervisor.pidlock import hold_pid_lock\n"
                 "hold_pid_lock(Path(sys.argv[1])); print('held', flush=True)\n"
                 "time.sleep(60)", str(home)], stdout=subprocess.PIPE, text=True)
            assert holder.stdout.readline().strip() == "held"
            if lock == "not held":
                holder.kill()
                holder.wait(30)
            assert (run / PID_FILE).exists()
        assert not ownership.holds_lock()
        assert ownership.nobody_else_holds() is (lock != "held by another")
    finally:
        os.close(own)
        if holder is not None:
            holder.kill()
            holder.wait(30)
