"""When kint-server takes a restore whose supervisor did not answer it (stopped, starved) as
ended (kint.agent_server.restore_wait, `_worker_pulls`): read from the supervisor's status
rows, given here. A restore that was answered is ended by its answer. And how long it waits
for the worker a dead supervisor left (`_wait_out`), found by the space's worker lock it
holds (kint.agent_server.old_worker, kint.tenant_worker.worker_lock): real processes
holding real lock files stand in."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import wait_until
from lock_holders import end as _end, holding

from kint.agent_server import old_worker as old_worker_mod
from kint.agent_server import restore_wait
from kint.client import KintError
from kint.paths import space_files, worker_lock_path
from kint.protocol.worker_wire import IDLE_BEAT_MAX_SECONDS
from kint.tenant_worker.stop_grace import STOP_GRACE_SECONDS

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


def test_a_call_that_outlasts_the_restore_hands_it_over(restore):
    """The call stops waiting at its bound: the restore's end is its thread's from then on,
    which opens the store once it ends."""
    assert restore.wait(0.2) is False
    assert restore.outlasted_call() is True


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


def _process(home: Path, supervisor: int | None = 4242, head_lock: bool = False,
             stop: bool = True) -> subprocess.Popen:
    """A real process standing in for a worker of the space: holding the space's worker
    lock with its pid and `supervisor`'s written in it, as a worker holds it for its life
    (its supervisor 4242, the one the restore went to, by default; None: a process that
    holds no worker lock), the head lock too when `head_lock` (as through a pull),
    SIGSTOPped when `stop`."""
    locks = [(_worker_lock(home), f"{{pid}} {supervisor}\n")] if supervisor is not None else []
    if head_lock:
        locks.append((_head_lock(home), ""))
    return holding(locks, stop)


@pytest.fixture
def old_worker(tmp_path):
    """A process standing in for the worker the dead supervisor left, stopped, holding the
    space's worker lock under `tmp_path`. A real worker, stopped the same way, is
    tests/test_mcp_restore.py's and tests/test_worker_lock.py's."""
    proc = _process(tmp_path)
    try:
        yield proc
    finally:
        _end(proc)


def _orphaned_restore(monkeypatch, home: Path, serving: int | None = None,
                      gone_s: float = 0.2
                      ) -> tuple[restore_wait.RestoreUnderWay, OrphaningClient]:
    monkeypatch.setattr(restore_wait, "Client", FakeClient)
    monkeypatch.setattr(restore_wait, "LOOK_EVERY_S", 0.01)
    monkeypatch.setattr(restore_wait, "OLD_WORKER_GONE_S", gone_s)
    client = OrphaningClient(serving)
    under_way = restore_wait.RestoreUnderWay(home, SPACE16, client.send,
                                             lambda r: None, lambda: None)
    return under_way, client


def _head_lock(home: Path) -> Path:
    path = space_files(home, SPACE16)["head_lock"]
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _worker_lock(home: Path) -> Path:
    path = worker_lock_path(home, SPACE16)
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
                                                                         tmp_path, old_worker):
    """The supervisor running the restore exited before any status named its worker; that
    worker is stopped, holding the space's worker lock, and no head lock (stopped before
    its pull took it: the look for a head lock's holder found nothing then). Past the
    bound the restore does not end (it once ended BUSY and the store was opened, under a
    worker that could resume and move it aside): it runs on, its refusals naming the pid
    the lock file gives and how to end it, and once that worker is gone the restore is
    sent again."""
    under_way, client = _orphaned_restore(monkeypatch, tmp_path)
    thread, out = _follow_on_a_thread(under_way, client)
    assert wait_until(lambda: under_way.worker_stays, timeout=10)
    thread.join(1.0)  # five times the bound: still waiting for the worker
    assert thread.is_alive() and client.sends == 1 and not out, out
    message = under_way.message()
    assert f"the worker that ran it (pid {old_worker.pid}) still runs" in message, message
    assert "keeps the store closed while that worker lives" in message, message
    assert under_way.hint().startswith(
        f"stop and tell the human: `kill -CONT {old_worker.pid}` if it is stopped")
    old_worker.kill()
    old_worker.wait()
    thread.join(10)
    assert not thread.is_alive() and out == {"result": {"restored": True}}, out
    assert client.sends == 2 and under_way.resumed
    assert under_way.hint() == restore_wait.RESTORE_RUNNING_HINT


def test_a_worker_lock_nobody_holds_is_no_old_worker(monkeypatch, tmp_path):
    """The old worker exited: its pids are still written in the lock file, and the pid now
    runs another process (here: this one). The file is not held, so nobody is waited for,
    and the restore is sent again."""
    _worker_lock(tmp_path).write_text(f"{os.getpid()} 4242\n")
    under_way, client = _orphaned_restore(monkeypatch, tmp_path)
    thread, out = _follow_on_a_thread(under_way, client)
    thread.join(10)
    assert not thread.is_alive() and out == {"result": {"restored": True}}, out
    assert client.sends == 2 and not under_way.worker_stays and under_way.worker_pid is None


def test_a_new_supervisors_worker_is_not_the_old_one(monkeypatch, tmp_path):
    """Another kint process started a supervisor since, whose worker holds the worker lock
    under it and the head lock for its own pull: not the restore's old worker, so the
    restore ends BUSY past the bound as before, the store opened, rather than waiting on a
    healthy worker."""
    worker = _process(tmp_path, supervisor=5151, head_lock=True, stop=False)
    try:
        under_way, client = _orphaned_restore(monkeypatch, tmp_path, serving=5151)
        thread, out = _follow_on_a_thread(under_way, client)
        thread.join(10)
        assert not thread.is_alive() and "error" in out, out
        assert out["error"].code == "BUSY" and "head lock is still held" in out["error"].message
        assert client.sends == 1 and not under_way.worker_stays
        assert under_way.worker_pid is None
    finally:
        _end(worker)


def test_a_supervisor_started_during_the_look_at_the_lock_keeps_its_worker(
        monkeypatch, tmp_path):
    """The pid file named no supervisor when the loop looked; another kint process then
    started one whose worker took the worker lock before the look at it. The supervisor
    serving is read after the lock, so its healthy worker is not taken for the old one
    (waited on for as long as it lives): the restore ends BUSY past the bound."""
    worker = _process(tmp_path, supervisor=5151, head_lock=True, stop=False)
    try:
        under_way, client = _orphaned_restore(monkeypatch, tmp_path)
        # None until the lock has been read, the new supervisor from then on: `_wait_out`
        # reads the pid file itself before the look, so a stand-in that answered None at
        # its first call only was used up there and could never fail.
        looked = []
        real = old_worker_mod.holder_closing
        monkeypatch.setattr(old_worker_mod, "holder_closing",
                            lambda fd, table=None: (looked.append(1), real(fd, table))[1])
        client.serving_pid = lambda: 5151 if looked else None
        thread, out = _follow_on_a_thread(under_way, client)
        thread.join(10)
        assert not thread.is_alive() and "error" in out, out
        assert out["error"].code == "BUSY", out
        assert under_way.worker_pid is None and not under_way.worker_stays
    finally:
        _end(worker)


@pytest.mark.skipif(not os.path.isfile("/proc/locks"), reason="the kernel's table names it")
def test_a_holder_that_has_not_written_its_line_yet_is_not_named_the_old_worker(
        tmp_path, caplog):
    """The instant after a worker took the space's worker lock and before it wrote its
    pids, the file still names the holder before it (gone): the kernel names the new
    holder, its supervisor unknown. That look logged "the worker N holds the space's worker
    lock, its supervisor gone" and named N in the refusals, though N may be the serving
    supervisor's new, healthy worker. It counts as old for that look only, unnamed; once
    its line says its supervisor is not the one serving, it is named."""
    import logging

    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid no process has now: the holder before
    path = _worker_lock(tmp_path)
    holder = holding([(path, f"{gone.pid} 4243\n")])
    try:
        under_way = restore_wait.RestoreUnderWay(tmp_path, SPACE16, lambda c, t: {},
                                                 lambda r: None, lambda: None)
        with caplog.at_level(logging.INFO, logger="kint.server"):
            assert under_way._old_worker_lives(lambda: 5151)  # old for this look
            assert under_way.worker_pid is None
            assert "holds the space's worker lock" not in caplog.text, caplog.text
            path.write_text(f"{holder.pid} 4243\n")  # its own line, as a worker writes it
            assert under_way._old_worker_lives(lambda: 5151)
        assert under_way.worker_pid == holder.pid
        assert f"the worker {holder.pid} holds the space's worker lock" in caplog.text
    finally:
        _end(holder)


def test_the_head_lock_gets_its_grace_from_the_old_workers_exit(monkeypatch, tmp_path,
                                                                old_worker):
    """The old worker outlived the bound, then exited while another process held the head
    lock a moment: the lock is waited for the bound again, counted from that exit, and the
    restore is sent again once it is let go. Before, the bound was counted from the
    supervisor's exit, long past: BUSY at once, with no grace."""
    under_way, client = _orphaned_restore(monkeypatch, tmp_path, gone_s=2.0)
    thread, out = _follow_on_a_thread(under_way, client)
    assert wait_until(lambda: under_way.worker_stays, timeout=10)
    other = _process(tmp_path, supervisor=None, head_lock=True, stop=False)
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


@pytest.mark.parametrize("lock", ["head", "worker"])
@pytest.mark.parametrize("closed", ["mode", "folder"])
def test_a_lock_that_cannot_be_opened_is_refused_as_what_it_is(tmp_path, closed, lock):
    """A head or worker lock file that cannot be opened (its mode changed: EACCES;
    KINT_HOME a file, not a folder: ENOTDIR, which root meets too) answers CORRUPT_STATE
    naming it, not an OSError that ended the restore INTERNAL, "a bug in kint"."""
    place = _head_lock if lock == "head" else _worker_lock
    if closed == "mode":
        if os.geteuid() == 0:
            pytest.skip("root opens a file of mode 000")
        home, why = tmp_path, "Permission denied"
        place(home).touch(mode=0o000)
    else:
        home, why = tmp_path / "home", "Not a directory"
        home.write_text("")
    path = (space_files(home, SPACE16)["head_lock"] if lock == "head"
            else worker_lock_path(home, SPACE16))
    with pytest.raises(KintError) as refused:
        if lock == "head":
            old_worker_mod.head_lock_free(home, SPACE16)
        else:
            old_worker_mod.old_worker(home, SPACE16, lambda: None)
    assert refused.value.code == "CORRUPT_STATE", refused.value
    assert f"{lock} lock {path} cannot be opened ({why})" in refused.value.message
    assert "memory_pull with discard_local again" in (refused.value.hint or "")
