"""A machine of several Sibyl stores whose supervisor starts under a low open-file limit
(`ulimit -n`), for the tests of the room for workers (kint/supervisor/room.py):
tests/test_open_files.py, tests/test_room_turn.py and tests/test_room_settling.py; and
for tests/test_many_clients.py, of the clients it takes (kint/supervisor/front_door.py)."""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from conftest import KINT, SUPPORT, Sandbox, support_first, write_store
from kint.client import KintError


def profile_stores(sb: Sandbox, numbers: list[int]) -> list[Path]:
    """The stores of Hermes profiles p<n>, in the order of `numbers`: one written by
    Sibyl's client, copied for the others (a second each)."""
    dbs: list[Path] = []
    for n in numbers:
        db = sb.profile_db(f"p{n}")
        db.parent.mkdir(parents=True)
        dbs.append(shutil.copyfile(dbs[0], db) and db if dbs else write_store(db))
    return dbs


def start_limited(sb: Sandbox, limit: int, warm: bool = True, timed: bool = False) -> None:
    """`kint supervisor start` under RLIMIT_NOFILE `limit`, soft and hard, as `ulimit -n`
    sets them: the daemon, its forkserver and its workers inherit it from the command.
    With `warm`, returns once the worker forkserver is ready too (Sandbox.warm_up), not at
    the first request for a space as Sandbox.start does: the tests here count on the
    margin of a supervisor that warmed up (while the warm-up runs, the front door holds
    back room for the descriptors it may yet open), and nearly all start workers. With
    `timed`, the test supervisor (support/run_supervisor.py) under that limit instead, so
    that the KINT_TEST_* timings in `sb.env` reach it (support/kint_test_timings.py)."""
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    if timed:
        sb.env["PYTHONPATH"] = support_first(sb.env.get("PYTHONPATH", ""))
        sb.kint_home.mkdir(mode=0o700, exist_ok=True)
        with open(sb.root / "test-supervisor.err", "ab") as log:
            subprocess.Popen([sys.executable, str(SUPPORT / "run_supervisor.py"), "--home",
                              str(sb.kint_home)], env=sb.env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
                             preexec_fn=limited)
        sb.wait_for(lambda: sb.client().ping(0.5), interval=0.02, what="the test supervisor")
    else:
        out = subprocess.run([KINT, "supervisor", "start"], env=sb.env, text=True,
                             capture_output=True, timeout=90, stdin=subprocess.DEVNULL,
                             preexec_fn=limited)
        assert out.returncode == 0, out.stderr
    if warm:
        sb.warm_up()


def fill_with_sessions(sb: Sandbox, dbs: list[Path], spare: int) -> list[Path]:
    """Agent sessions attached to one store after another until the supervisor has no
    room for another worker; the stores served, each with session `agent-<n>` (n its
    place in `dbs`). Each client connected costs the supervisor a descriptor: `spare`
    are held meanwhile (`held_connections`), as many as the test's later requests hold at
    once, and the attaches go over one more, so that the room a stop makes later is
    surely theirs. A connection a call closes behind it on a loaded box for a while
    (ZeroMQ's own threads close it), and the next one's would be counted beside it. Each
    attach starts its worker (the first, the forkserver's imports too), which no test
    here bounds: a loaded box took one past a 10 s bound (session 38), so it has 60 s;
    the last is refused BUSY once no worker can be spared, well within it."""
    with held_connections(sb, spare), sb.client() as client:
        served = []
        for n, db in enumerate(dbs):
            try:
                client.call("attach", tenant=sb.tenant, db=str(db), space=sb.label(db),
                            timeout_s=60, args={"session": f"agent-{n}", "watcher": False})
            except KintError as err:
                assert err.code == "BUSY", err
                break
            served.append(db)
    assert 2 <= len(served) <= len(dbs) - 2, served
    return served


@contextmanager
def held_connections(sb: Sandbox, count: int) -> Iterator[None]:
    """`count` clients that each hold a connection to the supervisor for the block (a
    descriptor of its each): each by a call answered on its kept socket. A ping goes on a
    socket of its own, closed once answered: clients that had only pinged held none, or,
    closing in ZeroMQ's background threads, some for a while on a loaded box, so the room
    a fill found differed with the load. The door still counts them at the block's end."""
    clients = [sb.client() for _ in range(count)]
    try:
        for client in clients:
            client.call("sup.ping", timeout_s=10)
        yield
        if clients:
            front = clients[0].call("sup.status", timeout_s=10)["supervisor"]["front"]
            assert front["clients"] >= count, (front, count)
    finally:
        for client in clients:
            client.close()


def idle_after_detach(sb: Sandbox, db: Path, session: str) -> int:
    """`session` detached from the worker of `db`, and that worker's pid once a beat it
    made after that is read: from then it may be stopped for room (or as idle)."""
    sb.call("detach", db, args={"session": session})
    detached = time.monotonic()

    def idle() -> dict | bool:
        asked = time.monotonic()
        row = sb.row(db)
        age = row["last_beat_age_s"]
        return row["sessions"] == 0 and age is not None and age < asked - detached and row

    return sb.wait_for(idle, timeout=20, what="a beat after the session ended")["pid"]


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, dict]:
    """Run `call` on a thread of its own; what it returned (`answer`) or raised as a
    KintError (`error`) lands in the dict."""
    said: dict = {}

    def run() -> None:
        try:
            said["answer"] = call()
        except KintError as err:
            said["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, said
