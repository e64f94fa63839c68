"""A worker that begins short of open files (the limit it inherits from its forkserver)
is refused `BUSY` with the limit's hint, as docs/faults.md says of a worker that runs out
of open files, never counted as a crash: libzmq aborted it (SIGABRT) or SQLite could not
open the store, and after six tries the space was quarantined, `QUARANTINED` naming the
store as what could not be opened.

Real parts: the machine's real supervisor, its forkserver and workers, real Sibyl stores.
The forkserver's soft limit is lowered with prlimit (as a low `ulimit -n` would leave it)
to a few descriptors over what it holds, so the worker it forks for a second space begins
with that few free; the limit put back, the same space is served.
"""

from __future__ import annotations

import os
import resource
import time

import pytest

from conftest import write_store
from kint.client import KintError


def _forkserver(supervisor: int) -> int:
    with open(f"/proc/{supervisor}/task/{supervisor}/children") as fh:
        children = [int(pid) for pid in fh.read().split()]
    for pid in children:
        with open(f"/proc/{pid}/comm") as fh:
            if fh.read().strip() == "kint-forkserver":
                return pid
    raise AssertionError(f"no forkserver among {children}")


@pytest.mark.parametrize("free", [4, 8])  # libzmq's abort; SQLite's open of the store
def test_a_worker_begun_short_of_open_files_is_busy_not_quarantined(sandbox, free):
    dbs = [sandbox.home / f"s{n}" / "memory.db" for n in range(2)]
    for db in dbs:
        db.parent.mkdir(parents=True)
        write_store(db)
    supervisor = sandbox.start()
    sandbox.call("status", dbs[0])  # the forkserver is up
    forkserver = _forkserver(supervisor)
    held = len(os.listdir(f"/proc/{forkserver}/fd"))
    before = resource.prlimit(forkserver, resource.RLIMIT_NOFILE)
    resource.prlimit(forkserver, resource.RLIMIT_NOFILE, (held + free, before[1]))
    try:
        for _ in range(8):  # more than the restarts a quarantine takes
            with pytest.raises(KintError) as err:
                sandbox.call("status", dbs[1], timeout_s=20)
            assert err.value.code == "BUSY", (err.value.code, err.value.message)
            assert "ran out of open files" in err.value.message, err.value.message
            assert "ulimit -n" in err.value.hint, err.value.hint
    finally:
        resource.prlimit(forkserver, resource.RLIMIT_NOFILE, before)
    assert sandbox.call("status", dbs[1])["store"]["exists"]
    log = (sandbox.kint_home / "supervisor.log").read_text()
    assert "quarantined" not in log, log[-3000:]


def test_a_start_short_of_open_files_stays_in_status_until_the_next_start(sandbox):
    """The refusal stands in `kint supervisor status` (degraded, its own state and hint)
    until a worker is spawned again: the sweep that drops a worker-lock refusal once the
    lock is free dropped this one within a sweep too (~0.16 s), though no lock was ever
    held, saying in supervisor.log that "the worker lock is free again"."""
    dbs = [sandbox.home / f"s{n}" / "memory.db" for n in range(2)]
    for db in dbs:
        db.parent.mkdir(parents=True)
        write_store(db)
    supervisor = sandbox.start()
    sandbox.call("status", dbs[0])
    forkserver = _forkserver(supervisor)
    held = len(os.listdir(f"/proc/{forkserver}/fd"))
    before = resource.prlimit(forkserver, resource.RLIMIT_NOFILE)
    resource.prlimit(forkserver, resource.RLIMIT_NOFILE, (held + 4, before[1]))
    try:
        with pytest.raises(KintError) as err:
            sandbox.call("status", dbs[1], timeout_s=20)
        assert err.value.code == "BUSY", (err.value.code, err.value.message)
    finally:
        resource.prlimit(forkserver, resource.RLIMIT_NOFILE, before)
    time.sleep(1.0)  # four sweeps (every 0.25 s)
    out = sandbox.kint("supervisor", "status")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "idle (no open files)" in out.stdout, out.stdout
    assert "ulimit -n" in out.stdout, out.stdout
    row = sandbox.row(dbs[1])
    assert row["start_refused"]["code"] == "BUSY", row
    log = (sandbox.kint_home / "supervisor.log").read_text()
    assert "worker lock is free again" not in log, log[-3000:]
    assert sandbox.call("status", dbs[1])["store"]["exists"]  # the next start serves
    assert sandbox.row(dbs[1])["start_refused"] is None
