"""A shared box with more spaces than the supervisor's open files allow (a low `ulimit -n`):
the real supervisor, started under RLIMIT_NOFILE 64 (soft and hard, as `ulimit -n 64`
sets them), and real workers for twenty Sibyl stores.

Before kint/open_files.py the supervisor spawned until the limit: spawns failed
and counted as crashes (healthy spaces quarantined), its forkserver died, and the next
client to connect aborted it inside libzmq (`Too many open files
(src/ipc_listener.cpp:297)`). Now a worker it has no room for is refused BUSY, naming the
limit; an idle worker (no session, nothing to do) is stopped to make room; and the
supervisor and every other space keep answering. A worker inherits the limit: an op of one
that runs out is refused BUSY naming it too, never INTERNAL ("a bug in kint").
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import KINT, make_sandbox, pid_alive, write_store
from kint.client import KintError
from support.limited_box import profile_stores, start_limited
from kint.supervisor.pidlock import running_pid

LIMIT = 64
# More spaces than fit (without the reserve, 15 did): the supervisor holds ~17 descriptors of its
# own and 3 per worker, and keeps 16 + LIMIT/8 free, so about 7 workers run at LIMIT 64.
SPACES = 20


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    sb = make_sandbox(tmp_path_factory.mktemp("open-files"))
    # Profiles p1, p2, p10, p11, p3, ... asked for in that order: the status rows read
    # p1, p2, p3, ..., p10, p11 (numbers compared as numbers), not p1, p10, p11, p2.
    numbers = [1, 2, 10, 11, *(n for n in range(3, SPACES + 3) if n not in (10, 11))]
    dbs = profile_stores(sb, numbers[:SPACES])
    start_limited(sb, LIMIT)
    yield sb, dbs
    sb.shutdown()


def _attach(sb, db, session):
    return sb.call("attach", db, timeout_s=10, args={"session": session, "watcher": False})


def _detach_all(sb, db: Path, sessions: list[str]) -> None:
    """Each of `sessions` detached from `db`'s worker, over one connection. A connection a
    call (`sb.call`) costs the supervisor a descriptor until it has seen that client close,
    and under this limit its door closes to new clients past about ten at once
    (kint/supervisor/front_door.py): CI once found it closed partway through twenty-one
    detaches in a row ("51 of its 64 open files ... 12 by the clients connected"). Should
    it close anyway, the failure carries what the supervisor logged of its door."""
    with sb.client() as client:
        for session in sessions:
            try:
                client.call("detach", tenant=sb.tenant, db=str(db), space=sb.label(db),
                            timeout_s=10, args={"session": session})
            except KintError as err:
                log = (sb.kint_home / "supervisor.log").read_text()
                door = [line for line in log.splitlines() if "open files" in line]
                raise AssertionError(f"{err}; the supervisor's door: {door[-6:]}") from err


def _sessions(dbs: list[Path]) -> list[str]:
    """Every agent session these tests attach: one per store, and the late one."""
    return [f"agent-{n}" for n in range(len(dbs))] + ["agent-late"]


def _status_json(sb):
    out = sb.kint("supervisor", "status", "--json")
    return out.returncode, json.loads(out.stdout)


def _spaces(sb) -> list[dict]:
    """The rows `kint supervisor status --json` prints (its `sup.status` answer), asked from
    this process: for a wait's predicate, where each look through the command would cost
    its start and imports."""
    return sb.sup_status()["spaces"]


def test_past_the_open_file_limit_a_space_is_refused_by_name_and_served_once_room_is_made(box):
    sb, dbs = box
    pid = running_pid(sb.kint_home)
    # Every worker started holds an agent session, so none can be spared: the spaces are
    # served until the supervisor has no room for another worker, then refused.
    served, refused = [], None
    for n, db in enumerate(dbs):
        try:
            _attach(sb, db, f"agent-{n}")
        except KintError as err:
            refused = (db, err)
            break
        served.append(db)
    assert refused is not None, "every space got a worker: the limit was never met"
    db, err = refused
    assert len(served) >= 3, served
    assert err.code == "BUSY", err
    assert f"of its limit of {LIMIT} (ulimit -n)" in err.message, err.message
    assert "ulimit -n" in err.hint and "agent sessions" in err.hint, err.hint

    # Not a crash: no quarantine, no restart counted; the supervisor says why, and exits 1.
    code, status = _status_json(sb)
    assert code == 1, status
    row = next(r for r in status["spaces"] if r["store"] == str(db))
    assert row["state"] == "idle" and row["restarts"] == 0 and row["pid"] is None, row
    assert f"limit of {LIMIT}" in row["no_room"], row
    profiles = [int(r["label"].rsplit(":p", 1)[1]) for r in status["spaces"]]
    assert profiles == sorted(profiles) and {2, 10} <= set(profiles), profiles
    files = status["supervisor"]["open_files"]
    # The reserve is the clients' (this status command's connection among them): the
    # workers and the supervisor's own files leave it free.
    clients = status["supervisor"]["front"]["clients"]
    assert files["limit"] == LIMIT and files["open"] - clients + files["reserve"] <= LIMIT, (
        files, clients)
    text = sb.kint("supervisor", "status")
    assert text.returncode == 1 and "idle (no room)" in text.stdout, text.stdout
    assert "1 space(s) refused a worker" in text.stdout, text.stdout

    # The served spaces answer, and clients keep connecting (the reserve is theirs): the
    # supervisor that used to abort in libzmq at the next connection is the same process.
    clients = [sb.client() for _ in range(8)]
    try:
        assert all(c.ping(2.0) for c in clients)
    finally:
        for c in clients:
            c.close()
    assert sb.call("status", served[0])["store"]["exists"]
    assert running_pid(sb.kint_home) == pid and pid_alive(pid)

    # An agent session closes: its worker now has nothing to do, and is stopped to make
    # room for the refused space at its next call, without waiting out the idle time.
    sb.call("detach", served[0], args={"session": "agent-0"})
    result = sb.wait_for(lambda: _try_attach(sb, db, "agent-late"), timeout=20,
                         what="the refused space served once a worker could be spared")
    assert result["sessions"] == 1, result
    rows = {r["store"]: r for r in _status_json(sb)[1]["spaces"]}
    assert rows[str(db)]["state"] == "ready" and rows[str(db)]["no_room"] is None
    assert rows[str(served[0])]["pid"] is None and rows[str(served[0])]["restarts"] == 0
    for other in served[1:]:  # the spaces with sessions kept their workers
        assert rows[str(other)]["state"] == "ready", rows[str(other)]

    log = (sb.kint_home / "supervisor.log").read_text()
    assert "Traceback" not in log and "quarantined" not in log, log[-3000:]
    assert running_pid(sb.kint_home) == pid


def _try_attach(sb, db, session):
    try:
        return _attach(sb, db, session)
    except KintError as err:
        assert err.code == "BUSY", err  # room not made yet: refused, never anything else
        return None


def test_a_worker_out_of_open_files_refuses_its_op_by_name_and_serves_once_it_has_them(box):
    sb, dbs = box
    row = next(r for r in _status_json(sb)[1]["spaces"] if r["state"] == "ready")
    db, pid = row["store"], row["pid"]
    held = len(os.listdir(f"/proc/{pid}/fd"))
    # The worker's own limit, lowered to what it holds: its next file open fails (EMFILE),
    # where a worker of a box under a low `ulimit -n` with a busy op would meet it.
    # The soft limit only: raising a hard limit back takes a privilege.
    before = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (held, before[1]))
    try:
        with pytest.raises(KintError) as err:
            sb.call("status", Path(db), timeout_s=10)
        assert err.value.code == "BUSY", err.value
        assert "ran out of open files" in err.value.message, err.value.message
        assert f"of its limit of {held}, ulimit -n" in err.value.message, err.value.message
        assert "ulimit -n" in err.value.hint and "bug" not in err.value.hint, err.value.hint
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, before)
    # Room again: the same worker serves, nothing restarted.
    assert sb.call("status", Path(db))["store"]["exists"]
    again = next(r for r in _status_json(sb)[1]["spaces"] if r["store"] == db)
    assert again["pid"] == pid and again["restarts"] == 0, again
    log = (sb.kint_home / "supervisor.log").read_text()
    assert "Traceback" not in log, log[-3000:]


def test_a_request_that_times_out_waiting_for_room_says_so(box):
    """A request for a space with no worker, queued while an idle worker is stopped to make
    room, that runs out of time meanwhile is answered TIMEOUT naming the wait for room (open
    files) and what frees some, not as if the space's worker sat idle. The worker stopped for
    room is held (SIGSTOP) so that it cannot leave before the request's deadline."""
    sb, dbs = box
    code, status = _status_json(sb)
    rows = {r["store"]: r for r in status["spaces"]}
    spare = next(r for r in rows.values() if r["pid"] and r["state"] == "ready")
    new_space = next(db for db in dbs if str(db) not in rows)
    # The spare worker's sessions end; it may be stopped for room once a beat made after
    # that work has been read (WorkerHandle.beat_tells_after_work).
    _detach_all(sb, Path(spare["store"]), _sessions(dbs))
    detached = time.monotonic()

    def beat_after_detach():
        asked = time.monotonic()
        row = next(r for r in _spaces(sb) if r["store"] == spare["store"])
        age = row["last_beat_age_s"]
        return (row["sessions"] == 0 and age is not None and age < asked - detached
                and row)

    sb.wait_for(beat_after_detach, timeout=20, what="a beat after the sessions ended")
    os.kill(spare["pid"], signal.SIGSTOP)
    try:
        with pytest.raises(KintError) as err:
            # 5 s: the supervisor answers TIMEOUT at the request's own bound, 1.25 s before
            # the client's (client_bound.request_ms), a margin a loaded box kept where 2 s's
            # 0.5 s was missed once (the client's SUPERVISOR_UNAVAILABLE came first); well
            # inside the held worker's 10 s heartbeat timeout, its last beat just read.
            sb.call("attach", new_space, timeout_s=5,
                    args={"session": "agent-late", "watcher": False})
    finally:
        os.kill(spare["pid"], signal.SIGCONT)
    assert err.value.code == "TIMEOUT", err.value
    assert "waiting for room to start the space's worker" in err.value.message, err.value
    assert "open files" in err.value.message and "idle" in err.value.message, err.value
    assert "ulimit -n" in err.value.hint and "agent sessions" in err.value.hint, err.value
    # The held worker, let go, leaves on the stop it was sent; nothing crashed.
    sb.wait_for(lambda: not pid_alive(spare["pid"]), timeout=30,
                what="the worker stopped for room gone")
    row = next(r for r in _status_json(sb)[1]["spaces"] if r["store"] == spare["store"])
    assert row["restarts"] == 0, row
    # The room it left is the waiting space's at its next call: every worker holds a
    # session again, as the next test expects.
    sb.wait_for(lambda: _try_attach(sb, new_space, "agent-late"), timeout=20,
                what="the space that timed out served once room was made")


def test_a_refusal_for_want_of_room_is_forgotten_once_workers_leave(box):
    sb, dbs = box
    rows = {r["store"]: r for r in _status_json(sb)[1]["spaces"]}
    waiting = [db for db in dbs if str(db) not in rows]
    # Every running worker holds a session: the next new space is refused, and stays
    # degraded in status while nothing leaves.
    with pytest.raises(KintError) as err:
        _attach(sb, waiting[0], "agent-refused")
    assert err.value.code == "BUSY", err.value
    assert _status_json(sb)[0] == 1
    # The sessions end and the workers exit idle (1 s, by config.toml): room again, and
    # without a request for it the refused space is no longer degraded.
    for row in (r for r in rows.values() if r["pid"]):
        _detach_all(sb, Path(row["store"]), _sessions(dbs))
    with sb.supervisor_config("worker_idle_seconds = 1\n"):
        sb.wait_for(lambda: not sb.sup_status()["degraded"], timeout=30,
                    what="the refused space no longer degraded")
        code, status = _status_json(sb)  # and the command says so: exit 0
        assert code == 0, status
        row = next(r for r in status["spaces"] if r["store"] == str(waiting[0]))
        assert row["no_room"] is None and row["state"] == "idle", row
    assert _attach(sb, waiting[0], "agent-refused")["sessions"] == 1


def test_a_soft_limit_under_a_higher_hard_one_is_raised_at_start(tmp_path):
    # As a login shell or systemd leaves it: 1024 soft under a far higher hard limit; here
    # 64 under 4096. The supervisor takes its hard limit, and its workers inherit it.
    sb = make_sandbox(tmp_path / "machine")
    db = sb.profile_db("one")
    db.parent.mkdir(parents=True)
    write_store(db)
    out = subprocess.run(
        [KINT, "supervisor", "start"], env=sb.env, text=True, capture_output=True,
        timeout=90, stdin=subprocess.DEVNULL,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, 4096)))
    assert out.returncode == 0, out.stderr
    try:
        sb.warm_up()  # the worker's start is not what is bounded here
        sb.call("status", db)
        code, status = _status_json(sb)
        assert code == 0 and status["supervisor"]["open_files"]["limit"] == 4096, status
        pid = status["spaces"][0]["pid"]
        assert resource.prlimit(pid, resource.RLIMIT_NOFILE) == (4096, 4096)
        assert "open-file limit raised from 64 to 4096" in (
            sb.kint_home / "supervisor.log").read_text()
    finally:
        sb.shutdown()


def test_a_limit_below_what_the_supervisor_needs_to_start_is_refused_naming_it(tmp_path):
    sb = make_sandbox(tmp_path / "machine")
    out = subprocess.run(
        [KINT, "supervisor", "start"], env=sb.env, text=True, capture_output=True,
        timeout=90, stdin=subprocess.DEVNULL,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (12, 12)))
    assert out.returncode == 2, out.stderr
    assert "the supervisor ran out of open files (its limit is 12, ulimit -n)" in out.stderr
    assert "[SUPERVISOR_UNAVAILABLE]" in out.stderr and "kint: error: kint" not in out.stderr
    said = (sb.kint_home / "run" / "supervisor.stderr").read_text()
    assert "[BUSY]\nhint: start it with a higher open-file limit" in said, said
    assert "Traceback" not in said, said
    assert "Traceback" not in (sb.kint_home / "supervisor.log").read_text()
    assert running_pid(sb.kint_home) is None
