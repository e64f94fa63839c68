"""A machine of several Sibyl stores whose supervisor starts under a low open-file limit
(`ulimit -n`), for the tests of the room for workers (kint/supervisor/room.py):
tests/test_open_files.py, tests/test_room_turn.py and tests/test_room_settling.py; and
for tests/test_many_clients.py, of the clients it takes (kint/supervisor/front_door.py)."""

from __future__ import annotations

import resource
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

from conftest import KINT, Sandbox, write_store
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


def start_limited(sb: Sandbox, limit: int) -> None:
    """`kint supervisor start` under RLIMIT_NOFILE `limit`, soft and hard, as `ulimit -n`
    sets them: the daemon, its forkserver and its workers inherit it from the command."""
    out = subprocess.run(
        [KINT, "supervisor", "start"], env=sb.env, text=True, capture_output=True,
        timeout=90, stdin=subprocess.DEVNULL,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)))
    assert out.returncode == 0, out.stderr


def fill_with_sessions(sb: Sandbox, dbs: list[Path], spare: int) -> list[Path]:
    """Agent sessions attached to one store after another until the supervisor has no
    room for another worker; the stores served, each with session `agent-<n>` (n its
    place in `dbs`). Each client connected costs the supervisor a descriptor: `spare`
    are held meanwhile, as many as the test's later requests hold at once, so that the
    room a stop makes later is surely theirs."""
    spare_clients = [sb.client() for _ in range(spare)]
    try:
        assert all(c.ping(2.0) for c in spare_clients)
        served = []
        for n, db in enumerate(dbs):
            try:
                sb.call("attach", db, args={"session": f"agent-{n}", "watcher": False})
            except KintError as err:
                assert err.code == "BUSY", err
                break
            served.append(db)
    finally:
        for c in spare_clients:
            c.close()
    assert 2 <= len(served) <= len(dbs) - 2, served
    return served


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
