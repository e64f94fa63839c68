"""A watcher push that meets an op of its own space already running in its worker (a pull,
push, connect, rekey: head_lock.HeadTurn) was recorded as a failed push: waited out for
KINT_PUSH_RETRY_SECONDS (60 s by default) and shown as one by `kint status` and
memory_status, while the store stayed dirty and could be pushed as soon as the op ended.
It is a turn to wait for: the watcher neither pushes nor counts for a push while the op
runs, records nothing, and its first tick after the op pushes. A BUSY from the head lock's
file (another kint process on the space) is still a failure.

The first test runs the real parts: the devchain's anvil behind a loopback RPC proxy
(tests/rpc_proxy.py) that holds a pull's head read, the test supervisor, the space's
worker and its watcher started by a session's `attach`, a write through Sibyl's own client.
The second drives a real Watcher over a real store file, at the ticks the test makes, with
a worker's real space context (tests/test_head_lock.py's `_worker`): its push runs the
real `head_op` on that space's turn and head lock file, which the test's pull holds, or a
real second process; the push's own body is a stand-in (what follows the turn is the first
test's business). It covers the race the first cannot make at will: an op that begins
between the tick's check and its push. The third, on the same parts, that the op is asked
about (and its wait logged) only where a tick would push or check the size."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import pytest

from chain_machines import machine_behind_proxy, ok
from conftest import write_rules, write_store
from test_head_lock import HOLDER, _worker

WAIT = {"timeout": 60, "interval": 0.1}
# The watcher's tick (KINT_TEST_POLL_MINIMUM_S lets it under 1 s) and a push at the first
# tick after a write. KINT_RPC_TIMEOUT past the proxy's hold: the pull is let go by the test.
ENV = {"KINT_POLL_SECONDS": "0.25", "KINT_TEST_POLL_MINIMUM_S": "0.25",
       "KINT_QUIET_SECONDS": "0", "KINT_RPC_TIMEOUT": "60"}
MET = "watcher: a pull is running for this space; the watcher waits for it to end"


def _changed(db, ago_s: int) -> None:
    """A store write `ago_s` seconds ago: its signature tells every later commit."""
    os.utime(db, ns=(time.time_ns(), time.time_ns() - ago_s * 10**9))


@pytest.fixture
def worker(tmp_path):
    """A worker's real space context (tests/test_head_lock.py's `_worker`), closed however
    the test ends: a failed assertion left it open."""
    worker, _ = _worker(tmp_path)
    yield worker
    worker.close()


def _op(sb, db) -> str | None:
    """The oldest op in flight in the space's worker, from its beat."""
    return (sb.row(db)["op"] or {}).get("name")


def _pull_held_at_head_read(sb, proxy, db, first: str,
                             held_s: float) -> tuple[threading.Thread, dict, int]:
    """The space's first epoch pushed (a row `first`), a session's watcher running, and a pull
    started whose head read (an eth_call) the proxy holds up to `held_s`: the pull's thread,
    where its reply goes, and how many calls the proxy had seen before it (the test waits
    for the pull at that read itself, inside its clean-up)."""
    write_rules(db, sb.tenant, first=first)
    sb.call("push", db, timeout_s=120)
    assert sb.call("attach", db, args={"session": "s", "watcher": True})["watcher"]
    proxy.set_mode("delay_methods", methods=["eth_call"], seconds=held_s)
    pulled: dict = {}
    seen = len(proxy.calls)
    pull = threading.Thread(target=lambda: pulled.update(sb.call("pull", db, timeout_s=120)))
    pull.start()
    return pull, pulled, seen


def test_a_write_during_the_spaces_own_pull_is_pushed_after_it_with_no_failure(
        tmp_path, chain_home):
    with machine_behind_proxy(tmp_path / "m", chain_home, **ENV) as (sb, proxy):
        db = sb.sibyl_db
        log_path = sb.kint_home / "supervisor.log"
        # The pull's head read is held until the test lets it go.
        pull, pulled, seen = _pull_held_at_head_read(sb, proxy, db, "pushed before the pull", 30)
        try:
            # Past its turn on the space (head_lock.head_op), at the head read it holds.
            sb.wait_for(lambda: "eth_call" in proxy.calls[seen:] and _op(sb, db) == "pull",
                        what="the pull in flight, at its head read", **WAIT)
            write_rules(db, sb.tenant, second="written while the pull runs")
            # The watcher's tick past the quiet period meets the pull: it says so, or (the
            # fault) its push was refused BUSY and recorded as a failed push.
            sb.wait_for(lambda: MET in log_path.read_text()
                        or sb.call("status", db)["watcher_failure"],
                        what="the watcher meeting the pull", **WAIT)
            assert sb.call("status", db)["watcher_failure"] is None
            assert _op(sb, db) == "pull"  # met while it ran, not after
        finally:
            proxy.forward()  # the held head read goes through: the pull ends
            pull.join(120)
        assert pulled and not pull.is_alive(), pulled
        # The first tick after the pull pushes the row: no wait was recorded to hold it.
        sb.wait_for(lambda: (sb.row(db)["head"] or {}).get("seq") == 2,
                    what="the watcher's push after the pull", **WAIT)
        status = ok(sb.kint("status", "--json")).stdout
        assert '"watcher_failure": null' in status, status
        log = log_path.read_text()
        assert "watcher: push failed" not in log, log
        assert log.count(MET) == 1, log
        assert "watcher: pushing (quiet trigger)" in log.split(MET, 1)[1], log


def test_an_op_begun_between_the_check_and_the_push_is_waited_for_another_process_is_not(
        tmp_path, monkeypatch, worker):
    from kint.tenant_worker import head_lock as head_lock_mod
    from kint.tenant_worker.head_lock import MESSAGE, head_op
    from kint.tenant_worker.watcher import Watcher

    monkeypatch.setenv("KINT_QUIET_SECONDS", "0")
    monkeypatch.setenv("KINT_POLL_SECONDS", "15")
    monkeypatch.setenv("KINT_PUSH_RETRY_SECONDS", "60")
    monkeypatch.setattr(head_lock_mod, "WAIT_S", 0.5)  # the file lock's wait, and the turn's
    ctx = worker.ctx
    db = write_store(tmp_path / "memory.db")
    pushed: list[str] = []
    puller = _HeldPull(ctx)

    def push(reason: str) -> None:
        """The worker's push as far as its turn and file lock: a pull of the space begins
        as the watcher's push comes (the first time), after the tick's check."""
        if not puller.began:
            puller.begin()
        with head_op(ctx, "push"):
            pushed.append(reason)

    # The real worker's own-op check (sessions.new_watcher's).
    watcher = Watcher(str(db), lambda: (1, 0), push, generation=lambda: 0,
                      own_op=lambda: ctx.head_op_began)
    now = time.monotonic()
    try:
        _changed(db, 10)
        watcher.tick(now)  # its push meets the pull begun since the check
        assert puller.began and pushed == []
        assert watcher.backoff.failure is None and watcher.dirty
        watcher.tick(now + 15)  # the pull still runs: nothing tried, nothing recorded
        assert pushed == [] and watcher.backoff.failure is None and watcher.dirty
        puller.end()
        watcher.tick(now + 30)  # the first tick after it pushes
        assert pushed == ["watcher"] and not watcher.dirty
        assert watcher.backoff.failure is None
    finally:
        puller.end()

    # Another process holds the space's head lock file: a failure, waited out.
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(ctx.state.files["head_lock"])],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        _changed(db, 9)
        watcher.tick(now + 45)
        failure = watcher.backoff.failure
        assert failure is not None and (failure.code, failure.message) == ("BUSY", MESSAGE)
        assert failure.wait_s == 60 and pushed == ["watcher"] and watcher.dirty
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


class _HeldPull:
    """A pull of the space (a real `head_op` on its turn) on a thread of its own, holding
    the space from `begin` until `end`."""

    def __init__(self, ctx) -> None:
        self._ctx = ctx
        self._holding, self._let_go = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._pull)

    def _pull(self) -> None:
        from kint.tenant_worker.head_lock import head_op

        with head_op(self._ctx, "pull", lock_file=False):
            self._holding.set()
            self._let_go.wait(30)

    @property
    def began(self) -> bool:
        return self._holding.is_set()

    def begin(self) -> None:
        self._thread.start()
        assert self._holding.wait(30)

    def end(self) -> None:
        self._let_go.set()
        if self._thread.is_alive():
            self._thread.join(30)


@contextmanager
def _pulling(ctx) -> Iterator[None]:
    """A held pull of the space until the block ends."""
    pull = _HeldPull(ctx)
    try:
        pull.begin()
        yield
    finally:
        pull.end()


def test_an_op_is_waited_for_only_by_a_tick_that_would_push_or_check_the_size(
        tmp_path, monkeypatch, caplog, worker):
    """The watcher asks about its space's op only where its tick would act (a push due, a
    size check due), and says it waits only then: asked before every other rule, it
    logged the wait at any op that met a dirty store (a `kint push` or pull just after an
    agent's write), with the quiet period still running and no push due. A push due
    meanwhile waits with no count made, said once an op, and goes out at the tick after
    the op. A real Watcher over a real store; the pulls are real `head_op`s on a worker's
    real space context (tests/test_head_lock.py's `_worker`), the push and count stand-ins."""
    from kint.tenant_worker.watcher import Watcher

    monkeypatch.setenv("KINT_QUIET_SECONDS", "300")
    monkeypatch.setenv("KINT_POLL_SECONDS", "15")
    caplog.set_level(logging.INFO, logger="kint.worker")
    ctx = worker.ctx
    db = write_store(tmp_path / "memory.db")
    counted: list[int] = []
    pushed: list[str] = []

    def count() -> tuple[int, int]:
        counted.append(1)
        return (1, 0)  # one row: 400 bytes, far below the size trigger

    def waits() -> list[str]:
        return [r.getMessage() for r in caplog.records
                if "the watcher waits for it to end" in r.getMessage()]

    watcher = Watcher(str(db), count, pushed.append, generation=lambda: 0,
                      own_op=lambda: ctx.head_op_began)
    now = time.monotonic()
    _changed(db, 10)
    watcher.tick(now)  # dirty; the first size check counts one row: nothing due
    assert watcher.dirty and counted == [1] and pushed == []
    with _pulling(ctx):
        # The quiet period runs and the next size check is a minute on: nothing waits.
        watcher.tick(now + 15)
        watcher.tick(now + 30)
        assert waits() == [] and counted == [1] and pushed == []
        monkeypatch.setenv("KINT_QUIET_SECONDS", "0")  # read at each tick: a push due
        watcher.tick(now + 45)
        watcher.tick(now + 50)
        assert waits() == [MET] and counted == [1] and pushed == []
        assert watcher.backoff.failure is None and watcher.dirty
        monkeypatch.setenv("KINT_QUIET_SECONDS", "300")
    watcher.tick(now + 55)  # no push due as the pull ends
    with _pulling(ctx):  # the next pull, met where a push is due, is said too
        monkeypatch.setenv("KINT_QUIET_SECONDS", "0")
        watcher.tick(now + 58)
        assert waits() == [MET, MET] and counted == [1] and pushed == []
    watcher.tick(now + 65)  # the first tick after it pushes
    assert pushed == ["watcher"] and counted == [1, 1] and not watcher.dirty
    assert watcher.backoff.failure is None and waits() == [MET, MET]
