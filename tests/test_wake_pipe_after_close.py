"""A pool thread that outlives the worker's stop grace writes its wake byte after the
worker closed its wake pipe (kint/tenant_worker/wake_pipe.py).

A real Worker (not serving: tests/bare_worker.py) with its real op pool: the op held on
an event stands in for one slow past the 10 s grace (the test's own function, run by the
pool and answered through the worker's own `_send_reply`, as every op's answer is). Once
the worker is closed, the write end's number is given to a file, as the kernel hands the
lowest free number to the next open; the late answer and a late `beat_soon` must write
nothing into it.
"""

from __future__ import annotations

import os
import threading

from bare_worker import bare_worker
from conftest import wait_until


def test_a_late_answer_after_close_writes_nothing_into_the_fd_number_reused(tmp_path):
    release = threading.Event()
    ended = threading.Event()
    victim = tmp_path / "reused.bin"
    with bare_worker(tmp_path, b"\x0b" * 32) as (worker, _router):
        write_fd = worker.wake_pipe.write_fd

        def slow_op() -> tuple[str, list[bytes]]:
            release.wait(30)
            return "late", [b"x"]

        def answered(answer: tuple[str, list[bytes]]) -> None:
            try:
                worker._send_reply(answer)
                worker.beat_soon()
            finally:
                ended.set()

        worker.inflight.start("late", "status")
        worker.pool.submit(slow_op, then=answered)
        worker.close()  # the grace ran out: the worker goes, the op still runs
        fd = os.open(victim, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            if fd != write_fd:  # the number the pipe's write end had, as the kernel may give
                os.dup2(fd, write_fd)
                os.close(fd)
            release.set()
            assert wait_until(ended.is_set, timeout=10)
            assert victim.read_bytes() == b""
        finally:
            os.close(write_fd)
