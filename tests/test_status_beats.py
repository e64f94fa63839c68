"""A plain `status` whose store must be read again runs on the worker's pool, so the beats go
on while it waits on the store; one whose counts hold still runs on the thread that beats.

The worker's main thread answered every plain status itself, a count of the store's rows
included when the store had changed since the last one. A store another process holds
locked (a writer in exclusive mode, a long migration) makes that count wait out SQLite's
busy timeout (store.READ_BUSY_WAIT_S, 2 s), and the main thread, which makes the beats,
made none meanwhile: the supervisor saw a worker that said nothing, and could count it as
hung. Such a status now goes to the pool, counted in flight, and the beats say so.

Real parts: the real supervisor and worker, a real Sibyl store, and a real second process
holding SQLite's exclusive lock on it (tests/support/locked_store.py); the second test a
real Worker over a real store, not serving (its requests are run as its loop runs them).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from conftest import make_sandbox, write_rules, write_store
from kint.client import KintError
from kint.protocol.envelope import Request
from support.locked_store import locked
from support.worker_over import worker_over


def test_a_status_waiting_on_a_locked_store_keeps_the_worker_beating(tmp_path):
    sb = make_sandbox(tmp_path / "machine")
    db = write_store(sb.sibyl_db)
    sb.start()
    try:
        sb.call("status", db)  # the worker serves, its counts made (the lock lets them be)
        said: dict[str, Any] = {}

        def ask() -> None:
            try:
                said["answer"] = sb.call("status", db, timeout_s=30)
            except KintError as err:
                said["error"] = err

        seen: list[dict[str, Any]] = []

        def beat_with_status() -> bool:
            row = sb.row(db)
            if (row["op"] or {}).get("name") == "status":
                seen.append(row)
            return bool(seen) or not asker.is_alive()

        with locked(db):  # a write of the locker's: the counts no longer hold
            asker = threading.Thread(target=ask, daemon=True)
            asker.start()
            sb.wait_for(beat_with_status, timeout=30,
                        what="a beat with the status in flight, or its answer")
            asker.join(30)
        # Without the pool, the worker made no beat until the count had failed: no row
        # ever named the status, whose wait the supervisor saw only as silence.
        assert seen, f"no beat while the status waited on the lock; it answered {said}"
        assert seen[0]["ops_running"] == 1 and seen[0]["state"] != "hung", seen[0]
        err = said.get("error")
        assert err is not None and err.code == "BUSY", said  # the lock outlasted the wait
        assert sb.call("status", db)["rows"] is not None  # once it is let go
    finally:
        sb.shutdown()


def test_a_plain_status_runs_inline_while_its_counts_hold(tmp_path):
    """The quick status keeps its path (no thread hand-off): only a status that would count
    the store is left to the pool, its call's settings kept for that run."""
    with worker_over(tmp_path) as (worker, db):
        settings = {"KINT_RPC_TIMEOUT": "7"}
        first = Request(id="c1", op="status", args={"settings": settings})
        assert worker.run_inline(first) is None  # nothing counted yet: the pool's
        assert first.args["settings"] is settings
        from conftest import dated_back

        dated_back(db)  # written just now: counts are kept only for older files
        counted = worker._run(first)  # as the pool runs it
        assert counted.ok, counted
        again = worker.run_inline(Request(id="c2", op="status"))
        assert again is not None and again.ok, again
        assert again.result["rows"] == counted.result["rows"]
        write_rules(db, "t", later="a row the count has not seen")
        assert worker.run_inline(Request(id="c3", op="status")) is None


def test_a_status_that_counts_the_store_waits_behind_no_op_of_the_pool(tmp_path):
    """A status whose store changed since its count went to the op pool, and waited there
    behind whatever held every thread (four pushes on their receipts, pulls behind the
    head lock) for one to end, where `kint status` was answered at once. It now has a
    thread of its own: answered while every pool thread is still held. The pool's ops
    here are stand-ins (threads held on an event): what they wait on is not the case."""
    import orjson

    from bare_worker import bare_worker, request_frames
    from conftest import TENANT, wait_until

    with bare_worker(tmp_path, b"\x05" * 32) as (worker, _router):
        before = worker.ctx.store.facts().rows
        release = threading.Event()
        for _ in range(worker.config.threads):
            worker.pool.submit(release.wait)
        try:
            write_rules(Path(worker.config.db), TENANT, later="a row the count has not seen")
            worker._dispatch(request_frames("1", "status", {}, worker.config.db))
            assert wait_until(lambda: bool(worker._answers), timeout=15), \
                "the status waited behind the pool's ops"
            assert not release.is_set() and worker.pool.threads == worker.config.threads
            reply = orjson.loads(worker._answers[0][1])
            assert reply["ok"], reply
            assert reply["result"]["rows"]["entity"] == before["entity"] + 1, reply
        finally:
            release.set()
