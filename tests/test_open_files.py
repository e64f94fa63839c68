"""A shared box with more spaces than the supervisor's open files allow (a low `ulimit -n`):
the real supervisor, started under RLIMIT_NOFILE 64 (soft and hard, as `ulimit -n 64`
sets them), and real workers for twenty Sibyl stores.

Before kint/supervisor/open_files.py the supervisor spawned until the limit: spawns failed
and counted as crashes (healthy spaces quarantined), its forkserver died, and the next
client to connect aborted it inside libzmq (`Too many open files
(src/ipc_listener.cpp:297)`). Now a worker it has no room for is refused BUSY, naming the
limit; an idle worker (no session, nothing to do) is stopped to make room; and the
supervisor and every other space keep answering.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess

import pytest

from conftest import KINT, make_sandbox, pid_alive, write_store
from kint.client import KintError
from kint.supervisor.pidlock import running_pid

LIMIT = 64
# More spaces than fit (without the reserve, 15 did): the supervisor holds ~17 descriptors of its own and 3 per worker,
# and keeps 16 + LIMIT/8 free, so about 7 workers run at LIMIT 64.
SPACES = 20


def _low_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


@pytest.fixture
def box(tmp_path):
    sb = make_sandbox(tmp_path / "machine")
    dbs = []
    for n in range(SPACES):  # one store written by Sibyl's client, copied: a second each
        db = sb.profile_db(f"p{n:02d}")
        db.parent.mkdir(parents=True)
        dbs.append(shutil.copyfile(dbs[0], db) and db if dbs else write_store(db))
    # The daemon, its forkserver and its workers inherit the limit from the command.
    out = subprocess.run([KINT, "supervisor", "start"], env=sb.env, text=True,
                         capture_output=True, timeout=90, stdin=subprocess.DEVNULL,
                         preexec_fn=_low_limit)
    assert out.returncode == 0, out.stderr
    yield sb, dbs
    sb.shutdown()


def _attach(sb, db, session):
    return sb.call("attach", db, timeout_s=10, args={"session": session, "watcher": False})


def _status_json(sb):
    out = sb.kint("supervisor", "status", "--json")
    return out.returncode, json.loads(out.stdout)


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
    assert "ulimit -n" in err.hint and "KINT_WORKER_IDLE_SECONDS" in err.hint, err.hint

    # Not a crash: no quarantine, no restart counted; the supervisor says why, and exits 1.
    code, status = _status_json(sb)
    assert code == 1, status
    row = next(r for r in status["spaces"] if r["store"] == str(db))
    assert row["state"] == "idle" and row["restarts"] == 0 and row["pid"] is None, row
    assert f"limit of {LIMIT}" in row["no_room"], row
    files = status["supervisor"]["open_files"]
    assert files["limit"] == LIMIT and files["open"] + files["reserve"] <= LIMIT, files
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
