"""The head lock (16-limits.md, "Two machines writing at once"): one file lock per space,
`head-<space16>.lock` under KINT_HOME, so two kint processes on one machine do not push or
pull at once; the second waits up to 30 seconds, then stops with v0.3.0's words. The other
holder here is a real second process.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from kint.paths import space_files
from kint.tenant_worker.head_lock import MESSAGE, WAIT_S, HeadLockBusy, head_lock

SPACE16 = "fd83319f25a64bb2"
HOLDER = ("import fcntl, os, sys\n"
          "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
          "fcntl.flock(fd, fcntl.LOCK_EX)\n"
          "print('held', flush=True)\n"
          "sys.stdin.read()\n")


def test_a_second_process_waits_for_the_head_lock_then_stops_by_name(tmp_path):
    assert WAIT_S == 30.0
    assert MESSAGE == "another kint process holds the head lock for this space"
    home = tmp_path / "kint"
    path = space_files(home, SPACE16)["head_lock"]
    assert path == home / f"head-{SPACE16}.lock"
    with head_lock(path):
        assert path.is_file() and (path.stat().st_mode & 0o777) == 0o600
        assert (home.stat().st_mode & 0o777) == 0o700
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        started = time.monotonic()
        with pytest.raises(HeadLockBusy, match=f"^{MESSAGE}$"):
            with head_lock(path, wait_s=0.6):
                pytest.fail("took the head lock another process holds")
        assert time.monotonic() - started >= 0.6
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    with head_lock(path, wait_s=5):  # released with its holder
        pass


class _SeenLock:
    """The worker's real lock, telling when someone waits on it (an acquire that blocks)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waited = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if blocking:
            self.waited.set()
        return self.lock.acquire(blocking, timeout)

    def release(self) -> None:
        self.lock.release()

    def __enter__(self) -> bool:
        return self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def test_a_command_during_the_workers_start_settlement_waits_for_it(tmp_path):
    """A pull that comes while the worker's own start settlement holds the space waits
    for it, then runs; it was refused BUSY at once, as behind a user's push, naming "a
    push, pull or connect" nobody ran (CI's pull sent as a settlement let go). A second
    command beside a user's op is still BUSY at once."""
    from kint.protocol import ProtocolError
    from kint.tenant_worker.config import WorkerConfig
    from kint.tenant_worker.head_lock import head_op, settlement_op
    from kint.tenant_worker.process import Worker

    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    cfg = WorkerConfig(space_id="ef" * 32, label="t", tenant="t", db=str(tmp_path / "m.db"),
                       kint_home=str(home), back_address="ipc:///unused", supervisor_pid=1,
                       idle_beat_s=2.5)
    worker = Worker(cfg, b"\x01" * 32)  # not serving: only its space's context is used
    ctx = worker.ctx
    ctx.head_ops = seen = _SeenLock()
    order: list[str] = []
    holding = threading.Event()

    def settle() -> None:
        with settlement_op(ctx):
            holding.set()
            seen.waited.wait(30)  # the pull waits on the space: only then let go
            order.append("settled")

    settlement = threading.Thread(target=settle)
    try:
        settlement.start()
        assert holding.wait(30)
        seen.waited.clear()
        with head_op(ctx, "pull", lock_file=False):
            order.append(ctx.head_op_began[0])
        settlement.join(30)
        assert order == ["settled", "pull"]
        assert not ctx.settling and ctx.head_op_began is None
        with head_op(ctx, "push", lock_file=False):
            with pytest.raises(ProtocolError, match="a push is already running"):
                with head_op(ctx, "pull", lock_file=False):
                    pytest.fail("a second command ran beside a push")
    finally:
        seen.waited.set()
        settlement.join(30)
        worker.close()
