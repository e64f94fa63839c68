"""Requests parked on an exited worker's last replies, seen and bounded (note 30's leftover).

After a worker's clean exit the requests it was sent and had not answered wait on its
retired route for its replies (kint/supervisor/last_words.py). They were in no status row
(`waiting` 0, nothing named), and outside the space's bound: a stop or restart with
requests in flight let the space take MAX_WAITING_PER_SPACE more on top of them. Now
`kint supervisor status` (text and --json, `sup.status`) names them (`parked`: each op, the
exited worker's pid, the seconds left), `waiting` counts them, and so does the bound;
`kint status` and memory_status, which the next worker answers, show them too, from the
supervisor's row.

The supervisor and the workers are real: a space's worker restarted (`sup.restart`) with
an `attach` in flight, held on its pool (KINT_TEST_HOLD_ATTACH) until the restart reached
the worker, its answer kept from the socket and sent by a child after the exit, once the
test lets it (KINT_TEST_LATE_REPLY's `.hold`, tests/support/kint_test_faults.py). The grace
for it is long (KINT_TEST_LAST_REPLY_GRACE_S), so a loaded box never answers it first.

The note also said an idle stop and a recycle take the same path untested: they never
take it. Each is decided only while the space has no request, and a stopping worker is
sent none; the last test shows a request that comes during an idle stop (config.toml's
worker_idle_seconds) waiting for the next worker and getting its real reply.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time

import orjson
import pytest
import zmq

from conftest import make_sandbox, write_store
from mcp_session import AgentProcess
from support.attach_in_flight import attach_in_flight
from kint.client import KintError
from kint.protocol.limits import MAX_WAITING_PER_SPACE
from kint.render import parked_text
from kint.socket_paths import front_address

# Far over anything the test waits for: the late reply comes when the test says.
LONG_GRACE_S = "60"


def _status_request(sb, rid: str) -> bytes:
    db = sb.sibyl_db
    return orjson.dumps({"v": 1, "id": rid, "op": "status", "tenant": sb.tenant,
                         "db": str(db), "space": sb.label(db), "args": {},
                         "timeout_ms": 120_000})


@pytest.fixture
def parked(tmp_path):
    """A supervisor whose space's first worker exited on a restart with an attach in
    flight, its reply held back: yields (sandbox, the exited worker's pid, the attach's
    outcome, the file whose removal sends the reply, the attach's thread)."""
    hold, late = tmp_path / "hold-attach", tmp_path / "late-reply"
    sb = make_sandbox(tmp_path / "machine", KINT_TEST_HOLD_ATTACH=str(hold),
                      KINT_TEST_LATE_REPLY=str(late),
                      KINT_TEST_LAST_REPLY_GRACE_S=LONG_GRACE_S,
                      # The next worker is held (SIGSTOP) while its queue fills: never hung.
                      KINT_WORKER_HEARTBEAT_TIMEOUT="60")
    sb.start_entitled()
    reply_held = tmp_path / "late-reply.hold"
    outcome: dict = {}
    try:
        write_store(sb.sibyl_db, tenant=sb.tenant)
        sb.call("status", sb.sibyl_db, timeout_s=60)
        late.write_text("late")
        reply_held.touch()
        hold.touch()

        caller = attach_in_flight(sb, outcome, timeout_s=90)
        first = sb.row(sb.sibyl_db)["pid"]
        restarter = threading.Thread(target=sb.call, args=("sup.restart",),
                                     kwargs={"args": {"target": sb.tenant}}, daemon=True)
        restarter.start()
        log = sb.kint_home / "supervisor.log"
        sb.wait_for(lambda: "stop requested (restart)" in log.read_text(errors="replace"),
                    what="the restart read by the worker")
        hold.unlink()  # the attach ends; its answer is kept, the worker exits 0
        sb.wait_for(lambda: "exited with 1 request(s) it was sent unanswered"
                    in log.read_text(errors="replace"), what="the attach parked")
        restarter.join(60)
        yield sb, first, outcome, reply_held, caller
    finally:
        for path in (hold, reply_held):
            if path.exists():
                path.unlink()
        sb.shutdown()


def test_status_shows_the_requests_parked_on_an_exited_workers_reply(parked):
    sb, first, outcome, reply_held, caller = parked
    row = sb.row(sb.sibyl_db)
    [shown] = row["parked"]
    assert shown["op"] == "attach" and shown["pid"] == first, row["parked"]
    assert 0 < shown["left_s"] <= float(LONG_GRACE_S), shown
    assert row["waiting"] == 1, row  # it waits as much as a queued request
    listed = sb.kint("supervisor", "status", "--json")
    [json_row] = json.loads(listed.stdout)["spaces"]
    assert [(p["op"], p["pid"]) for p in json_row["parked"]] == [("attach", first)]
    text = sb.kint("supervisor", "status").stdout
    assert (f"{row['space']}: 1 request(s) (attach) wait for the last replies of its exited "
            f"worker (pid {first}), answered without them within ") in text, text
    reply_held.unlink()  # the late reply goes: the client gets it, and the row is clear
    caller.join(60)
    assert "error" not in outcome, outcome["error"]
    assert outcome["reply"]["sessions"] == 1, outcome
    row = sb.row(sb.sibyl_db)
    assert row["parked"] == [] and row["waiting"] == 0, row
    assert "answered without them" not in sb.kint("supervisor", "status").stdout


def test_kint_status_and_memory_status_show_the_parked_requests(parked):
    """`kint status` (text and --json) and an agent's memory_status (a real kint-server
    over MCP) show the space's parked request as `kint supervisor status` does: the worker
    that answers them is the next one, which knows nothing of it, so they read the
    supervisor's row. Once the late reply is read, nothing is shown."""
    sb, first, outcome, reply_held, caller = parked
    said = json.loads(sb.kint("status", "--json").stdout)
    assert said["worker"]["pid"] != first, said["worker"]  # the next worker answered
    [shown] = said["parked"]
    assert shown["op"] == "attach" and shown["pid"] == first, said["parked"]
    assert 0 < shown["left_s"] <= float(LONG_GRACE_S), shown
    text = sb.kint("status").stdout
    assert (f"\nparked:  1 request(s) (attach) wait for the last replies of its exited "
            f"worker (pid {first}), answered without them within ") in text, text
    agent = AgentProcess(sb.env).start()
    try:
        status = agent.call("memory_status")
        assert [(p["op"], p["pid"]) for p in status["parked"]] == [("attach", first)], status
        reply_held.unlink()  # the late reply goes: the client gets it, nothing is parked
        caller.join(60)
        assert outcome.get("reply", {}).get("sessions") == 1, outcome
        assert agent.call("memory_status")["parked"] == []
    finally:
        agent.close()
    assert json.loads(sb.kint("status", "--json").stdout)["parked"] == []
    assert "parked:" not in sb.kint("status").stdout


def test_parked_requests_count_in_the_spaces_bound(parked):
    """With one request parked, the space takes MAX_WAITING_PER_SPACE - 1 more, not the
    whole bound again: the next is refused BUSY, saying why."""
    sb, first, outcome, reply_held, caller = parked
    db = sb.sibyl_db
    worker = sb.wait_for(lambda: (lambda r: r["state"] == "ready" and r["pid"] not in
                                  (None, first) and r["pid"])(sb.row(db)),
                         what="the next worker serving")
    os.kill(worker, signal.SIGSTOP)
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(front_address(sb.kint_home))
    more = MAX_WAITING_PER_SPACE - 1
    try:
        for i in range(more):
            sock.send(_status_request(sb, f"q{i}"))
        # Counted apart from the parked one, which this test does not read here (the
        # test above does): the bound alone is what it checks.
        sb.wait_for(lambda: (lambda r: r["waiting"] - len(r.get("parked", [])))(
            sb.row(db)) == more, what="the space's queue filled but for the parked one")
        with pytest.raises(KintError) as refused:
            sb.call("status", db, timeout_s=10)
        assert refused.value.code == "BUSY", refused.value
        assert (f"already has {MAX_WAITING_PER_SPACE} requests waiting (1 of them for the "
                f"last replies of its worker that exited)") in refused.value.message
    finally:
        os.kill(worker, signal.SIGCONT)
    answered = {orjson.loads(sock.recv())["id"] for _ in range(more) if sock.poll(30_000)}
    sock.close()
    assert answered == {f"q{i}" for i in range(more)}
    reply_held.unlink()
    caller.join(60)
    assert outcome.get("reply", {}).get("sessions") == 1, outcome


def test_the_status_line_names_each_exited_worker_by_its_pid():
    """Two clean exits of one space within the grace (a second restart) leave requests of
    two workers: the line under the table says workers, and their pids in numeric order
    (99 before 100), each once; one worker's is said as one."""
    parked = [{"op": "push", "pid": 100, "left_s": 0.4},
              {"op": "attach", "pid": 99, "left_s": 0.9},
              {"op": "push", "pid": 100, "left_s": 0.4}]
    assert parked_text(parked, "abcd") == (
        "abcd: 3 request(s) (attach, push) wait for the last replies of its exited workers "
        "(pids 99, 100), answered without them within 0.9s")
    assert parked_text(parked[:1], "abcd") == (
        "abcd: 1 request(s) (push) wait for the last replies of its exited worker "
        "(pid 100), answered without them within 0.4s")


# The idle time (config.toml's worker_idle_seconds): long enough that the worker is held
# (SIGSTOP) after the beat that follows its answer and before the stop is decided on it.
# That beat comes a second after the answer, and the status reads that look for it are
# what a loaded box slows: 5 s left them about four before the worker exited, a window
# the box's reads can miss (as CI's did test_room_settling's, session 37). 10 s leaves
# nine, well inside the 60 s heartbeat timeout the held worker is judged by.
IDLE_S = 10


def test_an_idle_stop_parks_nothing_and_a_request_meanwhile_gets_a_real_reply(tmp_path):
    """An idle stop (and a recycle, decided by the same check) is decided only while the
    space has no request (lifecycle `_check_alive`), and nothing is sent to a worker being
    stopped: so no request is in flight at its exit, nothing is parked, and note 30's "idle,
    recycle and upgrade stops take the same path" was never so. A request that comes while
    the idle worker stops waits for the next worker and gets its real reply, not
    WORKER_DOWN. The idle worker is held (SIGSTOP) from just after its last beat until the
    request is queued, so the request comes while the stop is under way every time."""
    sb = make_sandbox(tmp_path / "machine", KINT_WORKER_HEARTBEAT_TIMEOUT="60")
    write_store(sb.sibyl_db)
    sb.start()
    db, log = sb.sibyl_db, sb.kint_home / "supervisor.log"
    first = None
    try:
        with sb.supervisor_config(f"worker_idle_seconds = {IDLE_S}\n"):
            # The worker's start, not bounded here: a loaded box's can outlast 10 s.
            first = sb.call("status", db, timeout_s=60)["worker"]["pid"]
            answered = time.monotonic()

            def beat_after_answer() -> bool:
                asked = time.monotonic()
                age = sb.row(db)["last_beat_age_s"]
                return age is not None and asked - age > answered

            sb.wait_for(beat_after_answer, interval=0.02, what="a beat after the answer")
            os.kill(first, signal.SIGSTOP)
            sb.wait_for(lambda: sb.row(db)["state"] == "stopping", timeout=IDLE_S + 15,
                        what="the idle stop decided")
            assert "stopping its worker" in log.read_text(errors="replace")
            outcome: dict = {}
            caller = threading.Thread(target=lambda: outcome.update(
                reply=sb.call("status", db, timeout_s=60)), daemon=True)
            caller.start()
            row = sb.wait_for(lambda: (r := sb.row(db))["waiting"] == 1 and r,
                              what="the request queued")
            assert row["parked"] == [] and row["pid"] == first, row
            os.kill(first, signal.SIGCONT)
            caller.join(60)
            assert outcome["reply"]["worker"]["pid"] not in (None, first), outcome
        said = log.read_text(errors="replace")
        assert "it was sent unanswered" not in said and "WORKER_DOWN" not in said, said
    finally:
        if first is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(first, signal.SIGCONT)
        sb.shutdown()


def test_memory_status_names_the_parked_requests_and_their_fields():
    """The tool's description names `parked` and each field of its entries, as the
    supervisor's row builds them from a retired route's unanswered request: the agent
    reads what a field means there (test_watcher_uncounted does so for another field)."""
    from kint.agent_server.tools import STATUS
    from kint.supervisor.last_words import RetiredRoute, Unreplied
    from kint.supervisor.status import parked_requests
    from kint.supervisor.workers import Pending, WorkerHandle

    handle = WorkerHandle(space_id="ab" * 32, label="t", tenant="t", db="/nowhere.db")
    pending = Pending("i1", b"client", "c1", "push", deadline=10.0, timeout_ms=10_000,
                      body=b"")
    waiting = Unreplied({"i1": pending}, reply_by=2.0, reason="exited", hint=None,
                        handle=handle)
    record = RetiredRoute(handle, b"route", b"token", 4242, None, unreplied=waiting)
    [entry] = parked_requests([record], 1.0)[handle.space_id]
    assert "`parked`" in STATUS
    for field in entry:
        assert f"`{field}`" in STATUS, field


def test_parked_is_null_when_the_supervisors_status_cannot_be_read(tmp_path):
    """`parked` is null, not [], when no supervisor's row could be read: here none runs
    for the home, and the look, on a client that starts none (as `kint status` reads it),
    says so at once and starts nothing. An empty list would say that nothing waits."""
    from kint.client import Client
    from kint.paths import run_dir
    from kint.space_row import read_parked

    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    with Client(home, autostart=False) as client:
        assert read_parked(client, "ab" * 8) is None
    assert not (run_dir(home) / "supervisor.pid").exists()
