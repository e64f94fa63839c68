"""A worker's heartbeat cadence: every second while it works, less often once idle (64
idle workers beating every second cost the box ~47 ms of CPU a second), each beat saying
when the next is due, and the supervisor judging silence against what the worker said."""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import pytest

from conftest import make_sandbox, pid_alive, wait_until, write_store
from support.lifecycle_host import LifecycleHost
from support.locked_store import locked

from kint.client import KintError
from kint.protocol.worker_wire import (BEAT_SECONDS, IDLE_BEAT_MAX_SECONDS,
                                       idle_beat_seconds)
from kint.supervisor.settings import Settings
from kint.supervisor.workers import WorkerHandle


def test_an_idle_worker_beats_a_quarter_of_the_timeout_apart_at_most_three_seconds():
    assert idle_beat_seconds(10.0) == 2.5
    assert idle_beat_seconds(60.0) == 3.0
    assert idle_beat_seconds(2.0) == BEAT_SECONDS  # never more often than a busy worker


def _handle(every_s: float, last_beat_at: float) -> WorkerHandle:
    handle = WorkerHandle(space_id="cd" * 32, label="t@hermes:x", tenant="t", db="/x.db")
    handle.pid, handle.state = 4242, "ready"
    handle.spawned_at = handle.last_beat_at = last_beat_at
    handle.beat = {"every_s": every_s, "op": None}
    return handle


def test_silence_is_counted_from_the_beat_the_worker_said_would_come():
    idle = _handle(2.5, 100.0)
    assert idle.doing(102.9) == "ready"  # its next beat is not late yet
    assert idle.doing(103.1).startswith("silent: no heartbeat for 3.1s")
    busy = _handle(1.0, 100.0)
    assert busy.doing(101.6).startswith("silent: no heartbeat for 1.6s")


def test_a_worker_that_beats_less_often_than_a_shortened_timeout_gets_two_of_its_beats():
    """A reload can shorten KINT_WORKER_HEARTBEAT_TIMEOUT below what a running idle worker
    was told at its spawn: it is judged hung after two of its own beats, not at once."""
    host = LifecycleHost(Settings(heartbeat_timeout_s=3.0, kill_grace_s=5.0))
    slow, usual = _handle(2.5, 100.0), _handle(1.0, 100.0)
    for handle in (slow, usual):
        handle.signal = lambda sig: None  # no process behind these handles
    host._check_alive(slow, 104.0)
    host._check_alive(usual, 104.0)
    assert slow.state == "ready" and usual.state == "hung"
    host._check_alive(slow, 105.5)
    assert slow.state == "hung"


def test_a_beat_cannot_put_a_worker_out_of_reach_of_the_hung_judgement():
    """The hung limit grows with the cadence the worker's beat claims; a claim past any
    cadence a worker is given (a bug, a unit mix-up) is held to the longest, so a worker
    that then falls silent is still judged hung, and its silence worded in time."""
    host = LifecycleHost(Settings(heartbeat_timeout_s=10.0, kill_grace_s=5.0))
    claims = _handle(1e9, 100.0)
    claims.signal = lambda sig: None  # no process behind this handle
    assert claims.doing(104.0).startswith("silent: no heartbeat for 4.0s")
    host._check_alive(claims, 111.0)
    assert claims.state == "hung"
    assert _handle(-5.0, 100.0).doing(101.2) == "ready"  # nor a beat due in the past


def _every(sandbox, db) -> float | None:
    return sandbox.row(db)["beat_every_s"]


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """One supervisor for the two real-worker tests below, each on a store (so a space and a
    worker) of its own, spawned under the heartbeat timeout the test sets in config.toml
    (`_timeout`): a worker's idle cadence is a quarter of the timeout at its spawn."""
    sb = make_sandbox(tmp_path_factory.mktemp("beats") / "machine")
    try:
        sb.start()
        yield sb
    finally:
        sb.shutdown()


def _timeout(sb, seconds: float) -> None:
    """KINT_WORKER_HEARTBEAT_TIMEOUT in config.toml, read by the supervisor at once."""
    config = sb.kint_home / "config.toml"
    config.write_text(f"worker_heartbeat_timeout = {seconds}\n")
    config.chmod(0o600)
    sb.call("sup.reload")


def test_a_real_worker_beats_every_second_at_work_and_less_often_once_idle(machine):
    # A 6 s timeout: once idle for 1.5 s, its beats say 1.5 s (the default 10 s gives 2.5,
    # checked above; the shorter cadence only shortens the waits).
    sb = machine
    _timeout(sb, 6)
    db = write_store(sb.profile_db("cadence"))
    sb.call("status", db, timeout_s=60)  # the worker's start: not what is bounded here
    assert wait_until(lambda: _every(sb, db) == 1.5)
    assert sb.row(db)["state"] == "ready"
    # An op on the pool: the beats say one second while it runs. Kept in flight until one
    # is read (`_kept_at_work`): one status's second or two of such beats was a window a
    # loaded box's status reads could miss.
    with _kept_at_work(sb, db):
        assert wait_until(lambda: _every(sb, db) == 1.0)
    assert wait_until(lambda: _every(sb, db) == 1.5)
    assert sb.row(db)["state"] == "ready"


@contextmanager
def _kept_at_work(sb, db) -> Iterator[None]:
    """An op on `db`'s worker's pool in flight for the block: its store held locked by
    another process, a status that reads it (`chain`: on the pool) waits out SQLite's busy
    timeout and is refused BUSY, and the next is sent at once."""
    stop = threading.Event()

    def ask() -> None:
        with sb.client() as client:
            while not stop.is_set():
                try:
                    client.call("status", tenant=sb.tenant, db=str(db), space=sb.label(db),
                                timeout_s=30, args={"chain": True})
                except KintError:
                    pass  # BUSY, the store locked: the next one goes at once

    with locked(db):
        caller = threading.Thread(target=ask, daemon=True)
        caller.start()
        try:
            yield
        finally:
            stop.set()
            caller.join(60)


# Kept off the next beat's time: how much later than the worker sent its beat the
# supervisor may have taken it in, so that an exit at that beat cannot pass for an earlier one.
BEAT_TRIP_S = 0.3


def _next_beat_at(sb, db) -> float | None:
    """When `db`'s worker's next beat is due (monotonic), if its last came under 0.2 s ago."""
    asked_at = time.monotonic()
    age = sb.row(db)["last_beat_age_s"]
    if age is None or age >= 0.2:
        return None
    return asked_at - age + IDLE_BEAT_MAX_SECONDS


def test_an_idle_worker_sleeps_until_its_next_beat_yet_stops_at_once_on_sigterm(machine):
    """An idle worker's loop waits for its next beat (3 s apart under a 60 s timeout),
    not a second at a time; a signal wakes it through its wake-up pipe, so SIGTERM right
    after a beat stops it well before the next one would have woken it."""
    sb = machine
    _timeout(sb, 60)
    db = write_store(sb.profile_db("asleep"))
    pid = sb.call("status", db)["worker"]["pid"]
    space16 = sb.row(db)["space"]
    assert wait_until(lambda: _every(sb, db) == IDLE_BEAT_MAX_SECONDS)
    # Just after a beat, when the next is due: a worker not woken by the signal exits
    # at that beat at the earliest. Reckoned from before the status read, so the read's
    # own time makes it earlier, never later.
    next_beat_at = wait_until(lambda: _next_beat_at(sb, db))
    assert next_beat_at
    os.kill(pid, signal.SIGTERM)
    exits_by = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < exits_by:
        time.sleep(0.02)
    gone_at = time.monotonic()
    # Gone before its next beat was due: the signal woke it, not the beat. Idle beats
    # are at most 3 s apart, so this is the widest gap the two causes can have; the
    # worker has ~2.5 s of it to exit in.
    assert not pid_alive(pid) and gone_at < next_beat_at - BEAT_TRIP_S, \
        f"gone {gone_at - next_beat_at:+.2f}s from its next beat"
    logged = [line for path in sb.kint_home.rglob("*.log")
              for line in path.read_text(errors="replace").splitlines()]
    assert f"worker for space {space16} exits (0)" in "\n".join(logged)  # a clean stop


def test_a_worker_beats_every_second_while_a_push_it_did_not_get_as_a_request_runs(
        tmp_path, monkeypatch):
    """The store watcher's push runs on its own thread and the push journal's settling at
    start on the pool without a request: both count as work (the first shows as progress,
    the second is in flight), so status follows them every second, not every 2.5 s."""
    from kint.tenant_worker import rekey_settle
    from kint.tenant_worker.config import WorkerConfig
    from kint.tenant_worker.head_lock import SETTLEMENT, head_op
    from kint.tenant_worker.process import Worker

    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    cfg = WorkerConfig(space_id="ef" * 32, label="t", tenant="t", db=str(tmp_path / "m.db"),
                       kint_home=str(home), back_address="ipc:///unused", supervisor_pid=1,
                       idle_beat_s=2.5)
    worker = Worker(cfg, b"\x01" * 32)  # not serving: its beats go nowhere
    try:
        now = time.monotonic() + 60  # long after its start: idle
        worker._beat(now)
        assert worker._next_beat == now + 2.5
        worker.ctx.progress = "push: epoch 1 of 2 (10 rows)"
        worker._beat(now)
        assert worker._next_beat == now + BEAT_SECONDS
        beat = worker._beat_message(now, 0, None, None, BEAT_SECONDS)[0]["state"]
        assert beat["progress"] == "push: epoch 1 of 2 (10 rows)"  # no op in flight
        assert beat["progress_op"] is None  # no head op said whose it is
        worker.ctx.progress = None
        with head_op(worker.ctx, "push", lock_file=False):
            worker.ctx.progress = "push: epoch 1 of 2 (10 rows)"
            began = worker.ctx.head_op_began[1]
            beat = worker._beat_message(began + 2.5, 0, None, None, BEAT_SECONDS)[0]["state"]
            # Whose line, and how long ago its op began: a client shows it only for its
            # own call (the supervisor keeps it until the next beat).
            assert (beat["progress_op"], beat["progress_age_s"]) == ("push", 2.5), beat
        assert worker.ctx.progress is None and worker.ctx.head_op_began is None
        _a_beat_between_two_ops_names_neither(worker)
        seen = []
        monkeypatch.setattr(rekey_settle, "settle_at_start",
                            lambda ctx: seen.append(worker.inflight.snapshot()[:2]))
        worker.settle_at_start()
        # In flight while it runs, by the name its BUSY gives it (it was "resolve_pending").
        assert seen == [(1, SETTLEMENT)] and SETTLEMENT == "settlement"
        assert worker.inflight.snapshot()[0] == 0  # and no longer after
    finally:
        worker.close()


def _a_beat_between_two_ops_names_neither(worker) -> None:
    """A pull ends and the next pull begins and says its first line while a beat reads
    the line and its op: labelled with the new pull's op and age, the old pull's last line
    is shown to the new pull's caller as its own. Named no op, it is shown to nobody for
    that beat. The interleaving cannot be had on purpose between two real threads: the
    context's `progress` makes the switch as the beat reads the line (its second read of
    it; the first asks whether the worker is quiet): the one stand-in in this test."""
    ctx = worker.ctx
    last = "pull: applying epoch 7 (3 of 3)"

    class Switching(type(ctx)):  # type: ignore[misc]
        @property
        def progress(self):  # noqa: ANN202
            line = self.__dict__["progress"]
            self.__dict__["reads"] += 1
            if self.__dict__["reads"] == 2:  # the old pull ends, a new one begins
                self.__dict__["progress"] = None
                self.head_op_began = None
                self.head_op_began = ("pull", time.monotonic())
                self.__dict__["progress"] = "pull: checking epoch 9 (walking back from 9)"
            return line

        @progress.setter
        def progress(self, value):  # noqa: ANN202
            self.__dict__["progress"] = value

    real = ctx.__class__
    ctx.__dict__["progress"] = last
    ctx.head_op_began = ("pull", time.monotonic() - 30)
    ctx.__class__ = Switching
    try:
        ctx.__dict__["reads"] = 0
        beat = worker._beat_message(time.monotonic(), 0, None, None, BEAT_SECONDS)[0]["state"]
        assert beat["progress"] == last and beat["progress_op"] is None, beat
        # The next beat names the new pull's line as the new pull's.
        beat = worker._beat_message(time.monotonic(), 0, None, None, BEAT_SECONDS)[0]["state"]
        assert beat["progress"].startswith("pull: checking epoch 9"), beat
        assert beat["progress_op"] == "pull" and beat["progress_age_s"] < 30, beat
    finally:
        ctx.__class__ = real
        del ctx.__dict__["reads"]
        ctx.progress = None
        ctx.head_op_began = None


def test_an_answer_the_beating_thread_gives_itself_brings_a_beat_within_a_second(tmp_path):
    """A plain status whose counts hold (and a session's note) is answered on the thread
    that beats, never on the pool. Such an answer, as a pool's, brings the next beat within a
    second: the supervisor stops a worker as idle only on a beat read after its last answer, so an
    idle worker whose last call was a status used to wait for its next idle beat (up to 3 s) before
    it could go, past a short KINT_WORKER_IDLE_SECONDS."""
    from bare_worker import answer, bare_worker, request_frames

    with bare_worker(tmp_path, b"\x02" * 32) as (worker, router):
        idle_until = time.monotonic() + 100
        worker._next_beat = idle_until  # an idle worker's beat, far off
        # Counts are kept only for a store whose files are older than a clock tick's doubt
        # (store.SETTLED_AFTER_NS): this one was written just now, so its files are dated back.
        from conftest import dated_back

        dated_back(worker.config.db)
        worker.ctx.store.facts()  # counted: the status is answered on this thread
        worker._dispatch(request_frames("1", "status", {}, worker.config.db))
        header, reply = answer(router)
        assert header["kind"] == "reply" and reply["ok"], reply
        assert worker._next_beat <= time.monotonic() + BEAT_SECONDS


def test_a_worker_whose_last_call_was_a_status_exits_at_its_idle_time_not_its_next_beat(
        machine):
    """End to end: with KINT_WORKER_IDLE_SECONDS=1 and idle beats 3 s apart (a 12 s
    heartbeat timeout), a status sent just after an idle beat is followed by the worker's
    exit before that next idle beat was due: the beat its answer brings (within a second)
    lets the supervisor stop it once it has been idle for a second."""
    sb = machine
    _timeout(sb, 12)
    db = write_store(sb.profile_db("short-idle"))
    pid = sb.call("status", db)["worker"]["pid"]
    assert wait_until(lambda: _every(sb, db) == IDLE_BEAT_MAX_SECONDS)
    next_beat_at = wait_until(lambda: _next_beat_at(sb, db))
    assert next_beat_at and sb.call("status", db)["worker"]["pid"] == pid
    config = sb.kint_home / "config.toml"
    config.write_text("worker_heartbeat_timeout = 12\nworker_idle_seconds = 1\n")
    sb.call("sup.reload")
    try:
        gone = wait_until(lambda: sb.row(db)["pid"] is None, timeout=20, interval=0.02)
        gone_at = time.monotonic()
        assert gone, sb.row(db)
        # The beat that let it go came within a second of the status, ~2 s before the idle
        # beat; the exit needs no more than the sweep's quarter second after it.
        assert gone_at < next_beat_at - BEAT_TRIP_S, \
            f"gone {gone_at - next_beat_at:+.2f}s from its next idle beat"
    finally:
        _timeout(sb, 10)


def bare_worker_here(tmp_path):
    """A bare worker (tests/bare_worker.py) whose beats go to a ROUTER nobody reads."""
    from contextlib import contextmanager

    from bare_worker import bare_worker

    @contextmanager
    def worker_only():
        with bare_worker(tmp_path, b"\x03" * 32) as (worker, _router):
            yield worker

    return worker_only()


def test_an_idle_worker_beats_as_a_session_lapses_not_an_idle_beat_later(tmp_path):
    """A session whose kint-server went without a goodbye is forgotten SESSION_TTL_S after
    it was last seen, and that alone frees the worker for its idle exit, with no request
    or answer to bring a beat: the worker's next beat is set for the lapse (a hair after),
    and that beat counts no session."""
    from kint.tenant_worker.config import SESSION_TTL_S
    from kint.tenant_worker.heartbeat import SESSION_LAPSE_MARGIN_S

    with bare_worker_here(tmp_path) as worker:
        now = time.monotonic()
        worker._active_at = now - 60  # idle: its cadence is the idle one (2.5 s)
        worker.ctx.sessions["gone"] = now - SESSION_TTL_S + 0.5
        worker._beat(now)
        assert worker._next_beat == pytest.approx(now + 0.5 + SESSION_LAPSE_MARGIN_S)
        later = worker._next_beat
        assert wait_until(lambda: time.monotonic() >= later, interval=0.02)  # it lapses
        beat = worker._beat_message(later, 0, None, None, 2.5)[0]["state"]
        assert beat["sessions"] == 0 and worker.ctx.session_lapses_at() is None
        worker._beat(later)
        assert worker._next_beat == pytest.approx(later + 2.5)  # the idle cadence again


def test_the_watchers_push_settling_the_store_brings_a_beat_at_once(tmp_path, monkeypatch):
    """The store watcher's push ends with no request or answer; a dirty store held the
    worker from its idle exit (the beat's `has_work`), and the beat that says it is clean
    came at the idle cadence, up to 3 s on. The watcher now says when the store is clean
    again, and the worker's loop beats at its next turn; a push that failed says nothing."""
    from kint.protocol import ErrorCode, ProtocolError
    from kint.tenant_worker.watcher import Watcher

    db = write_store(tmp_path / "memory.db")
    monkeypatch.setenv("KINT_QUIET_SECONDS", "300")
    settled, fail = [], [True]

    def push(reason: str) -> dict:
        if fail[0]:
            raise ProtocolError(ErrorCode.RPC_UNAVAILABLE, "no endpoint answered")
        return {"pushed": 1}

    watcher = Watcher(str(db), lambda: (1, 0), push, generation=lambda: 0,
                      settled=lambda: settled.append(True))
    now = time.monotonic()
    # A store change, a while ago: read two seconds or more after it, the signature tells
    # every later commit (store.SettledRule), and a push through clears the dirty mark.
    os.utime(db, ns=(time.time_ns(), time.time_ns() - 10 * 10**9))
    watcher.tick(now)
    watcher.tick(now + 301)  # quiet: it pushes, and fails
    assert watcher.dirty and settled == []
    fail[0] = False
    watcher.backoff.forget("the test mends the endpoint")
    watcher.tick(now + 302)
    assert not watcher.dirty and settled == [True]
    watcher.tick(now + 303)  # clean already: nothing more to say
    assert settled == [True]

    (tmp_path / "w").mkdir()
    with bare_worker_here(tmp_path / "w") as worker:
        worker._next_beat = far = time.monotonic() + 100  # an idle worker's beat, far off
        threading.Thread(target=worker.ctx.beat_soon).start()  # as the watcher's thread
        assert wait_until(lambda: worker._beat_wanted, interval=0.01)
        worker._on_wake()
        assert worker._next_beat <= time.monotonic() < far and not worker._beat_wanted
