"""A store deleted under kint-server's client: the worker is asked what was anchored from
it (a status call of up to 30 s) without holding the shared client's lock, so memory_status,
memory_pull and the restore thread's store opening are not held behind that call, while no
call makes a new store over the loss before the answer is in
(kint/agent_server/wrapped_client.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

WAIT_S = 20.0  # a bound for a deadlock to show as a failure, never a measure of speed


class HeldWorker:
    """A stand-in session whose status call waits until `release` (a slow worker)."""

    def __init__(self, mirror_rows: int) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()
        self.mirror_rows = mirror_rows

    def call(self, op: str, args: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        assert op == "status"
        self.asked.set()
        assert self.release.wait(WAIT_S), "the test never released the status call"
        return {"mirror_rows": self.mirror_rows}


@pytest.fixture
def shared(tmp_path, monkeypatch):
    from sibyl_memory_client import testing

    from kint import sibyl_client
    from kint.agent_server import wrapped_client

    monkeypatch.setattr(sibyl_client, "GATE_FACTORY",
                        lambda _path: testing.NullEntitlementGate())

    def make(worker: HeldWorker) -> wrapped_client.SharedClient:
        db = tmp_path / "store" / "memory.db"
        client = wrapped_client.SharedClient(str(db), "t", tmp_path / "kint", session=worker)
        client.refresh()
        assert client.client is not None
        made.append(client)
        return client

    made: list[Any] = []
    yield make
    for client in made:
        client.close()


def _delete(db: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(db + suffix).unlink(missing_ok=True)


def _in_thread(fn: Any, *args: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    thread.start()
    return thread, out


def _loss_being_asked(
        shared: Any, mirror_rows: int) -> tuple[HeldWorker, Any, threading.Thread, list[Any]]:
    """The store deleted under a fresh shared client, and a memory_recall that found the
    loss now asking the worker (held): the worker, the client, that call's thread and what
    it returns."""
    worker = HeldWorker(mirror_rows=mirror_rows)
    client = shared(worker)
    _delete(client.db)
    finder, found = _in_thread(client.before_call, "memory_recall", True)
    assert worker.asked.wait(WAIT_S)
    return worker, client, finder, found


def _answer(worker: HeldWorker, *threads: threading.Thread) -> None:
    """The worker answers its held status call; `threads`, the calls waiting on it, end."""
    worker.release.set()
    for thread in threads:
        thread.join(WAIT_S)
        assert not thread.is_alive()


def test_the_worker_is_asked_outside_the_lock(shared):
    """While the status call is held, memory_status is served and a refresh (the restore
    thread's) returns, where both waited behind it; memory_recall, which needs the store,
    waits for the answer, then both it and the call that found the loss are refused
    STORE_GONE naming the anchored row, and no new store was made meanwhile."""
    worker, client, finder, found = _loss_being_asked(shared, mirror_rows=1)

    status, served = _in_thread(client.before_call, "memory_status", False)
    status.join(WAIT_S)
    assert not status.is_alive() and served == [None]  # answered while the call is held
    restore, _ = _in_thread(client.refresh)
    restore.join(WAIT_S)
    assert not restore.is_alive()
    waiting, waited = _in_thread(client.before_call, "memory_recall", True)
    assert not Path(client.db).exists()  # nothing made over the loss meanwhile
    assert finder.is_alive()  # still asking

    _answer(worker, finder, waiting)
    for refused in (found[0], waited[0]):
        assert refused["error"] == "STORE_GONE", refused
        assert refused["message"].endswith("; 1 row(s) anchored from it are on chain")
    assert not Path(client.db).exists()


def test_nothing_anchored_makes_a_new_store_once_the_worker_says_so(shared):
    """With no row anchored the answer makes a new store, as at a first start, and a call
    that waited for the answer is served on it."""
    worker, client, finder, found = _loss_being_asked(shared, mirror_rows=0)
    waiting, waited = _in_thread(client.before_call, "memory_remember", True)
    _answer(worker, finder, waiting)
    assert found == [None] and waited == [None]
    assert client.client is not None and client.gone is None and Path(client.db).exists()
