"""When kint-server takes a restore whose supervisor did not answer it (stopped, starved) as
ended (kint.agent_server.restore_wait, `_worker_pulls`): read from the supervisor's status
rows, given here. A restore that was answered is ended by its answer."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kint.agent_server import restore_wait
from kint.client import KintError

SPACE16 = "c4594b48e156226b"


class FakeClient:
    """The supervisor's status as `answer` says: rows, or a KintError to raise."""

    answer: object = None

    def __init__(self, _home: Path, autostart: bool = True) -> None:
        assert autostart is False  # a look must never start a supervisor

    def call(self, op: str, timeout_s: float) -> dict:
        assert op == "sup.status" and timeout_s <= 2
        if isinstance(FakeClient.answer, KintError):
            raise FakeClient.answer
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
    """The restore thread's own client: its send went to a supervisor (pid 4242) that then
    exited without answering, leaving the worker that ran the restore behind, alive."""

    def __init__(self) -> None:
        self.sent_to: int | None = None
        self.sends = 0

    def serving_pid(self) -> int | None:
        return None  # no supervisor holds the home any more

    def send(self, _client: object, _timeout_s: float) -> dict:
        self.sends += 1
        self.sent_to = 4242
        raise restore_wait.SupervisorUnavailable("the supervisor (pid 4242) exited")


def test_an_old_worker_that_outlives_its_supervisor_ends_the_wait_by_the_stop_graces(
        monkeypatch):
    """The supervisor running the restore exited; the worker that ran it (this test's
    own process here, so alive) does not go. The thread waits for it as long as a
    supervisor lets a worker it stops outlive the stop (its stop grace and kill grace:
    20 s), not the half hour a restore may take, and then ends the restore BUSY naming the
    pid and how to end it, without sending it again over the old worker."""
    assert restore_wait.OLD_WORKER_GONE_S == 20.0
    monkeypatch.setattr(restore_wait, "Client", FakeClient)
    monkeypatch.setattr(restore_wait, "LOOK_EVERY_S", 0.01)
    monkeypatch.setattr(restore_wait, "OLD_WORKER_GONE_S", 0.2)
    # Past this the thread of old sent the restore again: kept short, the test ends.
    monkeypatch.setattr(restore_wait, "RESTORE_WAIT_S", 5.0)
    client = OrphaningClient()
    under_way = restore_wait.RestoreUnderWay(Path("/nowhere"), SPACE16, client.send,
                                             lambda r: None, lambda: None)
    under_way.worker_pid = os.getpid()
    with pytest.raises(KintError) as ended:
        under_way._follow(client)  # type: ignore[arg-type]
    assert ended.value.code == "BUSY"
    assert ended.value.message == (
        f"the supervisor running the restore exited, and its worker (pid {os.getpid()}) "
        f"still runs 0.2s later (stopped or stuck): the restore was not sent again, and "
        f"the store is opened as that worker left it")
    assert f"kill {os.getpid()}" in (ended.value.hint or "")
    assert client.sends == 1 and under_way.unanswered and not under_way.resumed
