"""A verify running while `pull --discard-local` moves the store aside: both answer, and
no "closed database" reaches the user (kint/tenant_worker/shared_client.py).

Sibyl's `Storage.close()` closes every thread's connection; the discard closed the
space's client as a verify on another op thread searched through it, and the verify's
next search failed. The parts are real: a worker's SpaceContext (tests/bare_worker.py)
over a real Sibyl store, the verify handler and the pull's discard (`discard_released`) each on a
thread of their own. One thing is the test's: Sibyl's search, on the verify's thread, is held
between its first search and the one verify then makes (the real `search`, called twice), so the
discard comes while the verify is reading, every time, not by a race's luck. Sibyl's
account gate is its NullEntitlementGate, as the test supervisor's workers have it
(tests/support/kint_test_gate.py): no credentials exist here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from bare_worker import bare_worker
from conftest import wait_until
from kint.protocol import ErrorCode, ProtocolError


QUERY = {"query": "ship on a Friday", "write": False}


def _null_gate(monkeypatch) -> None:
    from sibyl_memory_client import testing

    from kint import sibyl_client

    monkeypatch.setattr(sibyl_client, "GATE_FACTORY", lambda _path: testing.NullEntitlementGate())


def _held_search(monkeypatch) -> tuple[threading.Event, threading.Event, list[int]]:
    """Verify's search, held after its first call until `leave` is set: (inside, leave,
    one item a call)."""
    from kint.tenant_worker import verify

    real_search = verify.search
    inside, leave = threading.Event(), threading.Event()
    calls: list[int] = []

    def held_search(client, query, limit):
        calls.append(1)
        first = real_search(client, query, limit)  # its thread's connection now open
        inside.set()
        assert leave.wait(30)
        again = real_search(client, query, limit)
        assert again == first
        return again

    monkeypatch.setattr(verify, "search", held_search)
    return inside, leave, calls


def _on_thread(answers: dict[str, object], name: str, fn, *args) -> threading.Thread:
    """`fn(*args)` on a thread of its own, its answer (or error) in `answers[name]`."""
    def run() -> None:
        try:
            answers[name] = fn(*args)
        except BaseException as err:  # noqa: BLE001 - the assertions show it
            answers[name] = err

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_verify_reading_during_a_discard_answers_and_the_discard_moves_the_store(
        tmp_path, monkeypatch):
    from kint.tenant_worker import discard, handlers, verify

    _null_gate(monkeypatch)
    real_search = verify.search
    inside, leave, _calls = _held_search(monkeypatch)
    with bare_worker(tmp_path, b"\x0c" * 32) as (worker, _router):
        ctx = worker.ctx
        db = Path(ctx.config.db)
        answers: dict[str, object] = {}
        verifying = _on_thread(answers, "verify", handlers.verify, ctx, QUERY)
        assert wait_until(lambda: inside.is_set() or "verify" in answers, timeout=30)
        assert inside.is_set(), answers
        discarding = _on_thread(answers, "discard", discard.discard_released, ctx)
        # The discard waits for the verify: the store is still where it was.
        discarding.join(1.0)
        assert db.exists() and "discard" not in answers
        leave.set()
        verifying.join(30)
        discarding.join(30)
        answer = answers["verify"]
        assert isinstance(answer, dict), answer
        assert answer["verdict"] != "empty_store" and "release-gate" in str(answer), answer
        moved = answers["discard"]
        assert isinstance(moved, list), moved
        assert [Path(p).name for p in moved] == [f"{db.name}.kint-backup-"
                                                 + Path(moved[0]).name.split("kint-backup-")[1]]
        assert not db.exists()
        # A verify after the discard answers too: the store is gone, and it says so.
        monkeypatch.setattr(verify, "search", real_search)
        after = handlers.verify(ctx, QUERY)
        assert "does not exist" in str(after), after
        assert wait_until(lambda: not verifying.is_alive() and not discarding.is_alive())


def test_a_discard_an_op_holds_past_its_wait_is_busy_and_moves_nothing(tmp_path, monkeypatch):
    """The discard waits RELEASE_WAIT_S (30 s; a second here) for the verify reading
    through the client, then is refused BUSY with the store where it was; the verify
    answers from it."""
    from kint.tenant_worker import discard, handlers, shared_client

    _null_gate(monkeypatch)
    monkeypatch.setattr(shared_client, "RELEASE_WAIT_S", 1.0)
    inside, leave, _calls = _held_search(monkeypatch)
    with bare_worker(tmp_path, b"\x0d" * 32) as (worker, _router):
        ctx = worker.ctx
        answers: dict[str, object] = {}
        verifying = _on_thread(answers, "verify", handlers.verify, ctx, QUERY)
        assert wait_until(lambda: inside.is_set() or "verify" in answers, timeout=30)
        assert inside.is_set(), answers
        try:
            with pytest.raises(ProtocolError) as err:
                discard.discard_released(ctx)
        finally:
            leave.set()
            verifying.join(30)
        assert err.value.code == ErrorCode.BUSY and "nothing was moved" in err.value.message
        assert Path(ctx.config.db).exists()
        answer = answers["verify"]
        assert isinstance(answer, dict) and answer["verdict"] != "empty_store", answer
        # The client let go of by the refused discard's end: the next one moves the store.
        assert discard.discard_released(ctx) and not Path(ctx.config.db).exists()


@contextmanager
def _discard_held(tmp_path, monkeypatch, token: bytes) -> Iterator[tuple[Any, dict]]:
    """(the space's context, the answers) while a discard on a thread of its own is held
    inside its block (the client closed, the store not moved yet); let go on leaving,
    its answer then in `answers["discard"]`."""
    from kint.tenant_worker import discard

    real_discard = discard.discard_local
    holding, go = threading.Event(), threading.Event()

    def held_discard(ctx, naming=None):
        holding.set()
        assert go.wait(30)
        return real_discard(ctx, naming)

    _null_gate(monkeypatch)
    monkeypatch.setattr(discard, "discard_local", held_discard)
    with bare_worker(tmp_path, token) as (worker, _router):
        answers: dict[str, object] = {}
        discarding = _on_thread(answers, "discard", discard.discard_released, worker.ctx)
        try:
            assert wait_until(lambda: holding.is_set() or "discard" in answers, timeout=30)
            assert holding.is_set(), answers
            yield worker.ctx, answers
        finally:
            go.set()
            discarding.join(30)
        assert isinstance(answers["discard"], list), answers


def test_a_verify_asked_during_the_discard_waits_for_it(tmp_path, monkeypatch):
    """A verify that comes while the discard holds the store does not build a client on
    the store being moved: it waits, and then says the store does not exist."""
    from kint.tenant_worker import handlers

    _inside, leave, calls = _held_search(monkeypatch)
    leave.set()
    with _discard_held(tmp_path, monkeypatch, b"\x0e" * 32) as (ctx, answers):
        verifying = _on_thread(answers, "verify", handlers.verify, ctx, QUERY)
        verifying.join(1.0)
        assert "verify" not in answers and not calls  # it waits, no search made
    verifying.join(30)
    assert "does not exist" in str(answers["verify"]), answers
    assert not calls


def test_a_verify_waiting_past_a_discard_that_does_not_end_is_busy(tmp_path, monkeypatch):
    """The op's wait for the discard is bounded too (USING_WAIT_S; a second here)."""
    from kint.tenant_worker import handlers, shared_client

    monkeypatch.setattr(shared_client, "USING_WAIT_S", 1.0)
    with _discard_held(tmp_path, monkeypatch, b"\x0f" * 32) as (ctx, _answers):
        with pytest.raises(ProtocolError) as err:
            handlers.verify(ctx, QUERY)
    assert err.value.code == ErrorCode.BUSY, err.value
    assert "pull --discard-local" in err.value.message, err.value.message
