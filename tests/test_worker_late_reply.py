"""A stopping worker's last answers read after its exit (the race lane race30 found beside
the late `fatal`: tests/test_worker_late_fatal.py).

Told to stop, a worker finishes the ops it runs, sends their answers and exits 0. The
supervisor reads what waits on the back socket before it handles an exit, but an answer
can still be in the kernel's hands then: the request was answered WORKER_DOWN (`exited
with code 0 while running attach`, the worker said not to have finished) and the real
reply, read a turn later on the retired route, dropped. Now the requests a worker stopped
on command had not answered at its exit wait for its replies, for a grace: a reply with
its token reaches the client; without one, WORKER_DOWN as before, once the grace is over.

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

import threading

import pytest

from conftest import make_sandbox, write_store
from kint.client import KintError
from kint.supervisor import last_words
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

        def attach() -> None:
            try:
                outcome["reply"] = sb.call("attach", sb.sibyl_db, timeout_s=60,
                                           args={"session": "agent-1", "watcher": False})
            except KintError as err:
                outcome["error"] = err

        caller = threading.Thread(target=attach, daemon=True)
        caller.start()
        sb.wait_for(lambda: (sb.row(sb.sibyl_db).get("ops_running") or 0) >= 1,
                    what="the attach in flight")
        if stop == "stop":
            stopper = threading.Thread(target=sb.shutdown, daemon=True)
        else:
            stopper = threading.Thread(target=sb.call, args=("sup.restart",),
                                       kwargs={"args": {"target": sb.tenant}}, daemon=True)
        stopper.start()
        log = sb.kint_home / "supervisor.log"
        sb.wait_for(lambda: f"stop requested ({stop})" in log.read_text(errors="replace"),
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
    """The lifecycle's last-words part, its answers kept, the back socket empty: explicit
    monotonic times, no process (the grace and the bound are what is tested here)."""

    def __init__(self) -> None:
        super().__init__(Settings())
        self.back = None
        self.answered: list = []

    def _answer(self, handle, pending, reply) -> None:
        handle.pending.pop(pending.internal_id, None)
        self.answered.append((pending.internal_id, reply))

    def _drain(self, sock, handler) -> None:
        pass

    def _on_back(self, frames) -> None:
        raise AssertionError("nothing waits on the back socket here")


def _exited_with_a_request(host: Host, n: int, now: float):
    """Space n's worker, sent request `rN`, exited clean on a stop at `now`."""
    handle = WorkerHandle(space_id=f"{n:064x}", label=f"t{n}", tenant="t", db="/x.db",
                          pid=1000 + n, route=b"route-%d" % n, token=b"token-%d" % n)
    handle.pending[f"r{n}"] = Pending(f"r{n}", b"client", "cid", "push", now + 60, 60_000,
                                      b"{}", forwarded=True)
    record = host._retire_route(handle)
    host._await_replies(record, handle, "exited with code 0", STOPPED_MID_OP_HINT, now)
    return handle, record


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
