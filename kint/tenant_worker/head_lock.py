"""The head lock (docs/how-it-works.md, "The head lock"): an exclusive flock on
`head-<space>.lock` that push, pull, compact and rekey hold, so two processes on one
machine take turns on a space's head instead of racing. Between machines, the chain head
decides.

`head_op` is how an op takes it: first this worker's own lock (a second head-moving op of
the space is refused BUSY at once), then the file."""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from kint.paths import ensure_private_dir
from kint.pid_file_lock import flock_by, open_own_file
from kint.protocol import ErrorCode, ProtocolError

if TYPE_CHECKING:
    from kint.tenant_worker.space import SpaceContext

RETRY_S = 0.2
WAIT_S = 30.0
MESSAGE = "another kint process holds the head lock for this space"
IN_THIS_WORKER = "a push, pull or connect is already running for this space"
BUSY_HINT = ("wait for it to end (`kint supervisor status` shows it while it runs), then try "
             "again")


class HeadLockBusy(Exception):
    def __init__(self) -> None:
        super().__init__(MESSAGE)


@contextmanager
def head_lock(path: Path, wait_s: float = WAIT_S) -> Iterator[None]:
    ensure_private_dir(path.parent)
    fd = open_own_file(path)  # a link there: NotOwnFile, CORRUPT_STATE (state_health)
    try:
        if not flock_by(fd, time.monotonic() + wait_s, RETRY_S):
            raise HeadLockBusy()
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def busy(running: tuple[str, float] | None) -> ProtocolError:
    """BUSY naming the op that holds the space, and how long it has run: after a command
    stopped by Ctrl-C, its op goes on, and a second try met "a push, pull or connect" when
    the user had sent a join. `running` is read once (None when that op just ended)."""
    if running is None:
        return ProtocolError(ErrorCode.BUSY, IN_THIS_WORKER, BUSY_HINT)
    op, began = running
    return ProtocolError(ErrorCode.BUSY, f"a {op} is already running for this space (for "
                         f"{max(0, int(time.monotonic() - began))} s)", BUSY_HINT)


@contextmanager
def head_op(ctx: "SpaceContext", op: str, lock_file: bool = True) -> Iterator[None]:
    """One head-moving op of the space (`op`: push, pull, connect, rekey) at a time: BUSY
    at once when this worker already runs one, BUSY when another process keeps the head
    lock past its wait. The op and when it began go beside its progress line; both are
    cleared when it ends, however it ends."""
    if not ctx.head_ops.acquire(blocking=False):
        raise busy(ctx.head_op_began)
    ctx.head_op_began = (op, time.monotonic())
    try:
        if lock_file:
            with head_lock(ctx.state.files["head_lock"]):
                yield
        else:
            yield
    except HeadLockBusy as err:
        raise ProtocolError(ErrorCode.BUSY, str(err)) from None
    finally:
        ctx.progress = None
        ctx.head_op_began = None
        ctx.head_ops.release()
