"""Who else holds a store open, the check `pull --discard-local` makes before it moves the
store: a real child process holding a real SQLite store, seen through /proc (Linux) and
through lsof (what macOS uses), each asked directly."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from kint.tenant_worker import store_holders

HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.execute("pragma journal_mode=wal")
conn.execute("create table if not exists t (x)")
conn.execute("insert into t values (1)")
conn.commit()
print("holding", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def held_store(tmp_path):
    db = tmp_path / "memory.db"
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "holding"
    yield str(db), child.pid
    child.stdin.close()
    child.wait(timeout=10)


def test_a_process_holding_the_store_is_named_and_this_one_is_not(held_store):
    db, pid = held_store
    mine = sqlite3.connect(db)  # this process holds it too: never counted
    try:
        assert store_holders.other_holders(db) == [pid]
        assert store_holders.describe([pid]).startswith(f"{pid} (python")
    finally:
        mine.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc (Linux)")
def test_same_parent_picks_the_siblings():
    """In a worker, a holder forked by the same forkserver is kint's worker for another space
    on the store. Here: a child asks about its sibling (also this process's child), about
    its parent (this process) and about a child of its own; only the sibling is one."""
    sibling = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                               stdin=subprocess.PIPE)
    try:
        asks = ("import subprocess, sys\n"
                "from kint.tenant_worker.store_holders import same_parent\n"
                "own = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'],"
                " stdin=subprocess.PIPE)\n"
                f"print(same_parent([{sibling.pid}, {os.getpid()}, own.pid]), flush=True)\n"
                "own.stdin.close(); own.wait()\n")
        out = subprocess.run([sys.executable, "-c", asks], capture_output=True, text=True,
                             timeout=60)
        assert out.stdout.strip() == f"[{sibling.pid}]", out.stdout + out.stderr
    finally:
        sibling.stdin.close()
        sibling.wait(timeout=10)


def test_lsof_sees_the_same_holder(held_store):
    if shutil.which("lsof") is None:
        pytest.skip("lsof is not installed here (macOS ships it)")
    db, pid = held_store
    targets = {os.path.realpath(db + s) for s in ("", "-wal", "-shm")}
    assert store_holders._from_lsof(targets) == [pid]


def test_nobody_holds_a_closed_store(tmp_path):
    db = tmp_path / "memory.db"
    with sqlite3.connect(db) as conn:
        conn.execute("create table t (x)")
    conn.close()
    assert store_holders.other_holders(str(db)) == []
    if shutil.which("lsof"):
        assert store_holders._from_lsof({str(db)}) == []
