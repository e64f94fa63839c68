"""A session's `note_write` is taken before the worker reads its next request.

kint-server casts `note_write` for each write its tool path made and may send `push` right
after (memory_remember, then memory_push). Had the note gone to the op pool, the push could
run the hold's check on another thread before the note was taken, and be HELD for the
session's own write (seen once in tests/test_mcp_faults.py). Here every pool thread is
busy, so a note that went to the pool would wait behind them: it must be taken at once.
"""

from __future__ import annotations

import threading

from bare_worker import answer, bare_worker, request_frames
from kint.rows.canon import canonical_id


def test_a_note_is_taken_before_the_next_request_even_with_every_pool_thread_busy(tmp_path):
    release = threading.Event()
    with bare_worker(tmp_path, b"\x04" * 32) as (worker, router):
        try:
            worker.ctx.drift.reset([])  # a session attached: the baseline is live
            for _ in range(worker.config.threads):
                worker.pool.submit(release.wait)
            leaf = "ab" * 32
            worker._dispatch(request_frames("9", "note_write", {
                "tier": "entity", "category": "rules", "key": "release-gate", "leaf": leaf},
                worker.config.db))

            # Private state read on purpose: what the hold's check will compare against.
            noted = worker.ctx.drift._leaves
            assert noted == {canonical_id("entity", "rules", "release-gate"): leaf}
            header, reply = answer(router)
            assert header["id"] == "9" and reply["ok"] is True, reply
        finally:
            release.set()
