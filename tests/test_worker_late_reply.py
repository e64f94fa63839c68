"""A stopping worker's last answers read after its exit (the race lane race30 found beside
the late `fatal`: tests/test_worker_late_fatal.py).

Told to stop, a worker finishes the ops it runs, sends their answers and exits 0. The
supervisor reads what waits on the back socket before it handles an exit, but an answer
can still be in the kernel's hands then: the request was answered WORKER_DOWN (`exited
with code 0 while running attach`, the worker said not to have finished) and the real
reply, read a turn later on the retired route, dropped. Now the requests a worker that
exited cleanly (on a stop's command, or on a user's SIGTERM) had not answered at its exit
wait for its replies, for a grace: a reply with its token reaches the client; without
one, WORKER_DOWN as before, once the grace is over.

The race cannot be had on demand (it wants the supervisor's I/O thread to lose a race to
the exit's notice by microseconds), so the answer is made late every time:
tests/support/kint_test_faults.py's KINT_TEST_LATE_REPLY keeps a stopping worker's answers
from its socket, and a child it forked as it closed sends them, on its route with its
token, once the supervisor has logged the exit (`late`), or nobody does (`never`). The op
in flight is an `attach` held on the worker's pool (KINT_TEST_HOLD_ATTACH) until the stop
has reached the worker. The supervisor and the worker are real; the stop is the
supervisor's own (`sup.stop`, as `kint supervisor stop` sends it), which waits for those
requests before it ends, or a restart of the space (`sup.restart`, `kint supervisor
restart`), whose next worker starts meanwhile.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import zmq

from conftest import SUPPORT, make_sandbox, write_store
from support.attach_in_flight import attach_in_flight
from support.stop_read import stop_read
from kint.client import KintError
from kint.supervisor import last_words
from kint.supervisor.exits import ExitWatch
from kint.supervisor.settings import Settings
from kint.supervisor.workers import STOPPED_MID_OP_HINT, Pending, WorkerHandle
from support.lifecycle_host import LifecycleHost

# The grace for the late reply: far over what the child's send takes, so a loaded box
# never makes it too late (the test waits the reply, not the grace).
LONG_GRACE_S = "30"


def _stop_with_attach_in_flight(tmp_path, flag: str, stop: str = "stop", **env: str):
    """An attach in flight when the supervisor is told to stop (or, `stop` "restart", to
    restart the space), its answer kept from the socket as `flag` says; returns the
    attach's outcome (its result, or its KintError) and the supervisor's log."""
    hold, late = tmp_path / "hold-attach", tmp_path / "late-reply"
    sb = make_sandbox(tmp_path / "machine", KINT_TEST_HOLD_ATTACH=str(hold),
                      KINT_TEST_LATE_REPLY=str(late), **env)
    sb.start_entitled()
    outcome: dict = {}
    try:
        write_store(sb.sibyl_db, tenant=sb.tenant)
        sb.call("status", sb.sibyl_db, timeout_s=60)
        late.write_text(flag)
        hold.touch()

        caller = attach_in_flight(sb, outcome, timeout_s=60)
        if stop == "stop":
            stopper = threading.Thread(target=sb.shutdown, daemon=True)
        else:
            stopper = threading.Thread(target=sb.call, args=("sup.restart",),
                                       kwargs={"args": {"target": sb.tenant}}, daemon=True)
        stopper.start()
        log = sb.kint_home / "supervisor.log"
        sb.wait_for(lambda: stop_read(log.read_text(errors="replace"), stop),
                    what="the stop read by the worker")
        hold.unlink()  # the attach ends; its answer is kept, the worker exits 0
        caller.join(90)
        stopper.join(90)
        assert not caller.is_alive() and not stopper.is_alive()
        if stop == "restart":  # the next worker serves the space
            assert sb.call("status", sb.sibyl_db, timeout_s=60)["worker"]["pid"]
        return outcome, log.read_text(errors="replace")
    finally:
        if hold.exists():
            hold.unlink()
        sb.shutdown()


@pytest.mark.parametrize("stop", ["stop", "restart"])
def test_a_reply_read_after_a_stopped_workers_exit_reaches_its_client(tmp_path, stop):
    outcome, log = _stop_with_attach_in_flight(tmp_path, "late", stop,
                                               KINT_TEST_LAST_REPLY_GRACE_S=LONG_GRACE_S)
    # The worker's own answer, not the supervisor's WORKER_DOWN "exited with code 0
    # while running attach".
    assert "error" not in outcome, outcome["error"]
    assert outcome["reply"]["sessions"] == 1, outcome  # the session it attached, told
    assert "'s reply to attach, read after its exit, passed on" in log, log
    assert "exited with 1 request(s) it was sent unanswered" in log, log


def test_a_reply_that_never_comes_is_worker_down_after_the_grace(tmp_path):
    outcome, log = _stop_with_attach_in_flight(tmp_path, "never")
    err = outcome.get("error")
    assert isinstance(err, KintError) and err.code == "WORKER_DOWN", outcome
    assert "exited with code 0 while running attach" in err.message, err.message
    assert err.hint == STOPPED_MID_OP_HINT, err.hint
    # Answered by the sweep once the grace was over, not at the exit.
    assert "no reply to attach from worker " in log, log
    assert "within 1s of its exit; answered WORKER_DOWN" in log, log
    assert "read after its exit, passed on" not in log, log


class Host(LifecycleHost):
    """The lifecycle's last-words part, its answers and passed-on replies kept: explicit
    monotonic times (the grace and the bound are what is tested here). Its back socket
    holds what a test puts in `on_socket` (each a call that reads one message), read only
    when the supervisor would read it; a worker's exit is a real process's (watched by an
    `exits` the test gives it), and its forkserver is never ready (a restart only leaves
    the space `starting`)."""

    def __init__(self, home: Path | None = None) -> None:
        super().__init__(Settings())
        self.home = home
        self.back = None
        self.spawner = SimpleNamespace(ready=False)
        self._awaiting_forkserver: dict = {}
        self.answered: list = []
        self.passed_on: list = []
        self.on_socket: list = []

    def _answer(self, handle, pending, reply) -> None:
        handle.pending.pop(pending.internal_id, None)
        self.answered.append((pending.internal_id, reply))

    def _deliver(self, handle, pending, body) -> None:
        self.passed_on.append((pending.internal_id, body))

    def _drain(self, sock, handler) -> None:
        while self.on_socket:
            self.on_socket.pop(0)()

    def _on_back(self, frames) -> None:
        raise AssertionError("messages are read through `on_socket` here")


def _exited_with_a_request(host: Host, n: int, now: float, more: int = 0):
    """Space n's worker, sent request `rN` (and `more` after it, `rN.1`...), exited clean
    on a stop at `now`."""
    handle = WorkerHandle(space_id=f"{n:064x}", label=f"t{n}", tenant="t", db="/x.db",
                          pid=1000 + n, route=b"route-%d" % n, token=b"token-%d" % n)
    rids = [f"r{n}", *(f"r{n}.{i}" for i in range(1, more + 1))]
    return handle, _exits_clean(host, handle, rids, now)


def _exits_clean(host: Host, handle: WorkerHandle, rids: list[str], now: float,
                 due_s: dict[str, float] | None = None):
    """`handle`'s worker (its route, token and pid set), sent the requests `rids`, each
    due 60 s after `now` (or as `due_s` says), exited clean on a stop at `now`; returns
    its route's record."""
    for rid in rids:
        after = (due_s or {}).get(rid, 60.0)
        handle.pending[rid] = Pending(rid, b"client", "cid", "push", now + after,
                                      int(after * 1000), b"{}", forwarded=True)
    record = host._retire_route(handle)
    host._await_replies(record, handle, "exited with code 0", STOPPED_MID_OP_HINT, now)
    return record


def test_the_grace_is_a_monotonic_deadline_the_sweep_keeps():
    host = Host()
    handle, record = _exited_with_a_request(host, 1, now=100.0)
    grace = last_words.LAST_REPLY_GRACE_S
    assert not handle.pending and record.unreplied.reply_by == 100.0 + grace
    host._replies_due(100.0 + grace / 2)
    assert host.answered == []  # still within the grace
    host._replies_due(100.0 + grace)
    [(rid, reply)] = host.answered
    assert rid == "r1" and reply.error == "WORKER_DOWN", reply
    assert reply.message.endswith("exited with code 0 while running push"), reply.message
    assert reply.hint == STOPPED_MID_OP_HINT and not host._unreplied


def test_a_route_forgotten_past_the_bound_answers_its_requests_at_once():
    host = Host()
    _exited_with_a_request(host, 0, now=100.0)
    for n in range(1, last_words.MAX_RETIRED_ROUTES + 1):
        handle = WorkerHandle(space_id=f"{n:064x}", label=f"t{n}", tenant="t", db="/x.db",
                              route=b"route-%d" % n, token=b"token-%d" % n)
        host._retire_route(handle)
    # The first route is forgotten: a reply on it would be refused as a stranger's.
    [(rid, reply)] = host.answered
    assert rid == "r0" and reply.error == "WORKER_DOWN" and not host._unreplied


def _reply(host: Host, record, rid: str) -> None:
    """The retired worker's reply to `rid`, read on its route with its token."""
    host._heard_after(record.route, record, {"kind": "reply", "id": rid},
                      b"answer-" + rid.encode())


def test_a_reply_found_on_the_socket_at_the_graces_end_wins():
    """The grace is over, and the reply waits unread on the back socket (the loop had not
    turned since it came): it is read before anything is given up, and its client gets
    it, not WORKER_DOWN."""
    host = Host()
    _, record = _exited_with_a_request(host, 1, now=100.0)
    host.on_socket.append(lambda: _reply(host, record, "r1"))
    host._replies_due(100.0 + last_words.LAST_REPLY_GRACE_S)
    assert host.passed_on == [("r1", b"answer-r1")] and host.answered == []
    assert not host._unreplied


def test_the_last_reply_read_ends_the_wait():
    """Its last request replied, the record waits for nothing: the supervisor's own stop,
    which waits while any does (`_unreplied`), goes on at once, not at the grace's end."""
    host = Host()
    _, record = _exited_with_a_request(host, 1, now=100.0)
    _reply(host, record, "r1")
    assert host.passed_on == [("r1", b"answer-r1")]
    assert not host._unreplied and record.unreplied is None


def test_a_reply_after_the_grace_is_dropped_not_answered_twice():
    host = Host()
    _, record = _exited_with_a_request(host, 1, now=100.0)
    host._replies_due(100.0 + last_words.LAST_REPLY_GRACE_S)
    assert [(i, r.error) for i, r in host.answered] == [("r1", "WORKER_DOWN")]
    _reply(host, record, "r1")  # too late: its client was told
    assert host.passed_on == [] and len(host.answered) == 1


def test_of_two_requests_the_one_unreplied_waits_out_the_grace():
    host = Host()
    _, record = _exited_with_a_request(host, 1, now=100.0, more=1)
    _reply(host, record, "r1")
    assert host.passed_on == [("r1", b"answer-r1")]
    assert list(host._unreplied) == [record.route]  # r1.1 still waits
    host._replies_due(100.5)
    assert host.answered == []
    host._replies_due(100.0 + last_words.LAST_REPLY_GRACE_S)
    assert [(i, r.error) for i, r in host.answered] == [("r1.1", "WORKER_DOWN")]
    assert host.passed_on == [("r1", b"answer-r1")] and not host._unreplied


def test_a_clean_exit_on_a_users_sigterm_waits_for_its_replies_too(tmp_path):
    """A worker sent a plain `kill -TERM` (no command) stops as on one: it finishes its ops,
    sends their answers and exits 0. Its requests wait for those replies as a commanded
    stop's do, where they were answered WORKER_DOWN at the exit; the space restarts as
    after any uncommanded exit. The worker is a real process exiting 0."""
    host = Host(tmp_path)
    host.exits = ExitWatch()
    handle = WorkerHandle(space_id="c5" * 32, label="t@hermes:p1", tenant="t", db="/p1.db",
                          route=b"route-1", token=b"token-1", state="ready")
    handle.pending["r1"] = Pending("r1", b"client", "cid", "push", time.monotonic() + 60,
                                   60_000, b"{}", forwarded=True)
    proc = multiprocessing.get_context("spawn").Process(target=os._exit, args=(0,))
    proc.start()
    try:
        handle.process, handle.pid = proc, proc.pid
        host.exits.watch(proc.sentinel, handle)
        proc.join(30)
        host._on_exit(handle)
    finally:
        host.exits.close()
    record = host._unreplied[b"route-1"]
    assert host.answered == [] and list(record.unreplied.requests) == ["r1"]
    assert handle.state == "starting" and handle.restarts == 1, handle.state
    _reply(host, record, "r1")
    assert host.passed_on == [("r1", b"answer-r1")] and host.answered == []


def test_the_spaces_count_of_parked_requests_follows_every_way_out():
    """`WorkerHandle.parked` (what `waiting()` and the bound add to the handle's own
    requests) rises as requests park and falls as each leaves: a reply read (once, however
    many copies of it come), the grace over, the route forgotten past the bound. Two
    clean exits of one space (a restart within the grace) add on its one handle."""
    host = Host()
    handle, record = _exited_with_a_request(host, 1, now=100.0, more=2)
    assert handle.parked == 3 and handle.waiting() == 3
    _reply(host, record, "r1")
    assert handle.parked == 2
    _reply(host, record, "r1")  # a second copy: dropped, its request left already
    assert handle.parked == 2 and host.passed_on == [("r1", b"answer-r1")]
    handle.route, handle.token, handle.pid = b"route-1b", b"token-1b", 2001
    again = _exits_clean(host, handle, ["r1b"], now=100.5)
    assert handle.parked == 3 and handle.waiting() == 3
    assert set(host._unreplied) == {record.route, again.route}
    host._replies_due(100.0 + last_words.LAST_REPLY_GRACE_S)  # the first exit's grace
    assert handle.parked == 1
    _reply(host, again, "r1b")
    assert handle.parked == 0 and handle.waiting() == 0 and not host._unreplied
    other, _ = _exited_with_a_request(host, 2, now=200.0)
    for n in range(3, last_words.MAX_RETIRED_ROUTES + 4):
        host._retire_route(WorkerHandle(space_id=f"{n:064x}", label=f"t{n}", tenant="t",
                                        db="/x.db", route=b"route-%d" % n,
                                        token=b"token-%d" % n))
    assert other.parked == 0 and not host._unreplied


def test_a_parked_request_answered_at_its_own_deadline_leaves_the_count():
    """A request whose own deadline comes before the grace's end is answered TIMEOUT then
    (`_replies_due`) and no longer counts in its space's `waiting` or bound: a count kept
    past it would be a phantom request, the space taking one fewer for good."""
    host = Host()
    handle = WorkerHandle(space_id="d1" * 32, label="t", tenant="t", db="/x.db", pid=1001,
                          route=b"route-1", token=b"token-1")
    record = _exits_clean(host, handle, ["r1", "r2"], now=100.0, due_s={"r1": 0.5})
    assert handle.parked == 2
    host._replies_due(100.5)  # r1's deadline, half-way through the grace
    assert [(i, r.error) for i, r in host.answered] == [("r1", "TIMEOUT")]
    assert handle.parked == 1 and handle.waiting() == 1
    _reply(host, record, "r1")  # its reply after all: dropped, counted no lower
    assert handle.parked == 1 and host.passed_on == []
    host._replies_due(100.0 + last_words.LAST_REPLY_GRACE_S)
    assert handle.parked == 0 and not host._unreplied


# The hook's resend window, shortened for its own test below (long enough that a loaded box
# still sends twice in it): a hold longer than it must not leave the reply sent once.
HOOK_WINDOW_S = 3.0
_RESENDER = """
import sys, types
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import kint_test_faults as faults
faults.LATE_FATAL_WAIT_S = float(sys.argv[2])
home, address, hold, sup = sys.argv[3:7]
config = types.SimpleNamespace(home=Path(home), space16="e1" * 8, back_address=address,
                               supervisor_pid=int(sup))
print("sending", flush=True)
faults._send_until_read(config, b"route-e1", [[b"late-reply"]], 4242, hold)
"""


def _copy_sent(sock, child) -> bool:
    """Whether the sender sent the reply a copy more (taken off `sock`) before it exited."""
    while not sock.poll(20):
        if child.poll() is not None and not sock.poll(0):
            return False
    return sock.recv_multipart()[1:] == [b"late-reply"]


def test_the_late_reply_hook_resends_after_a_hold_longer_than_its_window(tmp_path):
    """tests/support/kint_test_faults.py's `_send_until_read` (the late reply's sender)
    resends for its window once the test's `.hold` is gone, however long the hold: its
    window was counted from before the hold, and a hold longer than it (a test filling a
    space's queue while its reply waits: test_parked_requests) left one send, the one
    found lost about once in 16 runs. Run in a process of its own (the hooks patch kint
    as they import), as the supervisor's worker runs it, its window cut to HOOK_WINDOW_S;
    the supervisor is the test's socket, which loses the first copy and logs the second
    read."""
    log = tmp_path / "supervisor.log"
    log.write_text("space e1e1e1e1e1e1e1e1: worker 4242 exited with code 0\n")
    hold = tmp_path / "late-reply.hold"
    hold.touch()
    sock = zmq.Context.instance().socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.ROUTER_HANDOVER, 1)  # each copy comes on a connection of its own
    sock.bind("tcp://127.0.0.1:*")
    address = sock.getsockopt(zmq.LAST_ENDPOINT).decode()
    child = subprocess.Popen([sys.executable, "-c", _RESENDER, str(SUPPORT),
                              str(HOOK_WINDOW_S), str(tmp_path), address, str(hold),
                              str(os.getpid())], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "sending\n"
        time.sleep(HOOK_WINDOW_S + 1.0)  # the hold outlasts the window
        assert not sock.poll(0), "sent while the hold was kept"
        hold.unlink()
        assert _copy_sent(sock, child), "nothing sent once the hold was gone"
        # The first copy lost (the log does not say it read): a second must come.
        assert _copy_sent(sock, child), "sent once, its resends spent during the hold"
        with log.open("a") as fh:
            fh.write("space e1e1e1e1e1e1e1e1: worker 4242's reply to attach, read after its "
                     "exit, passed on\n")
        assert child.wait(60) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        sock.close()
