"""A session's `note_write` is taken before the worker reads its next request.

kint-server casts `note_write` for each write its tool path made and may send `push` right
after (memory_remember, then memory_push). Had the note gone to the op pool, the push could
run the hold's check on another thread before the note was taken, and be HELD for the
session's own write (seen once in tests/test_mcp_faults.py). Here every pool thread is
busy, so a note that went to the pool would wait behind them: it must be taken at once.
"""

from __future__ import annotations

import os
import threading

import orjson
import zmq

from conftest import TENANT, write_store
from kint.protocol import worker_wire
from kint.rows.canon import canonical_id


def test_a_note_is_taken_before_the_next_request_even_with_every_pool_thread_busy(tmp_path):
    from kint.tenant_worker.config import WorkerConfig
    from kint.tenant_worker.process import Worker

    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    address = f"ipc://{tmp_path}/back.sock"
    router = zmq.Context.instance().socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(address)
    cfg = WorkerConfig(space_id="cd" * 32, label=TENANT, tenant=TENANT,
                       db=str(write_store(tmp_path / "memory.db")), kint_home=str(home),
                       back_address=address, supervisor_pid=os.getpid(), idle_beat_s=2.5)
    worker = Worker(cfg, b"\x04" * 32)
    release = threading.Event()
    try:
        worker.dealer.connect(address)
        worker.ctx.drift.reset([])  # a session attached: the baseline is live
        for _ in range(cfg.threads):
            worker.pool.submit(release.wait)
        leaf = "ab" * 32
        request = {"v": 1, "id": "c1", "op": "note_write", "tenant": TENANT, "db": cfg.db,
                   "space": TENANT, "timeout_ms": 30_000,
                   "args": {"tier": "entity", "category": "rules", "key": "release-gate",
                            "leaf": leaf}}
        frames = [zmq.Frame(part) for part in worker_wire.encode(
            {"kind": "req", "id": "9"}, orjson.dumps(request))]

        worker._dispatch(frames)

        # Private state read on purpose: what the hold's check will compare against.
        noted = worker.ctx.drift._leaves
        assert noted == {canonical_id("entity", "rules", "release-gate"): leaf}
        assert router.poll(10_000)
        _route, header, body = router.recv_multipart()
        assert orjson.loads(header)["id"] == "9"
        assert orjson.loads(body)["ok"] is True
    finally:
        release.set()
        worker.close()
        router.close()
