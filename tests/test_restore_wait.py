"""When kint-server takes a restore whose supervisor did not answer it (stopped, starved) as
ended (kint.agent_server.restore_wait, `_worker_pulls`): read from the supervisor's status
rows, given here. A restore that was answered is ended by its answer. And how long it waits
for the worker a dead supervisor left (`_wait_out`), and how it finds that worker by the
head lock when no status named it (kint.agent_server.old_worker): real processes stand in."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import wait_until

from kint.agent_server import old_worker as old_worker_mod
from kint.agent_server import restore_wait
from kint.client import KintError
from kint.paths import space_files
from kint.protocol.worker_wire import IDLE_BEAT_MAX_SECONDS
from kint.tenant_worker.stop_grace import STOP_GRACE_SECONDS
from kint.tenant_worker.store_sharers import worker_start

SPACE16 = "c4594b48e156226b"


class FakeClient:
    """The supervisor's status as `answer` says: rows, or a KintError to raise."""

    answer: object = None
    serving: int | None = 4242  # the supervisor the status comes from
    answered_by: int | None = None  # the pid its status gives, when it gives one

    def __init__(self, _home: Path, autostart: bool = True) -> None:
        assert autostart is False  # a look must never start a supervisor
        self.sent_to: int | None = None

    def call(self, op: str, timeout_s: float) -> dict:
        assert op == "sup.status" and timeout_s <= 2
        self.sent_to = FakeClient.serving
        if isinstance(FakeClient.answer, Exception):
            raise FakeClient.answer
        if FakeClient.answered_by is not None:
            return {"supervisor": {"pid": FakeClient.answered_by},
                    "spaces": FakeClient.answer}
        return {"spaces": FakeClient.answer}

    def close(self) -> None:
        pass


@pytest.fixture
def restore(monkeypatch):
    monkeypatch.setattr(restore_wait, "Client", FakeClient)
    under_way = restore_wait.RestoreUnderWay(Path("/nowhere"), SPACE16, lambda c, t: {},
                                             lambda r: None, lambda: None)
    under_way.sent_at = time.monotonic() - 5
    return under_way


def _row(op: dict | None, alive: bool = True) -> list[dict]:
    return [{"space": SPACE16, "op": op, "uptime_s": 9.0 if alive else None}]


@pytest.mark.parametrize("rows, running", [
    (_row({"name": "pull", "age_s": 4.0}), True),       # the restore, begun since the call
    (_row({"name": "pull", "age_s": 60.0}), False),     # a pull older than the call
    (_row({"name": "status", "age_s": 1.0}), False),    # the worker does something else
    (_row(None), False),                                # nothing in flight
    (_row({"name": "pull", "age_s": 4.0}, alive=False), False),  # no worker runs it
    ([], False),                                        # the space has no worker
    # The restore beside an older op: the beat's `ops` names both.
    ([{"space": SPACE16, "op": {"name": "verify", "age_s": 30.0}, "uptime_s": 9.0,
       "ops": [{"name": "verify", "age_s": 30.0}, {"name": "pull", "age_s": 4.0}]}], True),
])
def test_the_restore_runs_while_the_worker_runs_its_pull(restore, rows, running):
    FakeClient.answer = rows
    assert restore._worker_pulls(FakeClient(Path("/nowhere"), autostart=False)) is running


def test_a_status_that_cannot_be_read_leaves_the_store_closed(restore):
    FakeClient.answer = KintError("SUPERVISOR_UNAVAILABLE", "no supervisor", "start one")
    assert restore._worker_pulls(FakeClient(Path("/nowhere"), autostart=False)) is True
    assert restore.running() is True  # its thread was never started: no answer yet
    assert restore.message().startswith("a memory_pull with discard_local began 5 s ago")


@pytest.mark.parametrize("status_from, learnt", [(4242, True), (5151, False)])
def test_the_worker_is_learnt_only_from_the_supervisor_the_restore_went_to(
        restore, old_worker, status_from, learnt):
    """While the call waits, the worker running the restore is noted from the status of
    the supervisor the restore was sent to (pid 4242). One another kint process started
    since (5151) answers for its own, healthy worker: not the old one, never waited for."""
    restore._client = SendingClient()
    restore._client.sent_to = 4242
    FakeClient.serving = status_from
    FakeClient.answer = [{"space": SPACE16, "pid": old_worker.pid, "uptime_s": 9.0,
                          "op": {"name": "pull", "age_s": 4.0}}]
    try:
        assert restore._learn_worker() is learnt
    finally:
        FakeClient.serving = 4242
    assert restore.worker_pid == (old_worker.pid if learnt else None)
    assert restore.worker_started == (worker_start(old_worker.pid) if learnt else None)


def test_a_status_answered_by_another_supervisor_than_the_pid_file_named_is_not_learnt(
        restore, old_worker):
    """The pid file named the supervisor the restore went to (4242) when the look read it,
    but that one died and another (5151) answered the look: its worker is not the old one."""
    restore._client = SendingClient()
    restore._client.sent_to = 4242
    FakeClient.answer = [{"space": SPACE16, "pid": old_worker.pid, "uptime_s": 9.0,
                          "op": {"name": "pull", "age_s": 4.0}}]
    FakeClient.answered_by = 5151
    try:
        assert restore._learn_worker() is False
        assert restore.worker_pid is None
        FakeClient.answered_by = 4242
        assert restore._learn_worker() is True and restore.worker_pid == old_worker.pid
    finally:
        FakeClient.answered_by = None


def test_a_look_that_fails_otherwise_still_hands_the_restore_over(restore):
    """A look that fails with anything but a refusal (a run/ folder that is not one, no
    descriptors left) is no look: the call still hands the restore over to its thread,
    which opens the store once it ends. Raised out of `wait`, it left the restore neither
    ended nor handed over, and the store closed until kint-server restarted."""
    restore._client = SendingClient()
    restore._client.sent_to = 4242
    FakeClient.answer = NotADirectoryError(20, "Not a directory", "/nowhere/run/kint.pid")
    try:
        assert restore._learn_worker() is False
        assert restore.wait(0.2) is False
        assert restore.outlasted_call() is True
    finally:
        FakeClient.answer = None


class SendingClient:
    """The restore thread's own client: its send starts a supervisor (pid 4242, none held
    the home before) whose request then goes unanswered; it stays, stopped (SIGSTOP)."""

    def __init__(self) -> None:
        self.holder: int | None = None
        self.sent_to: int | None = None
        self.sends = 0

    def serving_pid(self) -> int | None:
        return self.holder

    def send(self, _client: object, _timeout_s: float) -> dict:
        self.sends += 1
        self.holder = self.sent_to = 4242
        raise restore_wait.SupervisorUnavailable("the supervisor (pid 4242) is stopped")


def test_a_supervisor_the_send_started_is_the_one_watched(monkeypatch):
    """No supervisor ran when the restore was sent; the send started one, which then did
    not answer and stays stopped. It is not gone: its worker no longer pulls, so the
    restore ended unanswered and is not sent a second time, where the pid read before the
    send (none) made that supervisor look gone and the restore went out twice."""
    monkeypatch.setattr(restore_wait, "Client", FakeClient)
    monkeypatch.setattr(restore_wait, "LOOK_EVERY_S", 0.0)
    FakeClient.answer = _row(None)  # its worker runs nothing now
    client = SendingClient()
    under_way = restore_wait.RestoreUnderWay(Path("/nowhere"), SPACE16, client.send,
                                             lambda r: None, lambda: None)
    with pytest.raises(restore_wait.SupervisorUnavailable):
        under_way._follow(client)  # type: ignore[arg-type]
    assert client.sends == 1 and under_way.unanswered and not under_way.resumed


class OrphaningClient:
    """The restore thread's own client: its first send went to a supervisor (pid 4242) that
    then exited without answering, leaving the worker that ran the restore behind; the
    send after it is answered (the supervisor it starts restores). `serving` is the pid the
    home's pid file names after that exit: none, or another kint process's supervisor."""

    def __init__(self, serving: int | None = None) -> None:
        self.sent_to: int | None = None
        self.sends = 0
        self.serving = serving

    def serving_pid(self) -> int | None:
        return self.serving

    def send(self, _client: object, _timeout_s: float) -> dict:
        self.sends += 1
        if self.sends > 1:
            return {"restored": True}
        self.sent_to = 4242
        raise restore_wait.SupervisorUnavailable("the supervisor (pid 4242) exited")


def _process(worker: bool = True, lock: Path | None = None,
             stop: bool = True) -> subprocess.Popen:
    """A real process: named as kint's workers are (kint.proc_name.WORKER) when `worker`,
    holding an exclusive flock on `lock` when given (as a worker holds the head lock through
    a pull), SIGSTOPped when `stop`, as a debugger or a Ctrl-Z leaves one."""
    proc = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time; from kint.proc_name import WORKER, set_process_name\n"
        "if sys.argv[1] == '1': set_process_name(WORKER)\n"
        "if sys.argv[2]: fcntl.flock(os.open(sys.argv[2], os.O_RDWR | os.O_CREAT, 0o600), "
        "fcntl.LOCK_EX)\n"
        "print(flush=True); time.sleep(120)"), "1" if worker else "0",
        str(lock) if lock is not None else ""], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"\n"  # named, locked
    if stop:
        os.kill(proc.pid, signal.SIGSTOP)
    return proc


def _end(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()


@pytest.fixture
def old_worker():
    """A process standing in for the worker the dead supervisor left, stopped. A real
    worker, stopped the same way, is tests/test_mcp_restore.py's."""
    proc = _process()
    try:
        yield proc
    finally:
        _end(proc)


def _orphaned_restore(monkeypatch, pid: int | None, home: Path = Path("/nowhere"),
                      serving: int | None = None, gone_s: float = 0.2
                      ) -> tuple[restore_wait.RestoreUnderWay, OrphaningClient]:
    monkeypatch.setattr(restore_wait, "Client", FakeClient)
    monkeypatch.setattr(restore_wait, "LOOK_EVERY_S", 0.01)
    monkeypatch.setattr(restore_wait, "OLD_WORKER_GONE_S", gone_s)
    client = OrphaningClient(serving)
    under_way = restore_wait.RestoreUnderWay(home, SPACE16, client.send,
                                             lambda r: None, lambda: None)
    under_way.worker_pid = pid
    return under_way, client


def _head_lock(home: Path) -> Path:
    path = space_files(home, SPACE16)["head_lock"]
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _follow_on_a_thread(under_way, client) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def follow() -> None:
        try:
            out["result"] = under_way._follow(client)
        except KintError as err:  # pragma: no cover - what the test then reports
            out["error"] = err

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    return thread, out


def test_an_old_worker_is_expected_gone_by_its_own_stop_grace_and_a_beat():
    """A worker whose supervisor died exits within its own stop grace (the SIGTERM its
    parent's death sends) or at its next look at the supervisor's pid, a beat apart at
    most: the bound comes from those, not from the supervisor's stop and kill graces
    (20 s), which bound a stop the supervisor commands."""
    assert restore_wait.OLD_WORKER_GONE_S == STOP_GRACE_SECONDS + IDLE_BEAT_MAX_SECONDS == 13


def test_a_stopped_old_worker_keeps_the_store_closed_until_it_is_gone(monkeypatch,
                                                                         old_worker):
    """The supervisor running the restore exited; the worker that ran it is stopped. Past
    the bound the restore does not end (it once ended BUSY and the store was opened, under
    a worker that could resume and move it aside): it runs on, its refusals naming the pid
    and how to end it, and once that worker is gone the restore is sent again."""
    under_way, client = _orphaned_restore(monkeypatch, old_worker.pid)
    under_way.worker_started = worker_start(old_worker.pid)
    assert under_way.worker_started is not None
    thread, out = _follow_on_a_thread(under_way, client)
    assert wait_until(lambda: under_way.worker_stays, timeout=10)
    thread.join(1.0)  # five times the bound: still waiting for the worker
    assert thread.is_alive() and client.sends == 1 and not out, out
    message = under_way.message()
    assert f"the worker that ran it (pid {old_worker.pid}) still runs" in message, message
    assert "keeps the store closed while that worker lives" in message, message
    assert under_way.hint().startswith(f"`kill -CONT {old_worker.pid}` if it is stopped")
    old_worker.kill()
    old_worker.wait()
    thread.join(10)
    assert not thread.is_alive() and out == {"result": {"restored": True}}, out
    assert client.sends == 2 and under_way.resumed
    assert under_way.hint() == restore_wait.RESTORE_RUNNING_HINT


def test_a_pid_taken_by_another_process_is_not_the_old_worker(monkeypatch, old_worker):
    """The old worker exited and its pid now runs another process (here: a worker started
    at another time): that one is not waited for, and the restore is sent again."""
    under_way, client = _orphaned_restore(monkeypatch, old_worker.pid)
    under_way.worker_started = str(int(worker_start(old_worker.pid) or 0) - 1)
    thread, out = _follow_on_a_thread(under_way, client)
    thread.join(10)
    assert not thread.is_alive() and out == {"result": {"restored": True}}, out
    assert client.sends == 2 and not under_way.worker_stays


def test_an_old_worker_never_named_is_found_by_the_head_lock_it_holds(monkeypatch, tmp_path):
    """The supervisor died before any status named the worker running the restore (its pid
    unknown), and that worker, stopped, holds the space's head lock: it is found by the lock
    and waited for as the old worker, named in the refusals. Before, an unknown pid counted
    as a worker gone, and the lock ended the restore BUSY "held by another kint process",
    the store opened under the stopped worker."""
    proc = _process(lock=_head_lock(tmp_path))
    try:
        under_way, client = _orphaned_restore(monkeypatch, None, tmp_path)
        thread, out = _follow_on_a_thread(under_way, client)
        assert wait_until(lambda: under_way.worker_stays or out, timeout=10)
        assert under_way.worker_pid == proc.pid and not out, out
        assert f"(pid {proc.pid}) still runs" in under_way.message()
        _end(proc)
        thread.join(10)
        assert not thread.is_alive() and out == {"result": {"restored": True}}, out
        assert client.sends == 2 and under_way.resumed
    finally:
        _end(proc)


def test_a_new_supervisors_worker_on_the_head_lock_is_not_the_old_one(monkeypatch,
                                                                       tmp_path):
    """Another kint process started a supervisor since, whose worker (started after it)
    holds the head lock for its own pull: not the restore's old worker, so the restore ends
    BUSY past the bound as before, the store opened, rather than waiting on a healthy
    worker."""
    supervisor = _process(worker=False, stop=False)
    worker = _process(lock=_head_lock(tmp_path), stop=False)
    try:
        under_way, client = _orphaned_restore(monkeypatch, None, tmp_path,
                                              serving=supervisor.pid)
        thread, out = _follow_on_a_thread(under_way, client)
        thread.join(10)
        assert not thread.is_alive() and "error" in out, out
        assert out["error"].code == "BUSY" and "head lock is still held" in out["error"].message
        assert client.sends == 1 and not under_way.worker_stays
        assert under_way.worker_pid is None
    finally:
        _end(worker)
        _end(supervisor)


def test_a_supervisor_started_during_the_walk_for_the_lock_keeps_its_worker(
        monkeypatch, tmp_path):
    """The pid file named no supervisor when the loop looked; another kint process then
    started one whose worker took the head lock before the walk of /proc ended. The
    supervisor serving is read after the walk, so its healthy worker is not taken for the
    old one (waited on for as long as it lives): the restore ends BUSY past the bound."""
    supervisor = _process(worker=False, stop=False)
    worker = _process(lock=_head_lock(tmp_path), stop=False)
    try:
        under_way, client = _orphaned_restore(monkeypatch, None, tmp_path)
        reads = []

        def serving_pid() -> int | None:  # none at the loop's look, the new one after
            reads.append(1)
            return None if len(reads) == 1 else supervisor.pid

        client.serving_pid = serving_pid
        thread, out = _follow_on_a_thread(under_way, client)
        thread.join(10)
        assert not thread.is_alive() and "error" in out, out
        assert out["error"].code == "BUSY", out
        assert under_way.worker_pid is None and not under_way.worker_stays
    finally:
        _end(worker)
        _end(supervisor)


def test_the_head_lock_gets_its_grace_from_the_old_workers_exit(monkeypatch, tmp_path,
                                                                old_worker):
    """The old worker outlived the bound, then exited while another process held the head
    lock a moment: the lock is waited for the bound again, counted from that exit, and the
    restore is sent again once it is let go. Before, the bound was counted from the
    supervisor's exit, long past: BUSY at once, with no grace."""
    under_way, client = _orphaned_restore(monkeypatch, old_worker.pid, tmp_path, gone_s=2.0)
    under_way.worker_started = worker_start(old_worker.pid)
    thread, out = _follow_on_a_thread(under_way, client)
    assert wait_until(lambda: under_way.worker_stays, timeout=10)
    other = _process(worker=False, lock=_head_lock(tmp_path), stop=False)
    try:
        old_worker.kill()
        old_worker.wait()
        thread.join(0.3)  # well inside the bound: still waiting for the lock
        assert thread.is_alive() and not out, out
    finally:
        _end(other)
    thread.join(10)
    assert not thread.is_alive() and out == {"result": {"restored": True}}, out
    assert client.sends == 2 and under_way.resumed


@pytest.mark.parametrize("closed", ["mode", "folder"])
def test_a_head_lock_that_cannot_be_opened_is_refused_as_what_it_is(tmp_path, closed):
    """A head lock file that cannot be opened (its mode changed: EACCES; KINT_HOME a file,
    not a folder: ENOTDIR, which root meets too) answers CORRUPT_STATE naming it, not an
    OSError that ended the restore INTERNAL, "a bug in kint"."""
    if closed == "mode":
        if os.geteuid() == 0:
            pytest.skip("root opens a file of mode 000")
        home, why = tmp_path, "Permission denied"
        _head_lock(home).touch(mode=0o000)
    else:
        home, why = tmp_path / "home", "Not a directory"
        home.write_text("")
    path = space_files(home, SPACE16)["head_lock"]
    with pytest.raises(KintError) as refused:
        old_worker_mod.head_lock_free(home, SPACE16)
    assert refused.value.code == "CORRUPT_STATE", refused.value
    assert f"head lock {path} cannot be opened ({why})" in refused.value.message
    assert "memory_pull with discard_local again" in (refused.value.hint or "")
