"""A supervisor never breaks another one, and a CLI never spins on a lost or dead one
(issue 14, item 2).

- An old supervisor that stops after a new one took over KINT_HOME leaves the new one's
  sockets alone: it unlinks only what it still owns.
- Sockets removed under a running supervisor (a temp-folder reaper, a clean-up script) come
  back: the supervisor binds them again, and the CLI that found none waits for that instead
  of spinning; facing a supervisor that cannot answer (stopped), it says so within seconds.
- A client waiting on a supervisor that dies mid-request is told so within seconds, not at
  the end of the request's deadline.
- KINT_HOME removed under a running supervisor: told to stop, it stops, and its workers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from conftest import SUPPORT, pid_alive, write_store
from kint.client import KintError
from kint.supervisor.pidlock import running_pid


def _sockets(sb):
    return [sb.kint_home / "run" / name for name in ("kint.sock", "workers.sock")]


def test_an_old_supervisor_stopping_after_a_new_one_took_over_leaves_it_serving(sandbox):
    write_store(sandbox.sibyl_db)
    old = sandbox.start()
    sandbox.call("status", sandbox.sibyl_db)
    # The old supervisor's claim on KINT_HOME is lost (run/ cleaned under it): the next
    # start takes over the home and binds the same socket paths.
    (sandbox.kint_home / "run" / "supervisor.pid").unlink()
    out = sandbox.kint("supervisor", "start")
    assert out.returncode == 0, out.stdout + out.stderr
    new = running_pid(sandbox.kint_home)
    assert new and new > 0 and new != old

    # The old one stops (by itself once it sees its claim gone, or when told to).
    try:
        os.kill(old, signal.SIGTERM)
    except ProcessLookupError:
        pass
    sandbox.wait_for(lambda: not pid_alive(old), what="the old supervisor exiting")

    assert all(path.exists() for path in _sockets(sandbox)), "the old supervisor unlinked them"
    status = sandbox.kint("--db", str(sandbox.sibyl_db), "status", "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    assert json.loads(status.stdout)["rows"]["entity"] == 1
    assert sandbox.call("sup.ping")["pid"] == new


# How long the CLI waits on a supervisor that does not answer, here (10 s for a user):
# through the test launcher's knob (tests/support/kint_test_timings.py).
UNREACHABLE_AFTER_S = 2


def _kint_measured(sb, *args: str) -> tuple[int, str, float, float]:
    """Run the CLI (the test launcher, waiting UNREACHABLE_AFTER_S on a silent supervisor);
    return its exit code, stderr, CPU seconds and elapsed seconds."""
    env = {**sb.env, "KINT_TEST_UNREACHABLE_AFTER_S": str(UNREACHABLE_AFTER_S)}
    with tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, str(SUPPORT / "run_kint.py"), *args],
                                env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.monotonic() - started
        err.seek(0)
        return (proc.returncode, err.read().decode(), usage.ru_utime + usage.ru_stime,
                elapsed)


def test_sockets_removed_under_a_running_supervisor_are_bound_again(sandbox):
    db = sandbox.sibyl_db
    write_store(db)
    sup = sandbox.start()
    first = sandbox.call("status", db)["worker"]["pid"]

    # Stopped, the supervisor cannot bind them again: the CLI says so, naming it, within
    # seconds, and sleeps while it waits (a spin would burn the whole wait in CPU).
    os.kill(sup, signal.SIGSTOP)
    try:
        for path in _sockets(sandbox):
            path.unlink()
        code, err, cpu, elapsed = _kint_measured(sandbox, "--db", str(db), "status")
    finally:
        os.kill(sup, signal.SIGCONT)
    assert code == 2, err
    assert f"pid {sup}" in err and "it is stopped" in err and "Traceback" not in err, err
    # A ratio, not a speed: the CLI waits UNREACHABLE_AFTER_S on a few tenths of CPU (its
    # start, then sleeps between looks); a spin would use about as much CPU as it waits. A
    # loaded box only stretches the wait, so it cannot push a sleeping CLI over half.
    assert elapsed >= UNREACHABLE_AFTER_S, f"the CLI gave up after {elapsed:.1f}s"
    assert cpu < elapsed / 2, f"the CLI used {cpu:.1f}s of CPU in {elapsed:.1f}s"

    # Running again, it binds them again, and the CLI that found none is answered.
    out = sandbox.kint("--db", str(db), "status", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    assert running_pid(sandbox.kint_home) == sup  # the same supervisor
    # Its worker may have been replaced while the supervisor rebound workers.sock (the old
    # connection went with the old socket); either way a worker serves the space.
    now = json.loads(out.stdout)["worker"]["pid"]
    assert first is not None and now is not None

    # A worker started after the repair finds the supervisor on the new workers.sock.
    os.kill(now, signal.SIGKILL)
    row = sandbox.wait_for(lambda: (r := sandbox.row(db))["pid"] not in (now, None)
                           and r["state"] == "ready" and r, what="the worker restarted")
    assert sandbox.call("status", db)["worker"]["pid"] == row["pid"]


def test_a_client_waiting_on_a_supervisor_that_dies_is_told_so_at_once(sandbox):
    db = sandbox.sibyl_db
    write_store(db)
    sup = sandbox.start()
    worker = sandbox.call("status", db)["worker"]["pid"]
    os.kill(worker, signal.SIGSTOP)  # the request will sit in the worker
    box: dict = {}

    def wait() -> None:
        try:
            sandbox.call("push", db, timeout_s=600)
        except KintError as err:
            box["error"] = err

    waiter = threading.Thread(target=wait, daemon=True)
    try:
        waiter.start()
        sandbox.wait_for(lambda: sandbox.row(db)["waiting"] == 1, what="the push in flight")
        os.kill(sup, signal.SIGKILL)
        waiter.join(60)  # far inside the 600 s deadline
        assert not waiter.is_alive(), "the client kept waiting on a dead supervisor"
    finally:
        try:
            os.kill(worker, signal.SIGKILL)
        except ProcessLookupError:
            pass
    err = box["error"]
    assert err.code == "SUPERVISOR_UNAVAILABLE", (err.code, err.message)
    assert f"pid {sup}" in err.message and "push" in err.message
    assert err.hint


def test_a_supervisor_whose_home_was_removed_stops_with_its_workers(sandbox):
    """KINT_HOME removed (a clean-up script, a reaped temporary folder), then SIGTERM: the
    supervisor and its worker exit. Their log went with the folder: the stop's first log
    line raised, the loop ended with the worker never told to stop, and the supervisor
    then waited on it forever at exit (seen once in session 11)."""
    db = sandbox.sibyl_db
    write_store(db)
    sup = sandbox.start()
    worker = sandbox.call("status", db)["worker"]["pid"]
    try:
        shutil.rmtree(sandbox.kint_home)
        os.kill(sup, signal.SIGTERM)
        sandbox.wait_for(lambda: not pid_alive(sup) and not pid_alive(worker),
                         what="the supervisor and its worker exiting")
    finally:
        for pid in (sup, worker):
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
    out = sandbox.kint("supervisor", "stop")
    assert out.returncode == 0, out.stdout + out.stderr
    home = sandbox.kint_home
    assert out.stdout == f"no supervisor is running for {home} ({home} does not exist)\n"
