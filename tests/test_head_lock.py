"""The head lock (16-limits.md, "Two machines writing at once"): one file lock per space,
`head-<space16>.lock` under KINT_HOME, so two kint processes on one machine do not push or
pull at once; the second waits up to 30 seconds, then stops with v0.3.0's words. The other
holder here is a real second process.
"""

from __future__ import annotations

import logging
import re
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


class _SeenTurn(threading.Condition):
    """The worker's real Condition of its turn on the space (HeadTurn.changed), counting
    the waits on it, so a test lets go of the space only once its commands wait."""

    def __init__(self) -> None:
        super().__init__()
        self.waits = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1  # under the Condition's lock
        return super().wait(timeout)

    def waiting(self, count: int) -> bool:
        """Whether `count` waits have begun, looked at for up to 30 s."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with self:
                if self.waits >= count:
                    return True
            time.sleep(0.01)
        return False


def _worker(tmp_path):
    """A worker not serving: only its space's context is used, its turn's waits counted."""
    from kint.tenant_worker.config import WorkerConfig
    from kint.tenant_worker.process import Worker

    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    cfg = WorkerConfig(space_id="ef" * 32, label="t", tenant="t", db=str(tmp_path / "m.db"),
                       kint_home=str(home), back_address="ipc:///unused", supervisor_pid=1,
                       idle_beat_s=2.5)
    worker = Worker(cfg, b"\x01" * 32)
    worker.ctx.head_ops.changed = seen = _SeenTurn()
    return worker, seen


def _settling(ctx, let_go: threading.Event) -> tuple[threading.Thread, threading.Event]:
    """The worker's start settlement on a thread of its own, holding the space until
    `let_go` is set."""
    from kint.tenant_worker.head_lock import settlement_op

    holding = threading.Event()

    def settle() -> None:
        with settlement_op(ctx):
            holding.set()
            let_go.wait(30)

    settlement = threading.Thread(target=settle)
    settlement.start()
    return settlement, holding


def test_a_command_during_the_workers_start_settlement_waits_for_it(tmp_path):
    """A pull that comes while the worker's own start settlement holds the space waits
    for it, then runs; it was refused BUSY at once, as behind a user's push, naming "a
    push, pull or connect" nobody ran (CI's pull sent as a settlement let go). A second
    command beside a user's op is still BUSY at once."""
    from kint.protocol import ProtocolError
    from kint.tenant_worker.head_lock import head_op

    worker, seen = _worker(tmp_path)
    ctx = worker.ctx
    let_go = threading.Event()
    order: list[str] = []
    settlement, holding = _settling(ctx, let_go)
    try:
        assert holding.wait(30)

        def release() -> None:
            if seen.waiting(1):  # the pull waits on the space: only then let go
                order.append("settled")
            let_go.set()

        releaser = threading.Thread(target=release)
        releaser.start()
        with head_op(ctx, "pull", lock_file=False):
            order.append(ctx.head_op_began[0])
        releaser.join(30)
        settlement.join(30)
        assert order == ["settled", "pull"]
        assert not ctx.head_ops.settling and ctx.head_op_began is None
        with head_op(ctx, "push", lock_file=False):
            with pytest.raises(ProtocolError, match="a push is already running"):
                with head_op(ctx, "pull", lock_file=False):
                    pytest.fail("a second command ran beside a push")
    finally:
        let_go.set()
        settlement.join(30)
        worker.close()


def test_a_command_behind_the_settlement_is_refused_naming_what_holds_the_space(
        tmp_path, monkeypatch):
    """Two commands wait for the start settlement; once it lets go, one takes the space
    and the other is refused BUSY at once naming it. It went on waiting behind that one,
    then was refused naming the settlement that had ended, its age counted from the
    settlement's start (review28f). One that waits the settlement out is refused naming
    it, by the name `kint supervisor status` shows (SETTLEMENT)."""
    from kint.protocol import ErrorCode, ProtocolError
    from kint.tenant_worker import head_lock as head_lock_mod
    from kint.tenant_worker.head_lock import SETTLEMENT, head_op

    monkeypatch.setattr(head_lock_mod, "WAIT_S", 10.0)
    worker, seen = _worker(tmp_path)
    ctx = worker.ctx
    let_go = threading.Event()
    answered = threading.Event()  # the refused one's: only then the other lets go
    said: dict[str, str] = {}
    holder: list[str] = []

    def command(op: str) -> None:
        try:
            with head_op(ctx, op, lock_file=False):
                holder.append(op)
                answered.wait(30)
        except ProtocolError as err:
            said[op] = f"{err.code.value}: {err.message}"
            answered.set()

    settlement, holding = _settling(ctx, let_go)
    commands = [threading.Thread(target=command, args=(op,)) for op in ("pull", "push")]
    try:
        assert holding.wait(30)
        commands[0].start()
        assert seen.waiting(1)
        commands[1].start()
        assert seen.waiting(2)
        let_go.set()
        for thread in commands:
            thread.join(60)
        assert len(holder) == 1 and len(said) == 1, (holder, said)
        (refused, message), = said.items()
        assert refused != holder[0]
        assert re.fullmatch(f"{ErrorCode.BUSY.value}: a {holder[0]} is already running for "
                            r"this space \(for \d+ s\)", message), message

        monkeypatch.setattr(head_lock_mod, "WAIT_S", 0.5)
        let_go.clear()
        settlement, holding = _settling(ctx, let_go)
        assert holding.wait(30)
        with pytest.raises(ProtocolError) as refusal:
            with head_op(ctx, "pull", lock_file=False):
                pytest.fail("ran beside the settlement")
        assert SETTLEMENT == "settlement"
        assert refusal.value.message.startswith(
            "a settlement of an interrupted push or rekey is already running for this space")
        assert "`kint supervisor status` shows it" in refusal.value.hint
    finally:
        let_go.set()
        answered.set()
        settlement.join(30)
        for thread in commands:
            thread.join(30)
        worker.close()


def test_once_the_workers_stop_began_the_watchers_push_is_refused_and_a_users_op_runs(
        tmp_path):
    """After HeadTurn.stop (the worker's stop began) the store watcher's push
    (refuse_stopping, as sessions.server_push asks) is refused WORKER_DOWN (TurnStopped):
    one waiting for the start settlement as the stop comes, not given the turn when the
    settlement lets go, and one on a free turn; either began a chain push the stop's grace
    could cut between its send and its receipt. A user's pull, taken by the worker before
    its stop and waiting for the settlement too, still takes the turn and runs in the
    grace, as README promises a request in flight (it was refused WORKER_DOWN unstarted
    when the gate held for every op, review34a M1)."""
    from kint.tenant_worker.head_lock import TurnStopped, head_op

    worker, seen = _worker(tmp_path)
    ctx = worker.ctx
    let_go = threading.Event()
    refused: list[TurnStopped] = []
    ran: list[str] = []
    settlement, holding = _settling(ctx, let_go)

    def watcher_push() -> None:
        try:
            with head_op(ctx, "push", lock_file=False, refuse_stopping=True):
                pytest.fail("the watcher's push took the turn in a stopping worker")
        except TurnStopped as err:
            refused.append(err)

    def pull() -> None:
        with head_op(ctx, "pull", lock_file=False):
            ran.append(ctx.head_op_began[0])

    waiters = [threading.Thread(target=watcher_push), threading.Thread(target=pull)]
    try:
        assert holding.wait(30)
        waiters[0].start()
        assert seen.waiting(1)  # it waits for the settlement
        waiters[1].start()
        assert seen.waiting(2)  # so does the pull
        ctx.head_ops.stop("restart")
        waiters[0].join(30)
        assert not waiters[0].is_alive() and ctx.head_ops.settling  # refused before it let go
        assert waiters[1].is_alive() and not ran  # the pull still waits for the settlement
        let_go.set()
        settlement.join(30)
        waiters[1].join(30)
        assert ran == ["pull"]
        watcher_push()  # the turn free: refused all the same
        assert [(err.code.value, err.message) for err in refused] == \
            [("WORKER_DOWN", "the worker is stopping (restart)")] * 2
        assert not ctx.head_ops.held and ctx.head_op_began is None
        with head_op(ctx, "connect", lock_file=False):  # a user's op on the free turn runs
            ran.append(ctx.head_op_began[0])
        assert ran == ["pull", "connect"]
    finally:
        let_go.set()
        settlement.join(30)
        for thread in waiters:
            if thread.is_alive():
                thread.join(30)
        worker.close()


@pytest.mark.parametrize("holder_then", ["keeps it", "lets go"])
@pytest.mark.parametrize("pusher", ["watcher", "exit"])
def test_a_workers_own_push_waiting_for_another_processs_head_lock_ends_at_the_stop(
        tmp_path, monkeypatch, caplog, pusher, holder_then):
    """The worker's own pushes (refuse_stopping, as sessions.server_push asks: the store
    watcher's, and the exit push's once it holds its turn) passed the stop's gate at the
    space's turn, then waited up to WAIT_S for the head lock another process held: a stop
    begun meanwhile neither ended that wait (the worker's stop waited for it, head_op_began
    set, to the grace's end) nor refused the push once the holder let go, which then
    started its chain push in the stop's grace, what the gate is for. Now the wait ends
    refused TurnStopped as the stop begins, whether the holder keeps the lock ("keeps it":
    it ended BUSY at WAIT_S) or lets go just after ("lets go": the push ran). The exit push
    (the real sessions.exit_push, its turn free) logs that it was not started and that
    its rows stay in the store for the next push, no failure. The holder is a
    real second process; the watcher's push body past the file lock is the test's."""
    from kint.tenant_worker import head_lock as head_lock_mod
    from kint.tenant_worker.head_lock import TurnStopped, head_op
    from kint.tenant_worker.sessions import exit_push

    # Without the stop's wake the wait ends BUSY at WAIT_S: shortened from 30 s.
    monkeypatch.setattr(head_lock_mod, "WAIT_S", 5.0)
    caplog.set_level(logging.INFO, logger="kint.worker")
    worker, seen = _worker(tmp_path)
    ctx = worker.ctx
    path = ctx.state.files["head_lock"]
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    outcome: list[object] = []

    def push() -> None:
        try:
            if pusher == "exit":
                outcome.append(exit_push(ctx, {}))
                return
            with head_op(ctx, "push", refuse_stopping=True):
                outcome.append("pushed")
        except Exception as err:  # noqa: BLE001 - the outcome is the assertion
            outcome.append(err)

    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    pusher_thread = threading.Thread(target=push)
    try:
        assert holder.stdout.readline() == "held\n"
        pusher_thread.start()
        # The push waits for the file on the turn's Condition (its one wait there: the turn
        # is free), so the stop below ends that wait rather than meet the gate before it.
        assert seen.waiting(1)
        assert ctx.head_op_began is not None and ctx.head_op_began[0] == "push"
        ctx.head_ops.stop("restart")  # as process.py begins the worker's stop
        if holder_then == "lets go":
            holder.stdin.close()
            holder.wait(timeout=30)
        pusher_thread.join(30)
        assert not pusher_thread.is_alive()
    finally:
        if not holder.stdin.closed:
            holder.stdin.close()
        holder.wait(timeout=30)
        pusher_thread.join(30)
        worker.close()
    assert len(outcome) == 1 and isinstance(outcome[0], TurnStopped), outcome
    assert outcome[0].message == "the worker is stopping (restart)"
    assert not ctx.head_ops.held and ctx.head_op_began is None
    if pusher == "exit":
        assert (f"space {ctx.config.space16}: exit push not started: the worker is stopping "
                f"(restart); any rows it would push stay in the store, unanchored, for the "
                f"next push") in caplog.text, caplog.text
        assert "exit push not made" not in caplog.text, caplog.text


def test_a_stop_just_after_the_last_try_for_the_file_is_refused_as_a_stop_not_busy(
        tmp_path, monkeypatch):
    """A stop that lands between the last failed try for another process's head lock and
    the wait's deadline was BUSY (HeadLockBusy), so the watcher logged the backoff's failure
    line rather than its `not started` one: it is TurnStopped, as a stop at any other
    moment of the wait. The last try is the real flock_by, against a real second process,
    wrapped so the stop begins just after it (a deadline of 0: that try is the last)."""
    from kint.tenant_worker import head_lock as head_lock_mod
    from kint.tenant_worker.head_lock import HeadTurn, TurnStopped

    path = space_files(tmp_path / "kint", SPACE16)["head_lock"]
    path.parent.mkdir(mode=0o700)
    turn = HeadTurn()
    real_flock_by = head_lock_mod.flock_by

    def tried_then_stopped(fd: int, deadline: float, every_s: float) -> bool:
        took = real_flock_by(fd, deadline, every_s)
        turn.stop("restart")
        return took

    monkeypatch.setattr(head_lock_mod, "flock_by", tried_then_stopped)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(TurnStopped, match=r"^the worker is stopping \(restart\)$"):
            with head_lock(path, wait_s=0, turn=turn):
                pytest.fail("took the head lock another process holds")
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
