"""The supervisor's timed work turn by turn (kint/supervisor/timed.py): deadlines and
requests a full pipe refused at every turn, the sweep over every space once per tick, and
an exit held for its worker's reason (kint/supervisor/exit_hold.py) until it comes or the
hold's end.

The host below is the part of `Supervisor` the timed work reads (its handles, settings,
deadline heap, back socket and outbox, the routes its worker messages are read by, and
for the forkserver's wait and the room queue a spawner and open files the test decides);
the real `Supervisor` is not built here because constructing it marks the whole test
process as the daemon for every test that runs after (see
test_supervisor_hung_judgement.py). The worker lifecycle is the real one, the sockets are
real ZeroMQ sockets (inproc), the hung worker a real stopped process. Turns are given
explicit monotonic times.
"""

from __future__ import annotations

import heapq
import logging
import os
import signal
import subprocess
import sys
import time

import orjson
import pytest
import zmq

from kint.open_files import FDS_PER_WORKER, OpenFiles
from kint.protocol import worker_wire
from kint.protocol.envelope import Reply
from kint.supervisor.daemon import Supervisor
from kint.supervisor import room, workers
from kint.supervisor.exits import ExitWatch
from kint.supervisor.front_door import FrontDoor
from kint.supervisor.last_words import RetiredRoute
from kint.supervisor.lifecycle import WorkerLifecycle
from kint.supervisor.routing import ClientRouting
from kint.supervisor.settings import Settings
from kint.supervisor.timed import RETRY_S, TimedWork
from kint.supervisor.worker_messages import WorkerMessages
from kint.supervisor.workers import STOPPED_MID_OP_HINT, Pending, WorkerHandle


class _Outbox:
    """The outbox's one question the timed work asks; nothing waits for a client here."""

    def backlogged(self) -> bool:
        return False


class _Host(WorkerMessages, WorkerLifecycle, TimedWork):
    def __init__(self, settings: Settings, start: float, back: zmq.Socket | None = None) -> None:
        self.settings = settings
        self._by_route: dict[bytes, WorkerHandle] = {}
        self._retired_routes: dict[bytes, RetiredRoute] = {}
        self._unreplied: dict[bytes, RetiredRoute] = {}
        self._held_exits: dict[str, WorkerHandle] = {}
        self._refused_routes: set[bytes] = set()
        self.passed_on: list[tuple[str, bytes]] = []
        self.shutting_down = False
        self.handles: dict[str, WorkerHandle] = {}
        self.back = back
        self.outbox = _Outbox()
        self._deadlines: list[tuple[float, str, str]] = []
        self._stalled: set[str] = set()
        self._room_wanted: list[str] = []
        self._evicting: set[str] = set()
        self._settle_seen: dict[str, float] = {}
        self._room_turn: str | None = None
        # The front socket's door, never closed here (no front socket: the sweep looks at
        # it only while closed, and the forkserver's readiness at a path it has not).
        self.door = FrontDoor(None)  # type: ignore[arg-type]
        self.front_path = None
        self._sweep_at = start
        self.sweeps: list[float] = []
        self.answered: list[tuple[str, Reply]] = []

    def _housekeeping(self, now: float) -> None:
        self.sweeps.append(now)

    def _answer(self, handle: WorkerHandle, pending: Pending, reply: Reply) -> None:
        handle.pending.pop(pending.internal_id, None)
        self.answered.append((pending.internal_id, reply))

    def _pass_on(self, handle: WorkerHandle, pending: Pending, body: zmq.Frame) -> None:
        handle.pending.pop(pending.internal_id, None)
        self.passed_on.append((pending.internal_id, body.bytes))

    def _drain(self, sock: zmq.Socket | None, handler, busy: bool = True) -> None:
        """The loop's own drain; a host without a back socket has nothing to read."""
        if sock is not None:
            Supervisor._drain(sock, handler, busy)

    def add(self, n: int) -> WorkerHandle:
        handle = WorkerHandle(space_id=f"{n:064x}", label=f"t@hermes:p{n}", tenant="t",
                              db=f"/p{n}.db")
        self.handles[handle.space_id] = handle
        return handle

    def queue(self, handle: WorkerHandle, internal_id: str, deadline: float) -> Pending:
        pending = Pending(internal_id=internal_id, client=b"c", client_id="r" + internal_id,
                          op="status", deadline=deadline, timeout_ms=1000,
                          body=b'{"op":"status"}')
        handle.pending[internal_id] = pending
        heapq.heappush(self._deadlines, (deadline, handle.space_id, internal_id))
        return pending


def test_the_sweep_over_every_space_runs_once_per_tick_not_at_every_turn():
    settings = Settings(tick_s=0.25)
    t0 = 1000.0
    host = _Host(settings, start=t0)
    for n in range(64):
        host.add(n)
    # A busy supervisor turns its loop at every request, reply and beat: 200 turns in
    # half a second.
    for i in range(200):
        host.tick(t0 + i * 0.0025)
    assert host.sweeps == [t0, t0 + 0.25]
    # Waiting, the loop sleeps no longer than until the next sweep is due.
    assert host.poll_timeout_ms(t0 + 0.4) == 100


def test_a_deadline_is_answered_at_the_turn_it_passes_between_sweeps():
    host = _Host(Settings(tick_s=0.25), start=1000.0)
    handle = host.add(1)
    handle.state = "busy"
    host.tick(1000.0)  # the sweep: the next is due at 1000.25
    host.queue(handle, "7", deadline=1000.05)
    assert host.poll_timeout_ms(1000.01) == 40  # the loop wakes for it
    host.tick(1000.04)
    assert host.answered == []
    host.tick(1000.06)  # past the deadline, long before the next sweep
    assert [(i, r.error) for i, r in host.answered] == [("7", "TIMEOUT")]
    assert "did not finish within 1000 ms" in (host.answered[0][1].message or "")
    assert host.sweeps == [1000.0]


def _two_waiting_for_their_replies() -> tuple[_Host, WorkerHandle, RetiredRoute]:
    """Space 1's worker, sent r1 (deadline 100.1) and r2 (130.0), exited 0 at 100.0, just
    after a sweep (the next due at 100.25): both wait for its last replies."""
    host = _Host(Settings(tick_s=0.25), start=100.0)
    handle = host.add(1)
    handle.route, handle.token, handle.pid = b"route-1", b"token-1", 4242
    host.queue(handle, "r1", deadline=100.1).forwarded = True
    host.queue(handle, "r2", deadline=130.0).forwarded = True
    host.tick(100.0)
    record = host._retire_route(handle)
    host._await_replies(record, handle, "exited with code 0", STOPPED_MID_OP_HINT, 100.0)
    return host, handle, record


def test_a_request_waiting_for_an_exited_workers_reply_keeps_its_own_deadline():
    """A worker exits 0 (a clean exit) with two requests unanswered: they wait for its
    last replies (last_words.py) for the grace, 1 s. The one whose deadline comes first is
    answered TIMEOUT at that deadline, the loop waking for it; it waited out the whole
    grace, and a sweep after, and a client whose own bound was shorter gave up on the
    supervisor first. The other is answered WORKER_DOWN at the grace's turn, not a sweep
    later."""
    host, handle, record = _two_waiting_for_their_replies()
    assert host.poll_timeout_ms(100.0) == 100  # the loop wakes for r1's deadline
    host.tick(100.05)
    assert host.answered == []
    host.tick(100.1)
    [(rid, reply)] = host.answered
    assert rid == "r1" and reply.error == "TIMEOUT", reply
    assert reply.message == ("status on space " + handle.space16 + " did not finish within "
                             "1000 ms: its worker exited with code 0, its reply not read")
    assert reply.hint == STOPPED_MID_OP_HINT
    host.tick(100.99)  # a sweep: the next is due at 101.24
    assert host.poll_timeout_ms(100.99) == 10  # the grace's end, before it
    host.tick(101.0)
    assert [(i, r.error) for i, r in host.answered][1:] == [("r2", "WORKER_DOWN")]
    assert not host._unreplied


def test_a_reply_to_the_first_due_of_the_waiting_requests_moves_the_loops_wake_up_on():
    """The loop's wake-up for the requests waiting for an exited worker's last replies is
    kept as each leaves (`Unreplied.due`), not found by walking them all at each turn.
    Replied to, the request whose deadline came first no longer wakes the loop: left at
    its deadline, the loop woke for nothing, and past it polled without waiting until
    the grace's end."""
    host, _, record = _two_waiting_for_their_replies()
    assert host.poll_timeout_ms(100.0) == 100  # r1's deadline
    host._last_reply(record, {"id": "r1"}, zmq.Frame(b"answer-r1"))
    assert host.passed_on == [("r1", b"answer-r1")]
    assert host.poll_timeout_ms(100.0) == 250  # the sweep now, r2 waiting for the grace
    assert host.poll_timeout_ms(100.2) == 50


def test_a_reply_waiting_unread_when_its_deadline_passes_wins_over_the_timeout():
    """The supervisor was preempted between its poll and its clock read: the turn's clock
    is past the request's deadline, and the worker's reply arrived meanwhile, after the
    poll, unread on the back socket. The reply is read before any TIMEOUT is given and is
    the request's answer; a request whose worker sent nothing is still answered TIMEOUT."""
    ctx = zmq.Context()
    back = ctx.socket(zmq.ROUTER)
    worker = ctx.socket(zmq.DEALER)
    try:
        back.bind("inproc://timed-late-reply")
        token = worker_wire.new_token()
        worker.setsockopt(zmq.ROUTING_ID, worker_wire.route_for(token))
        worker.connect("inproc://timed-late-reply")
        host = _Host(Settings(tick_s=0.25), start=1000.0, back=back)
        handle = host.add(1)
        handle.state, handle.pid = "busy", 4242
        handle.token, handle.route = token, worker_wire.route_for(token)
        host._by_route[handle.route] = handle
        host.tick(1000.0)  # the sweep: the next is due at 1000.25
        host.queue(handle, "7", deadline=1000.05).forwarded = True
        host.queue(handle, "8", deadline=1000.05).forwarded = True
        worker.send_multipart(worker_wire.encode(
            {"kind": "reply", "id": "7", "pid": 4242, "token": worker_wire.token_text(token)},
            b'{"ok":true}'))
        give_up = time.monotonic() + 30
        while not back.poll(0) and time.monotonic() < give_up:  # in the back socket's queue
            time.sleep(0.001)
        host.tick(1000.06)  # the turn's clock: past both deadlines
        assert host.passed_on == [("7", b'{"ok":true}')]
        assert [(i, r.error) for i, r in host.answered] == [("8", "TIMEOUT")]
        assert handle.pending == {}
    finally:
        worker.close(linger=0)
        back.close(linger=0)
        ctx.term()


def test_requests_a_full_pipe_refused_leave_in_order_at_the_next_turn(caplog):
    """The worker's pipe holds one message: the second request is refused (EAGAIN under
    ROUTER_MANDATORY) and stays queued; once the worker reads, the next turn forwards the
    rest, in order, without waiting for the sweep, and the stall is logged once."""
    ctx = zmq.Context()
    back = ctx.socket(zmq.ROUTER)
    worker = ctx.socket(zmq.DEALER)
    try:
        back.setsockopt(zmq.ROUTER_MANDATORY, 1)
        back.setsockopt(zmq.SNDHWM, 1)
        back.bind("inproc://timed-back")
        token = worker_wire.new_token()
        worker.setsockopt(zmq.ROUTING_ID, worker_wire.route_for(token))
        worker.setsockopt(zmq.RCVHWM, 1)
        worker.connect("inproc://timed-back")
        worker.send(b"hello")
        assert back.poll(5000)
        back.recv_multipart()

        host = _Host(Settings(tick_s=0.25), start=1000.0, back=back)
        handle = host.add(1)
        handle.state, handle.route = "ready", worker_wire.route_for(token)
        host.tick(1000.0)  # the sweep: the next is due at 1000.25
        caplog.set_level(logging.INFO, logger="kint.supervisor")
        sent = [host._forward(handle, host.queue(handle, str(i), deadline=2000.0))
                for i in range(1, 6)]
        assert sent[0] and not all(sent)
        assert host._stalled == {handle.space_id}
        assert host.poll_timeout_ms(1000.01) <= RETRY_S * 1000
        for turn in range(1, 4):  # the worker still reads nothing: nothing leaves
            host.tick(1000.0 + turn * 0.001)

        received = []
        turn_at = 1000.01
        give_up = time.monotonic() + 30
        while len(received) < 5 and time.monotonic() < give_up:
            if worker.poll(10):
                received.append(worker.recv_multipart())
            turn_at += 0.0001
            host.tick(turn_at)  # the loop's turns, well before the next sweep
        assert turn_at < 1000.25 and host.sweeps == [1000.0]
        assert [worker_wire.decode_from_supervisor(*frames)["id"] for frames in received] \
            == ["1", "2", "3", "4", "5"]
        assert all(p.forwarded for p in handle.pending.values())
        assert host._stalled == set()
        assert host.poll_timeout_ms(turn_at) > RETRY_S * 1000
        stalls = [r for r in caplog.records if "request stays queued" in r.getMessage()]
        assert len(stalls) == 1, [r.getMessage() for r in stalls]
    finally:
        worker.close(linger=0)
        back.close(linger=0)
        ctx.term()


def test_a_silent_worker_is_judged_hung_at_the_first_sweep_past_its_timeout():
    settings = Settings(heartbeat_timeout_s=3.0, kill_grace_s=5.0, tick_s=0.25)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        child.send_signal(signal.SIGSTOP)  # a stopped worker: it beats no more
        t0 = time.monotonic()
        host = _Host(settings, start=t0)
        handle = host.add(1)
        handle.process, handle.pid, handle.state = child, child.pid, "ready"
        handle.spawned_at = handle.last_beat_at = t0
        hung_at = None
        for turn in range(350):  # a turn every 10 ms for 3.5 s; a sweep every 0.25 s
            now = t0 + turn * 0.01
            host.tick(now)
            if hung_at is None and handle.state == "hung":
                hung_at = now
        # Judged at the first sweep past the timeout: at most one tick interval late.
        assert hung_at is not None and t0 + 3.0 < hung_at <= t0 + 3.0 + 0.25 + 0.011
        assert handle.hung_reason == "no heartbeat for 3s"
        assert len(host.sweeps) <= 3.5 / 0.25 + 1
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_beat_waiting_unread_at_the_sweep_keeps_its_worker_from_being_judged_hung():
    """The supervisor was preempted between its poll and its clock read, for less than
    the pause slack (so no pause is told): at the sweep, two workers look silent past the
    heartbeat timeout, and one of them beat meanwhile, after the poll, unread on the back
    socket. That beat is read before any worker is judged: its worker stays; the one that
    sent nothing is judged hung. The workers are real stopped processes, so nothing but
    the beat placed on the socket speaks for them."""
    ctx = zmq.Context()
    back = ctx.socket(zmq.ROUTER)
    worker = ctx.socket(zmq.DEALER)
    children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
                for _ in range(2)]
    try:
        for child in children:
            child.send_signal(signal.SIGSTOP)
        back.bind("inproc://timed-late-beat")
        token = worker_wire.new_token()
        worker.setsockopt(zmq.ROUTING_ID, worker_wire.route_for(token))
        worker.connect("inproc://timed-late-beat")
        settings = Settings(heartbeat_timeout_s=3.0, kill_grace_s=5.0, tick_s=0.25)
        start = time.monotonic()
        host = _Host(settings, start=start, back=back)
        beating, silent = host.add(1), host.add(2)
        for handle, child in ((beating, children[0]), (silent, children[1])):
            handle.process, handle.pid, handle.state = child, child.pid, "ready"
            handle.spawned_at = handle.last_beat_at = start - 3.5
        beating.token, beating.route = token, worker_wire.route_for(token)
        host._by_route[beating.route] = beating
        worker.send_multipart(worker_wire.encode(
            {"kind": "beat", "pid": beating.pid, "token": worker_wire.token_text(token),
             "state": {}}, b""))
        give_up = time.monotonic() + 30
        while not back.poll(0) and time.monotonic() < give_up:  # in the back socket's queue
            time.sleep(0.001)
        host.tick(time.monotonic())  # the sweep, its clock past both workers' timeouts
        assert beating.state == "ready" and beating.hung_reason is None
        assert beating.last_beat_at is not None and beating.last_beat_at >= start
        assert silent.state == "hung" and silent.hung_reason == "no heartbeat for 4s"
    finally:
        for child in children:
            child.kill()
            child.wait()
        worker.close(linger=0)
        back.close(linger=0)
        ctx.term()


def test_an_answered_request_leaves_no_deadline_to_wake_the_loop_for():
    host = _Host(Settings(tick_s=0.25), start=1000.0)
    handle = host.add(1)
    handle.state = "busy"
    host.tick(1000.0)  # the sweep: the next is due at 1000.25
    answered = host.queue(handle, "1", deadline=1000.1)
    waiting = host.queue(handle, "2", deadline=1000.2)
    for i in range(3, 1003):  # a thousand more, each answered in turn
        host._answer(handle, host.queue(handle, str(i), deadline=1000.05 + i * 1e-5), None)
    host._answer(handle, answered, None)
    # The loop wakes for the request still waiting, not for those answered before it.
    assert host.poll_timeout_ms(1000.01) == 190
    assert host._deadlines == [(1000.2, handle.space_id, "2")]
    host._answer(handle, waiting, None)
    assert host.poll_timeout_ms(1000.01) == 240 and host._deadlines == []


def test_answered_requests_with_far_deadlines_leave_the_heap_at_the_next_sweep():
    """A call's deadline is seconds away, past the next sweep: the turns do not walk the
    heap for it, and the sweep drops the answered ones, so the heap holds at most a
    tick's worth of answered requests, not every request of a timeout's span."""
    host = _Host(Settings(tick_s=0.25), start=1000.0)
    handle = host.add(1)
    handle.state = "busy"
    host.tick(1000.0)  # the sweep: the next is due at 1000.25
    for i in range(1000):
        host._answer(handle, host.queue(handle, str(i), deadline=1060.0 + i * 1e-3), None)
    waiting = host.queue(handle, "last", deadline=1061.0 + 1e-3)
    assert host.poll_timeout_ms(1000.01) == 240  # the sweep decides the wait
    assert len(host._deadlines) == 1001  # not walked at a turn
    host.tick(1000.25)  # the sweep
    assert host._deadlines == [(1061.0 + 1e-3, handle.space_id, "last")]
    host._answer(handle, waiting, None)
    host.tick(1000.5)
    assert host._deadlines == []


def test_the_loop_never_polls_without_waiting_while_work_is_not_yet_due():
    """The poll takes whole milliseconds: work due in a fraction of one is waited for
    a whole one (it comes under a millisecond late), never polled for with 0 in a spin."""
    host = _Host(Settings(tick_s=0.25), start=1000.0)
    handle = host.add(1)
    handle.state = "busy"
    host.tick(1000.0)  # the sweep: the next is due at 1000.25
    assert host.poll_timeout_ms(1000.2496) == 1
    assert host.poll_timeout_ms(1000.25) == 0  # due now: no wait
    host.queue(handle, "1", deadline=1000.1003)
    assert host.poll_timeout_ms(1000.1) == 1
    assert host.poll_timeout_ms(1000.2) == 0


class _Process:
    """A worker process as the lifecycle handles it; it exits when the test says."""

    exitcode = 0

    def __init__(self, pid: int, sentinel: int) -> None:
        self.pid, self.sentinel = pid, sentinel

    def join(self, timeout: float | None = None) -> None:
        pass

    def close(self) -> None:
        pass


class _Spawner:
    """A forkserver still importing until `ready` is set; its spawns are recorded."""

    def __init__(self) -> None:
        self.ready = False
        self.spawned: list[str] = []
        self._pipes: list[tuple[int, int]] = []

    def ready_fd(self) -> int:
        return -1

    def take_ready(self) -> list[str]:
        self.ready = True
        return []

    def spawn(self, config, token: bytes):  # noqa: ANN001
        self.spawned.append(config.space_id)
        read, write = os.pipe()  # the sentinel: readable once the "process" exits
        self._pipes.append((read, write))
        return _Process(pid=40000 + len(self.spawned), sentinel=read)

    def close(self) -> None:
        for pair in self._pipes:
            for fd in pair:
                os.close(fd)


class _Poller:
    def unregister(self, _fd: int) -> None:
        pass


class _ForkserverHost(_Host):
    def __init__(self, settings: Settings, start: float) -> None:
        super().__init__(settings, start)
        self.home, self.back_address = "/nowhere", "ipc:///nowhere"
        self.run_id, self.predecessor_run = "run", ""
        self.spawner, self.poller = _Spawner(), _Poller()
        self.exits: ExitWatch[WorkerHandle] = ExitWatch()
        self._awaiting_forkserver: dict = {}


def test_a_worker_whose_requests_all_timed_out_before_the_forkserver_was_ready_is_not_started():
    """Requests for three spaces wait while the forkserver imports (a slow box): one's
    requests all time out, one's time out and another arrives before the forkserver is
    ready, and one space's worker was asked for its own sake (an upgrade's sessions
    handed over, no request). Once ready, the first gets no worker (no one waits for it:
    it would only idle out) and says idle; the other two start, and a request that comes
    later for the first starts its worker as any request does."""
    host = _ForkserverHost(Settings(tick_s=0.25), start=1000.0)
    try:
        timed_out, asked_again, for_itself = host.add(1), host.add(2), host.add(3)
        for handle in (timed_out, asked_again):
            host.queue(handle, f"{handle.label}-1", deadline=1000.5)
            host.spawn(handle)
        host.spawn(for_itself)
        assert {h.state for h in (timed_out, asked_again, for_itself)} == {"starting"}
        host.tick(1001.0)  # the deadlines pass: answered TIMEOUT
        assert [r.error for _, r in host.answered] == ["TIMEOUT", "TIMEOUT"]
        host.queue(asked_again, "again", deadline=1030.0)
        host.on_forkserver_ready()
        assert host.spawner.spawned == [asked_again.space_id, for_itself.space_id]
        assert timed_out.state == "idle" and not timed_out.alive
        host.queue(timed_out, "later", deadline=1030.0)
        host.spawn(timed_out)
        assert host.spawner.spawned[-1] == timed_out.space_id and timed_out.alive
    finally:
        host.exits.close()
        host.spawner.close()


def test_a_space_stopped_for_room_and_asked_for_meanwhile_waits_its_turn(monkeypatch):
    """Room for one worker. Space B's request stops A's idle worker to make room; a request
    for A comes while it stops, and one for a new space X once it has exited, before the
    sweep that serves the queue. The room is B's: B's worker starts first, and A and X
    wait behind it, where A started again at once took the room back and B, which asked
    first, was refused, and a request for B then stopped A again: stopped and started for
    each of its requests while B was never served. At their turn B's worker is still
    starting: A waits at the queue's head (it was refused BUSY then, though B's worker,
    its request answered, could be stopped for it a moment later), and once B's worker
    has answered with no session it is stopped for A; X waits in turn for A's, and is
    refused BUSY only once A's beat says a session holds it."""
    alive = lambda: sum(1 for h in host.handles.values() if h.alive)  # noqa: E731
    limit = 1000
    reserve = OpenFiles(0, limit).reserve

    def one_worker_fits() -> OpenFiles:
        return OpenFiles(limit - reserve - FDS_PER_WORKER + alive(), limit)

    monkeypatch.setattr(room, "open_files", one_worker_fits)
    ctx = zmq.Context()
    host = _ForkserverHost(Settings(tick_s=0.25), start=1000.0)
    host.back = ctx.socket(zmq.ROUTER)  # the stop goes nowhere: the test ends the worker
    host.spawner.ready = True
    try:
        a, b, x = host.add(1), host.add(2), host.add(3)
        host.spawn(a)
        a.state, a.last_activity, a.last_beat_at = "ready", 1.0, 2.0  # idle, beat after work
        host.queue(b, "b1", deadline=1010.0)
        host.spawn(b)  # no room: A is stopped for it
        assert a.state == "stopping" and host._room_wanted == [b.space_id]
        host.queue(a, "a1", deadline=1010.0)  # A asked for while it stops
        a_process = a.process
        host.exits.forget(a_process.sentinel)
        host.exits.watch(a_process.sentinel, a)
        host._on_exit(a)
        assert not a.alive and host._room_wanted == [b.space_id, a.space_id]
        host.queue(x, "x1", deadline=1010.0)
        host.spawn(x)  # the room A left is B's
        assert not x.alive and host._room_wanted == [b.space_id, a.space_id, x.space_id]
        host.tick(1000.25)  # the sweep serves the queue in order
        assert host.spawner.spawned == [a.space_id, b.space_id]
        assert b.alive and "b1" in b.pending and b.state == "starting"
        assert host.answered == [] and host._room_wanted == [a.space_id, x.space_id]
        assert host._evicting == set()
        host.queue(a, "a2", deadline=1000.3)  # one that runs out meanwhile says for what
        host.tick(1000.3)
        _, late = host.answered.pop()
        assert late.error == "TIMEOUT" and "waiting for room" in late.message, late
        assert "no worker was idle yet, one still starting or answering" in late.message

        def answered_and_beat(handle: WorkerHandle, now: float, sessions: int) -> None:
            handle.pending.clear()  # its request answered, then a beat after it
            handle.state, handle.last_activity, handle.last_beat_at = "ready", now - 0.2, now
            handle.beat = {"taken": handle.sent, "sessions": sessions}

        answered_and_beat(b, 1000.4, sessions=0)
        host.tick(1000.5)  # B's worker can be spared now: stopped for A
        assert b.state == "stopping" and host._evicting == {b.space_id}
        assert host._room_wanted == [a.space_id, x.space_id]
        host._on_exit(b)
        host.tick(1000.75)
        assert host.spawner.spawned == [a.space_id, b.space_id, a.space_id] and a.alive
        assert host.answered == [] and host._room_wanted == [x.space_id]
        answered_and_beat(a, 1000.9, sessions=1)  # A's worker holds a session: none to spare
        host.tick(1001.0)
        assert [(i, r.error) for i, r in host.answered] == [("x1", "BUSY")]
        assert host._room_wanted == [] and host._evicting == set()
    finally:
        host.back.close(linger=0)
        ctx.term()
        host.exits.close()
        host.spawner.close()


class _ExitHost(_ForkserverHost):
    """A forkserver ready, a back socket that reaches no worker (a stop sent to one that
    exited is refused, as under the supervisor's ROUTER_MANDATORY), and the quarantine's
    message as clients get it."""

    _quarantine_message = ClientRouting._quarantine_message

    def __init__(self, ctx: zmq.Context) -> None:
        super().__init__(Settings(tick_s=0.25), start=1000.0)
        self.spawner.ready = True
        self.back = ctx.socket(zmq.ROUTER)
        self.back.setsockopt(zmq.ROUTER_MANDATORY, 1)

    def close(self) -> None:
        self.back.close(linger=0)
        self.exits.close()
        self.spawner.close()


REASON = "the worker could not start: ImportError: No module named 'kint_plugin_gone'"


def _fatal(route: bytes, token: bytes, pid: int, reason: str = REASON,
           **refusal: object) -> list[zmq.Frame]:
    """A worker's `fatal` as the back socket gives it: its route, the header, no body; a
    refused start's carries its `refusal` (code, hint, holder_pid)."""
    header = {"kind": "fatal", "pid": pid, "token": worker_wire.token_text(token),
              "reason": reason, **refusal}
    return [zmq.Frame(route), zmq.Frame(orjson.dumps(header)), zmq.Frame(b"")]


def _exits_fatal(host: _ExitHost, handle: WorkerHandle, waiting: bool = True,
                 code: int = worker_wire.EXIT_FATAL) -> None:
    """The space's worker, five crashes behind it in the window (the next quarantines),
    exits `code` with a request waiting, its reason not read yet."""
    now = time.monotonic()
    handle.crash_times.extend([now] * host.settings.max_restarts_in_window)
    if waiting:
        host.queue(handle, "waits", deadline=now + 30)
    handle.process.exitcode = code
    host._on_exit(handle)


def test_an_exit_held_for_its_reason_is_handled_the_moment_the_reason_comes():
    """A worker sent its reason and exited, the exit noticed before the message was read
    (the race test_worker_start_failure met): what the exit answers was made there, bare
    (`exited with code 3`). The exit is held instead, the space's requests waiting as for
    a worker still starting, the loop waking for it by the hold's end at the latest, and
    another space's worker untouched; the reason, read on the route, has it handled at
    once: the quarantine's refusal names it."""
    ctx = zmq.Context()
    host = _ExitHost(ctx)
    try:
        space, other = host.add(1), host.add(2)
        host.spawn(space)
        host.spawn(other)
        route, token, pid = space.route, space.token, space.pid
        _exits_fatal(host, space)
        assert space.held_until is not None and space.alive, space
        assert host._held_exits == {space.space_id: space} and host.answered == []
        # The loop wakes at the hold's end, not at the next tick's (0.25 s) or sweep's:
        # both put past it, on the hold's own clock, 0.1 s of it left.
        host._sweep_at = space.held_until + 5
        assert host.poll_timeout_ms(space.held_until - 0.1) == 100
        host._sweep_at = space.held_until - 0.01
        host.tick(space.held_until - 0.01)  # not yet: the sweep passes it by too
        assert host.sweeps == [space.held_until - 0.01]
        assert host.answered == [] and space.state == "starting" and space.alive
        host._on_back(_fatal(route, token, pid))
        assert space.held_until is None and host._held_exits == {} and not space.alive
        assert [(i, r.error) for i, r in host.answered] == [("waits", "QUARANTINED")]
        assert f"last exit: {REASON};" in host.answered[0][1].message, host.answered
        assert space.state == "quarantined" and space.last_exit == REASON
        assert other.alive and other.state == "starting" and other.held_until is None
    finally:
        host.close()
        ctx.term()


@pytest.mark.parametrize("late", ["its-own", "another-pid", "stopped", "supervisor-stopping"])
def test_a_reason_later_than_the_hold_mends_only_the_exit_it_was_for(caplog, late):
    """The hold's grace passes without the reason: the exit is handled at its deadline,
    bare. The worker's reason read after that, with its token and pid, becomes the row's
    last exit (`its-own`). Nothing changes when the pid is another's (refused, and logged
    as a peer's), nor when the exit wrote no last exit of its own: a commanded stop during
    the hold (`stopped`), or the supervisor stopping (`supervisor-stopping`), whose rows
    keep the last exit an earlier crash wrote."""
    ctx = zmq.Context()
    host = _ExitHost(ctx)
    caplog.set_level(logging.INFO, logger="kint.supervisor")
    try:
        space = host.add(1)
        space.last_exit = "an earlier crash"
        host.spawn(space)
        route, token, pid = space.route, space.token, space.pid
        _exits_fatal(host, space, waiting=late == "its-own")
        if late == "stopped":
            host.stop_worker(space, "stop", time.monotonic())
        elif late == "supervisor-stopping":
            host.shutting_down = True
        host.tick(space.held_until)  # the deadline: handled without the reason
        assert space.held_until is None and not space.alive
        bare = space.last_exit
        if late in ("its-own", "another-pid"):
            assert bare == "exited with code 3" and space.state == "quarantined", space
        else:
            assert bare == "an earlier crash" and space.state == "stopped", space
        host._on_back(_fatal(route, token, pid + 1 if late == "another-pid" else pid))
        if late == "its-own":
            assert space.last_exit == REASON
            return
        assert space.last_exit == bare, space.last_exit
        if late == "another-pid":
            assert caplog.text.count("refused a message") == 1, caplog.text
    finally:
        host.close()
        ctx.term()


def test_a_reason_waiting_unread_at_the_holds_end_is_the_exits():
    """The turn's clock was read after its poll: at the hold's end the worker's reason may
    wait on the back socket, unread. It is read first, and the exit is handled with it,
    as a reply found there wins over its TIMEOUT."""
    ctx = zmq.Context()
    host = _ExitHost(ctx)
    worker = ctx.socket(zmq.DEALER)
    try:
        host.back.bind("inproc://exit-hold")
        space = host.add(1)
        host.spawn(space)
        route, token, pid = space.route, space.token, space.pid
        _exits_fatal(host, space)
        worker.setsockopt(zmq.ROUTING_ID, route)
        worker.connect("inproc://exit-hold")
        worker.send_multipart([f.bytes for f in _fatal(route, token, pid)[1:]])
        give_up = time.monotonic() + 30
        while not host.back.poll(0) and time.monotonic() < give_up:
            time.sleep(0.001)
        host.tick(space.held_until)
        assert space.last_exit == REASON and space.state == "quarantined", space
        assert f"last exit: {REASON};" in host.answered[0][1].message, host.answered
    finally:
        worker.close(linger=0)
        host.close()
        ctx.term()


def test_a_refusal_held_for_its_reason_names_the_holder_the_moment_it_comes():
    """A worker that found its space's worker lock held sends a refusal naming the holder,
    then exits EXIT_REFUSED. Its exit, noticed first, is held; the message, read, has it
    handled with it: the waiting request refused WORKER_DOWN with the message's reason and
    hint, the holder kept for the row, the space idle, no crash counted. (The refusal read
    only after the exit is handled names no holder: `_refused_unheard`.)"""
    ctx = zmq.Context()
    host = _ExitHost(ctx)
    try:
        space = host.add(1)
        host.spawn(space)
        route, token, pid = space.route, space.token, space.pid
        _exits_fatal(host, space, code=worker_wire.EXIT_REFUSED)
        assert space.held_until is not None and host.answered == []
        reason = f"the worker of space {space.space16} refused to start: held by worker 4242"
        hint = "let worker 4242 finish, or end it"
        host._on_back(_fatal(route, token, pid, reason, code="WORKER_DOWN", hint=hint,
                             holder_pid=4242))
        assert space.held_until is None and not space.alive
        [(rid, reply)] = host.answered
        assert (rid, reply.error, reply.message, reply.hint) == ("waits", "WORKER_DOWN",
                                                                 reason, hint)
        assert space.start_refused.holder_pid == 4242 and space.last_exit == reason
        assert space.state == "idle" and space.restarts == 0, space
    finally:
        host.close()
        ctx.term()


def test_a_held_exit_is_handled_before_a_deadline_due_at_the_same_turn():
    """A request whose deadline is the hold's end: the exit is handled first, and what it
    answers (the quarantine, naming the exit) is what the request gets, not a TIMEOUT."""
    ctx = zmq.Context()
    host = _ExitHost(ctx)
    try:
        space = host.add(1)
        host.spawn(space)
        _exits_fatal(host, space, waiting=False)
        host.queue(space, "due", deadline=space.held_until)
        host.tick(space.held_until)
        assert [(i, r.error) for i, r in host.answered] == [("due", "QUARANTINED")]
    finally:
        host.close()
        ctx.term()


def test_a_restart_commanded_during_a_hold_starts_the_next_worker_and_counts_no_crash():
    """`kint supervisor restart` while an exit is held for its reason: the exit, handled
    when the reason comes, is the commanded restart's, as a stop's is a stop's. The next
    worker starts and gets the requests waiting; no crash is counted and no last exit
    written (the restart cleared the crash history; the reason is in the log, and the
    next worker's exit says what it met)."""
    ctx = zmq.Context()
    host = _ExitHost(ctx)
    try:
        space = host.add(1)
        space.last_exit = "an earlier crash"
        host.spawn(space)
        route, token, pid = space.route, space.token, space.pid
        _exits_fatal(host, space)
        space.crash_times.clear()  # as the restart command does (commands.py)
        host.stop_worker(space, "restart", time.monotonic())
        host._on_back(_fatal(route, token, pid))
        assert host.spawner.spawned == [space.space_id] * 2 and space.alive
        assert space.pid != pid and space.held_until is None and host.answered == []
        assert list(space.pending) == ["waits"]
        assert space.restarts == 0 and space.last_exit == "an earlier crash", space
    finally:
        host.close()
        ctx.term()


@pytest.mark.parametrize("meanwhile", ["silent", "stopped"])
def test_no_signal_reaches_the_pid_of_an_exit_held_for_its_reason(monkeypatch, meanwhile):
    """A held worker's process is reaped: its pid may be another process's by now. The
    sweep asks it no signal (`_check_alive`), though it is silent past its start timeout
    (`silent`) or past its stop's grace (`stopped`); and a signal asked of it (a stop the
    dead route refused falls back to SIGTERM) never reaches `os.kill`
    (`WorkerHandle.signal`). Both are recorded, and its pid is one no process of this
    box's can have (the kernel's pids are below pid_max), should one get through."""
    asked: list[int] = []
    killed: list[tuple[int, int]] = []
    monkeypatch.setattr(workers.os, "kill", lambda p, sig: killed.append((p, sig)))
    ask = WorkerHandle.signal

    def recorded(handle: WorkerHandle, sig: signal.Signals) -> None:
        asked.append(sig)
        ask(handle, sig)

    monkeypatch.setattr(WorkerHandle, "signal", recorded)
    ctx = zmq.Context()
    host = _ExitHost(ctx)
    try:
        space = host.add(1)
        host.spawn(space)
        space.pid = int(open("/proc/sys/kernel/pid_max").read())
        route, token, pid = space.route, space.token, space.pid
        _exits_fatal(host, space)
        turn = space.held_until - 0.01  # inside the hold
        s = host.settings
        if meanwhile == "silent":
            space.spawned_at = turn - s.start_timeout_s - 1
        else:
            host.stop_worker(space, "stop", turn - s.stop_grace_s - 1)
            assert asked == [signal.SIGTERM, signal.SIGCONT] and killed == []
            asked.clear()
        host._sweep_at = turn
        host.tick(turn)
        assert host.sweeps == [turn] and asked == [] and killed == []
        assert space.hung_reason is None and space.held_until is not None
        host._on_back(_fatal(route, token, pid))
        assert space.state == ("quarantined" if meanwhile == "silent" else "stopped"), space
        assert asked == [] and killed == []
    finally:
        host.close()
        ctx.term()
