"""The head lock (docs/how-it-works.md, "The head lock"): an exclusive flock on
`head-<space>.lock` that push, pull, compact and rekey hold, so two processes on one
machine take turns on a space's head instead of racing. Between machines, the chain head
decides.

`head_op` is how an op takes it: first this worker's own lock (a second head-moving op of
the space is refused BUSY at once), then the file. `settlement_op` is how a worker's start
settlement takes them: an op that comes meanwhile waits for it, as for the file."""

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
# The op a worker's start settlement names in `head_op_began` (rekey_settle.settle_at_start).
SETTLEMENT = "settlement of an interrupted push or rekey"
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
        running = ctx.head_op_began
        # The worker's own start settlement is no command the user could wait for: it
        # settles what this op would settle first, and a command sent just after a
        # restart was refused BUSY naming "a push, pull or connect" nobody ran (or, as
        # the settlement let go, none).
        if not (ctx.settling and ctx.head_ops.acquire(timeout=WAIT_S)):
            raise busy(running)
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


@contextmanager
def settlement_op(ctx: "SpaceContext") -> Iterator[None]:
    """The worker's start settlement: both locks, waited for (a command that holds them
    goes first), `ctx.settling` while held so that a command coming meanwhile waits for it
    rather than being refused (`head_op`), named SETTLEMENT in the beat and in the BUSY of
    a command that waited out WAIT_S. HeadLockBusy when the file stays held."""
    try:
        with ctx.head_ops:
            ctx.settling = True
            ctx.head_op_began = (SETTLEMENT, time.monotonic())
            try:
                with head_lock(ctx.state.files["head_lock"]):
                    yield
            finally:
                ctx.progress = None
                ctx.head_op_began = None
    finally:  # once let go: an op that found the lock held until now waits, not refused
        ctx.settling = False
