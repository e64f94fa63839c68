"""The head lock (docs/how-it-works.md, "The head lock"): an exclusive flock on
`head-<space>.lock` that push, pull, compact and rekey hold, so two processes on one
machine take turns on a space's head instead of racing. Between machines, the chain head
decides.

`head_op` is how an op takes it: first this worker's own turn on the space (`HeadTurn`: a
second head-moving op of the space is refused BUSY at once, but for a closing server's exit
push, which waits its turn, one at a time, until the worker stops: `_wait_turn`; once
the worker's stop began, the store watcher's push does not take it: `TurnStopped`), then
the file (for the worker's own pushes, the watcher's and the exit push's, a wait the stop
ends too: `_flock_unless_stopped`).
`settlement_op` is how a worker's start settlement takes them: an op that comes
meanwhile waits for it, as for the file."""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from kint.paths import ensure_private_dir
from kint.pid_file_lock import flock_by, open_own_file
from kint.protocol import ErrorCode, ProtocolError

if TYPE_CHECKING:
    from kint.tenant_worker.space import SpaceContext

log = logging.getLogger("kint.worker")

RETRY_S = 0.2
WAIT_S = 30.0
MESSAGE = "another kint process holds the head lock for this space"
# A worker's start settlement's one name (rekey_settle.settle_at_start), wherever a user
# meets it: in flight (the beat's `op`, so `kint supervisor status`'s OP column and a
# TIMEOUT's "running settlement") and as the space's holder (`head_op_began`, so a BUSY).
# It was "resolve_pending" in the first and a sentence in the second, while the BUSY's
# hint sent the user to the first to see it.
SETTLEMENT = "settlement"
# What a BUSY says of an op beyond its name.
_SAID = {SETTLEMENT: "settlement of an interrupted push or rekey"}
BUSY_HINT = ("wait for it to end (`kint supervisor status` shows it while it runs), then try "
             "again")


class HeadTurn:
    """This worker's turn on its space's head: held by one head-moving op, or by the start
    settlement (`settling`), at a time. One Condition guards whether it is held, whether by
    the settlement, and the holder's name (`ctx.head_op_began`), which change together:
    with a Lock and a flag set apart, a command that came as the settlement took the space
    was refused naming no op, one that came as it let go waited 30 s behind the command
    that took the space next, and one that had waited for it went on waiting behind that
    command, then was refused naming the settlement that had ended."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.held = False
        self.settling = False
        # Until when (time.monotonic()) the op that waits its turn (`_wait_turn`) waits: its
        # own deadline. None while none waits: one at a time, so waiters never fill the op
        # pool. `waiter` counts the waits begun; the one waiting is the latest.
        self.wait_until: float | None = None
        self.waiter = 0
        # Why the worker stops, once it does (`stop`): a waiting op gives up, none starts.
        self.stopped: str | None = None

    def stop(self, reason: str | None) -> None:
        """The worker stops (a stop, recycle, restart, upgrade, SIGTERM): an op waiting its
        turn ends refused now, rather than be killed unlogged at the stop's grace, and the
        store watcher's push, which no stop refuses at dispatch, takes the turn no more
        (`_take`'s `refuse_stopping`, TurnStopped): taken in the grace, it started a chain
        push that the grace could cut between its send and its receipt. Either of these
        pushes of the worker's own that holds its turn and waits for another process's head
        lock is woken and refused the same way (`_flock_unless_stopped`). A request's op
        the worker took before the stop still takes the turn and runs in the grace.
        The first reason is kept: a second stop message (the supervisor's own stop or
        upgrade, or `kint supervisor restart`, after an idle or recycle stop or a restart)
        renamed it, as did the loop's call as the grace begins, which passes the reason the
        last message gave, so a line written after it named a reason the worker did not stop
        for, and two lines of one stop differed."""
        with self.changed:
            if self.stopped is None:
                self.stopped = f"the worker is stopping ({reason or 'stop'})"
            self.changed.notify_all()


class TurnTaken(ProtocolError):
    """BUSY because an op of this worker holds the space's turn (`busy`): what the store
    watcher skips its push for, since the store stays dirty and the tick after the op ends
    can push (watcher.py). Told from the file lock's BUSY (another kint process: `head_op`,
    a plain ProtocolError, which the watcher waits out as a failure) by its class, not its
    words, which name the op."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.BUSY, message, BUSY_HINT)


class TurnStopped(ProtocolError):
    """WORKER_DOWN because the worker's stop began (HeadTurn.stop): the store watcher's push
    (`_take`'s `refuse_stopping`) or a waiting exit push (`_wait_turn`) does not take the
    space's turn, nor either of them, at its turn, another process's head lock
    (`_flock_unless_stopped`). What the store watcher and the exit push's line
    (sessions.exit_push) read as no failure (the rows wait for the next push),
    told from other refusals by its class."""

    def __init__(self, reason: str) -> None:
        super().__init__(ErrorCode.WORKER_DOWN, reason)


class TurnLeft(Exception):
    """An op that would wait its turn (`_wait_turn`) found another already waiting: it leaves
    its work to that one (push.py says what that means for an exit push). Not a
    ProtocolError: no failure, so the closing server's log does not read it as one."""


class HeadLockBusy(Exception):
    def __init__(self) -> None:
        super().__init__(MESSAGE)


@contextmanager
def head_lock(path: Path, wait_s: float | None = None,
              turn: HeadTurn | None = None) -> Iterator[None]:
    """The file lock on `path`, waited for up to `wait_s`, else WAIT_S as it is at the call
    (not at import: the settlement's wait was bound then while an op's was read at each
    call, so the two could differ). `turn`: refused TurnStopped once its stop began, while
    it waits or as it takes the lock (`_flock_unless_stopped`)."""
    if wait_s is None:
        wait_s = WAIT_S
    ensure_private_dir(path.parent)
    fd = open_own_file(path)  # a link there: NotOwnFile, CORRUPT_STATE (state_health)
    try:
        deadline = time.monotonic() + wait_s
        if not (flock_by(fd, deadline, RETRY_S) if turn is None
                else _flock_unless_stopped(fd, deadline, turn)):
            raise HeadLockBusy()
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _flock_unless_stopped(fd: int, deadline: float, turn: HeadTurn) -> bool:
    """The file's lock as flock_by takes it, for a push the worker's stop refuses (its own:
    the store watcher's and the exit push's, `refuse_stopping`): such a push passed the
    stop's gate at the space's turn (`_take`, `_wait_turn`) and then waited up to WAIT_S
    for another process's hold of the file, which no stop ended. The worker's stop waited
    for it (it holds the turn) to the grace's end, and a holder that let go meanwhile gave
    it the lock: it started its chain push in the grace, which the gate is there to
    prevent (the exit push's too: none of the worker's own pushes starts in the grace, and
    what it would push stays in the store for the next push). Here the
    stop (HeadTurn.stop, which wakes this wait) ends the wait refused TurnStopped, and a
    lock taken as the stop begins is let go refused the same way, before anything is
    sent."""
    while True:
        with turn.changed:
            _refuse_stopped(turn)
        # One try: with its deadline already past, flock_by tries once and never sleeps
        # (False: another process holds the file); the wait is this loop's, on the turn.
        if flock_by(fd, time.monotonic(), RETRY_S):
            with turn.changed:
                if turn.stopped is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    raise TurnStopped(turn.stopped)
            return True
        with turn.changed:
            # A stop since the try is refused as one at the deadline too, where BUSY made
            # the watcher log the backoff's failure, not its `not started` line.
            _refuse_stopped(turn)
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            turn.changed.wait(min(RETRY_S, left))


def busy(running: tuple[str, float] | None) -> TurnTaken:
    """BUSY naming the op that holds the space, and how long it has run: after a command
    stopped by Ctrl-C, its op goes on, and a second try met "a push, pull or connect" when
    the user had sent a join. `running` is read under the turn's Condition (`_take`), which
    sets and clears it with the turn: None (so "a push, pull or connect", no time) only for
    a holder that named itself nowhere."""
    return TurnTaken(f"a {named(running)} is already running for this space{_for(running)}")


def named(running: tuple[str, float] | None) -> str:
    """What the op that holds the space (head_op_began) is called where a user reads it."""
    return "push, pull or connect" if running is None else _SAID.get(running[0], running[0])


def _for(running: tuple[str, float] | None) -> str:
    """How long the op that holds the space has run, as a BUSY says it after its name
    (`busy`, `waited_out`); nothing for a holder that named itself nowhere."""
    return "" if running is None else \
        f" (for {max(0, int(time.monotonic() - running[1]))} s)"


def _take(ctx: "SpaceContext", op: str, refuse_stopping: bool = False) -> None:
    """The space's turn for `op`, or BUSY naming what holds it, read as it is refused. Only
    the start settlement is waited for, up to WAIT_S: it is no command the user could wait
    for, and it settles what this op would settle first (a command sent just after a
    restart was refused BUSY). Once it lets go, a command it held that finds another one
    took the space is refused at once, as it would have been had it come then.

    `refuse_stopping` (the store watcher's push, chosen by its caller, never by a
    request's args) is refused TurnStopped once the worker's stop began, whatever it
    waited for: no stop refuses that push at dispatch, and taken in the grace it started a
    chain push the grace's end could cut between its send and its receipt. A request's op
    (push, pull, connect, rekey) is not: the worker took it before its stop, and it runs
    in the stop's grace as any request in flight does (README: such requests still get
    their answers when they finish within it). Nor is the start settlement (settlement_op,
    the one other way to the turn but `_wait_turn`, where the exit push's wait is
    refused): the worker submits it before it serves and counts it in flight, as it does
    a request it took before its stop, so it runs in the grace too."""
    turn = ctx.head_ops
    deadline = time.monotonic() + WAIT_S
    with turn.changed:
        while True:  # the stop looked at before the first look and after every wait
            if refuse_stopping:
                _refuse_stopped(turn)
            if not turn.held:
                break
            left = deadline - time.monotonic()
            if not turn.settling or left <= 0:
                raise busy(ctx.head_op_began)
            turn.changed.wait(left)
        _hold(ctx, op)


def _wait_turn(ctx: "SpaceContext", op: str, wait_until: float) -> None:
    """The turn for an op that waits for any holder, and for the next if another op takes
    the turn first, until `wait_until` (time.monotonic(), its own deadline, computed once by
    its caller: exit_bound.py), rather than be refused BUSY: a closing kint-server's exit
    push (push.push), which nobody is left to try again, so a refusal left the session's
    last rows to the watcher's next push, if one came before the worker idled out. Its wait
    is logged once, naming the holder (the log is where a closing server's exit push is
    read). One such op waits at a time: each sat on a thread of the worker's op pool, so
    four of them filled it and every other op of the space (an attach's keepalive, a
    verify) waited behind the holder. Of two, the one whose deadline is later waits and the
    other leaves its work to it (TurnLeft): the push it would have made reads the whole
    store, so its rows are in the push of the one that waits, which waits at least as long
    as it would have. No deadline is moved onto another op's wait (a later op moved the
    waiting one's to its own, so that one waited past its own request's deadline at the
    supervisor and pushed unseen, its reply dropped): a later one whose deadline is later
    takes the wait over (`turn.waiter`), and the one waiting leaves. A worker that stops
    ends the wait refused WORKER_DOWN (HeadTurn.stop, TurnStopped)."""
    turn = ctx.head_ops
    began = time.monotonic()
    with turn.changed:
        _refuse_stopped(turn)
        if not turn.held:
            _hold(ctx, op)
            return
        if turn.wait_until is not None and turn.wait_until >= wait_until:
            raise TurnLeft()
        # None waits, or the one waiting gives up sooner: this one waits in its place.
        turn.waiter += 1
        me = turn.waiter
        turn.wait_until = wait_until
        turn.changed.notify_all()  # the one it replaces leaves now
        running = ctx.head_op_began
    try:
        # Logged out of the lock: a slow log write holds no one's turn.
        log.info("space %s: exit push waits for the %s running for this space to end "
                 "(up to %d s)", ctx.config.space16, named(running),
                 round(wait_until - began))
    except BaseException:
        with turn.changed:
            if turn.waiter == me:
                turn.wait_until = None
        raise
    with turn.changed:
        try:
            while turn.held and turn.stopped is None:
                if turn.waiter != me:  # a later one waits in its place
                    raise TurnLeft()
                left = wait_until - time.monotonic()
                if left <= 0:
                    raise waited_out(ctx.head_op_began, time.monotonic() - began)
                turn.changed.wait(left)
            _refuse_stopped(turn)
            if turn.waiter != me:
                raise TurnLeft()
            _hold(ctx, op)
        finally:
            # In the same hold of the lock as the give-up: an op coming after it waits
            # itself, never leaves its work to one that has given up.
            if turn.waiter == me:
                turn.wait_until = None


def _refuse_stopped(turn: HeadTurn) -> None:
    if turn.stopped is not None:
        raise TurnStopped(turn.stopped)


def waited_out(running: tuple[str, float] | None, seconds: float) -> TurnTaken:
    """BUSY for an op that waited its whole `seconds` for the space: it says it waited,
    where `busy`'s "is already running" read as refused at once."""
    return TurnTaken(f"waited {round(seconds)} s for the {named(running)} running for this "
                     f"space{_for(running)} to end")


def _hold(ctx: "SpaceContext", op: str) -> None:
    """The turn taken by `op`, under the turn's Condition."""
    ctx.head_ops.held = True
    ctx.head_op_began = (op, time.monotonic())


def _let_go(ctx: "SpaceContext") -> None:
    """The turn given back, with the holder's name and progress line, waking whoever waits
    for it (the settlement behind a command, commands behind the settlement)."""
    turn = ctx.head_ops
    with turn.changed:
        ctx.progress = None
        ctx.head_op_began = None
        turn.held = turn.settling = False
        turn.changed.notify_all()


@contextmanager
def head_op(ctx: "SpaceContext", op: str, lock_file: bool = True,
            wait_until: float | None = None, refuse_stopping: bool = False) -> Iterator[None]:
    """One head-moving op of the space (`op`: push, pull, connect, rekey) at a time: BUSY
    at once when this worker already runs one (unless it waits its turn, until
    `wait_until`, time.monotonic():
    `_wait_turn`), BUSY when another process keeps the head lock past its wait, however it
    waited for its turn. The op and when it began go beside its progress line; both are
    cleared when it ends, however it ends. The worker's start settlement is waited for
    (`_take`). `refuse_stopping` (the worker's own pushes, sessions.server_push): refused
    once the worker's stop began, the store watcher's push at its turn (`_take`; an exit
    push's wait for its turn is refused by `_wait_turn` either way), and either one's wait
    for another process's head lock too (`_flock_unless_stopped`): once the stop began, no
    push of the worker's own starts in its grace."""
    if wait_until is None:
        _take(ctx, op, refuse_stopping)
    else:
        _wait_turn(ctx, op, wait_until)
    turn = ctx.head_ops
    try:
        if lock_file:
            with head_lock(ctx.state.files["head_lock"],
                           turn=turn if refuse_stopping else None):
                yield
        else:
            yield
    except HeadLockBusy as err:
        raise ProtocolError(ErrorCode.BUSY, str(err)) from None
    finally:
        _let_go(ctx)


@contextmanager
def settlement_op(ctx: "SpaceContext") -> Iterator[None]:
    """The worker's start settlement: the space's turn, waited for (a command that holds
    it goes first) and held as `settling`, so that a command coming meanwhile waits for it
    rather than being refused (`_take`); then the file. Named SETTLEMENT in the BUSY of a
    command that waited out WAIT_S (the beat's `op` names it too: the worker counts it in
    flight under that name, process.Worker.settle_at_start). HeadLockBusy when the file
    stays held. Not refused once the worker's stop began (`_take`'s `refuse_stopping`):
    submitted before the worker serves and counted in flight, it runs in the stop's grace
    as a request the worker took before its stop does."""
    turn = ctx.head_ops
    with turn.changed:
        turn.changed.wait_for(lambda: not turn.held)
        turn.held = turn.settling = True
        ctx.head_op_began = (SETTLEMENT, time.monotonic())
    try:
        with head_lock(ctx.state.files["head_lock"]):
            yield
    finally:
        _let_go(ctx)
