"""A verify running while `pull --discard-local` moves the store aside: both answer, and
no "closed database" reaches the user (kint/tenant_worker/shared_client.py).

Sibyl's `Storage.close()` closes every thread's connection; the discard closed the
space's client as a verify on another op thread searched through it, and the verify's
next search failed. The parts are real: a worker's SpaceContext (tests/bare_worker.py)
over a real Sibyl store, the verify handler and the pull's discard (`discard_released`) each on a thread of their
own. One thing is the test's: Sibyl's search, on the verify's thread, is held between its
first search and the one verify then makes (the real `search`, called twice), so the
discard comes while the verify is reading, every time, not by a race's luck. Sibyl's
account gate is its NullEntitlementGate, as the test supervisor's workers have it
(tests/support/kint_test_gate.py): no credentials exist here.
"""

from __future__ import annotations

import threading
from pathlib import Path

from bare_worker import bare_worker
from conftest import wait_until


def test_a_verify_reading_during_a_discard_answers_and_the_discard_moves_the_store(
        tmp_path, monkeypatch):
    from sibyl_memory_client import testing

    from kint import sibyl_client
    from kint.tenant_worker import discard, handlers, verify

    monkeypatch.setattr(sibyl_client, "GATE_FACTORY", lambda _path: testing.NullEntitlementGate())
    real_search = verify.search
    inside, leave = threading.Event(), threading.Event()

    def held_search(client, query, limit):
        first = real_search(client, query, limit)  # its thread's connection now open
        inside.set()
        assert leave.wait(30)
        again = real_search(client, query, limit)
        assert again == first
        return again

    monkeypatch.setattr(verify, "search", held_search)
    with bare_worker(tmp_path, b"\x0c" * 32) as (worker, _router):
        ctx = worker.ctx
        db = Path(ctx.config.db)
        answers: dict[str, object] = {}

        def run(name, fn, *args):
            try:
                answers[name] = fn(*args)
            except BaseException as err:  # noqa: BLE001 - the assertions below show it
                answers[name] = err

        verifying = threading.Thread(target=run, args=(
            "verify", handlers.verify, ctx, {"query": "ship on a Friday", "write": False}))
        verifying.start()
        assert wait_until(lambda: inside.is_set() or "verify" in answers, timeout=30)
        assert inside.is_set(), answers
        discarding = threading.Thread(target=run, args=("discard", discard.discard_released, ctx))
        discarding.start()
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
        after = handlers.verify(ctx, {"query": "ship on a Friday", "write": False})
        assert "does not exist" in str(after), after
        assert wait_until(lambda: not verifying.is_alive() and not discarding.is_alive())
