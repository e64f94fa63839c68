"""A worker stopped for real (SIGSTOP) until the supervisor judges it hung: it is declared
down at once, its client answered WORKER_DOWN by the supervisor, and nothing the old
process sends afterwards reaches a client; its SIGTERM comes with a SIGCONT, so it exits on
its own handler instead of waiting, stopped, for the SIGKILL after the kill grace; and a
new worker answers the space's next request.

And the worker's side of it: a worker whose SIGTERM has come starts nothing more, not even
what reached it while it was stopped and is read in the same turn of its loop; and a worker
stopping with an op in flight that was itself stopped past its stop grace still finishes
the op once continued.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import orjson
import pytest
import zmq

from bare_worker import answer, bare_worker, request_frames
from conftest import TENANT, make_sandbox, pid_alive, wait_until, write_store
from kint.socket_paths import front_address

HEARTBEAT_TIMEOUT_S = 3


@pytest.fixture
def box(tmp_path):
    sb = make_sandbox(tmp_path / "machine",
                      KINT_WORKER_HEARTBEAT_TIMEOUT=str(HEARTBEAT_TIMEOUT_S))
    write_store(sb.sibyl_db)
    sb.start()
    yield sb
    sb.shutdown()


def _status(sb, rid: str) -> bytes:
    db = sb.sibyl_db
    return orjson.dumps({"v": 1, "id": rid, "op": "status", "tenant": TENANT, "db": str(db),
                         "space": sb.label(db), "args": {}, "timeout_ms": 60_000})


def _recv(sock, timeout_s: float) -> dict:
    assert sock.poll(timeout_s * 1000), "no reply"
    return orjson.loads(sock.recv())


def _log_lines(sb, pid: int) -> list[str]:
    text = (sb.kint_home / "supervisor.log").read_text(errors="replace")
    return [line for line in text.splitlines() if f"worker {pid} " in line]


def test_a_stopped_worker_is_declared_down_exits_on_its_sigterm_and_is_replaced(box):
    db = box.sibyl_db
    old = box.call("status", db)["worker"]["pid"]
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(front_address(box.kint_home))
    os.kill(old, signal.SIGSTOP)
    try:
        # Sent while the space still counts as ready (its silence is under the timeout):
        # forwarded into the stopped worker's pipe, where it waits unread.
        sock.send(_status(box, "sent-to-stopped"))
        down = _recv(sock, HEARTBEAT_TIMEOUT_S + 30)
        assert down["id"] == "sent-to-stopped" and down["ok"] is False, down
        assert down["error"] == "WORKER_DOWN", down
        # The supervisor's own answer, not one from the old process (which, continued,
        # would answer the request it finds: "the worker is stopping", or its result).
        assert "is hung (no heartbeat for " in down["message"], down
        assert "whether status ran is unknown" in down["message"], down

        # The space's next request waits for, and is answered by, a new worker.
        sock.send(_status(box, "next"))
        answer = _recv(sock, 30)
        assert answer["id"] == "next" and answer["ok"] is True, answer
        new = answer["result"]["worker"]["pid"]
        assert new != old

        # The old process is gone, and went on its own SIGTERM handler (a clean exit, code
        # 0) rather than the SIGKILL due after the 5 s kill grace.
        assert wait_until(lambda: not pid_alive(old), timeout=30), f"{old} still runs"
        exited = wait_until(lambda: [line for line in _log_lines(box, old)
                                     if f"worker {old} hung (" in line], timeout=10)
        assert len(exited) == 1 and exited[0].endswith("exited with code 0"), exited
        assert not [line for line in _log_lines(box, old) if "SIGKILL" in line
                    and "is hung" not in line], _log_lines(box, old)

        # Nothing else comes to the client: not the old worker's answer to the request it
        # found on waking, nor a second answer to either request. The old worker is gone
        # and its exit logged by now, so whatever it sent is already in the supervisor's
        # hands: a second (four of its turns and more) is the look, not the wait for it.
        assert not sock.poll(1000), orjson.loads(sock.recv())
        log = (box.kint_home / "supervisor.log").read_text(errors="replace")
        assert "refused a message" not in log  # its last words were dropped, not refused
        assert box.call("status", db)["worker"]["pid"] == new
    finally:
        sock.close()
        if pid_alive(old):
            os.kill(old, signal.SIGCONT)


def test_a_worker_told_to_stop_starts_nothing_it_reads_after(tmp_path):
    """The worker's loop reads the SIGTERM's flag at the top of a turn; the requests that
    reached it while it was stopped can be read later in the same turn. Each is refused
    WORKER_DOWN, not run: a push would sign and send with nobody waiting for it."""
    with bare_worker(tmp_path, b"\x03" * 32) as (worker, router):
        worker.stop_requested.set()  # what its SIGTERM handler does, and all it does
        worker._dispatch(request_frames("7", "status", {}, worker.config.db))
        header, reply = answer(router)
        assert header["id"] == "7"
        assert reply["id"] == "c1" and reply["ok"] is False, reply
        assert reply["error"] == "WORKER_DOWN" and reply["message"] == "the worker is stopping"
        assert worker.inflight.snapshot()[0] == 0


class _Clock:
    """The worker loop's monotonic clock, which a test can move on at once, as it moves for
    a process that was stopped; `reads` counts the loop's looks at it."""

    def __init__(self) -> None:
        self.skipped = 0.0
        self.reads = 0

    def monotonic(self) -> float:
        self.reads += 1
        return time.monotonic() + self.skipped


def test_a_stopping_worker_stopped_past_its_grace_still_finishes_its_op(tmp_path, monkeypatch):
    """A Ctrl-Z stops a foreground supervisor's whole process group. A worker told to stop
    (a recycle) with an op in flight had its 10 s grace run out on its own clock while it
    was stopped, and on `fg` it exited at its next turn, cutting the op (a push between its
    send and its receipt, its journal left to the next worker). Its grace now counts from
    its resume: it waits for the op, and exits once it ends."""
    from kint.tenant_worker import process, stop_grace

    clock = _Clock()
    monkeypatch.setattr(process, "time", clock)
    with bare_worker(tmp_path, b"\x05" * 32) as (worker, _router):
        worker.inflight.start("op-1", "push")
        worker.stopping = True  # a stop the supervisor sent (a recycle)
        served: list[int] = []
        loop = threading.Thread(target=lambda: served.append(worker.serve()), daemon=True)
        loop.start()
        try:
            assert wait_until(lambda: clock.reads >= 20, timeout=30)  # stopping, waiting
            assert loop.is_alive()
            clock.skipped = stop_grace.STOP_GRACE_SECONDS + 20  # stopped past its whole grace
            seen = clock.reads
            # Many turns after the resume, or the loop's end: the op is not cut.
            wait_until(lambda: clock.reads >= seen + 40 or not loop.is_alive(), timeout=30)
            assert loop.is_alive(), "the worker exited with its op in flight on resuming"
        finally:
            worker.inflight.finish("op-1")
            loop.join(timeout=30)
        assert served == [0]
