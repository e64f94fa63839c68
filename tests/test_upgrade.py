"""kint upgraded under a running supervisor: it finishes what is in flight, stops its
workers, exits with EXIT_UPGRADED (which systemd's Restart=on-failure and launchd's
KeepAlive/SuccessfulExit=false restart), and the next call starts the new version.

The "upgrade" is what an install (or an edit of an editable install) does to a file of the
package: it is written anew. The machine runs a copy of kint (conftest.kint_copy), and the
test moves one file's mtime forward in it (its content is untouched) and puts it back before
the next supervisor starts, the checkout and the tests beside it untouched: the package's root
module, and an op's module deep in it that only a worker imports, on its first request (before, only
four files were watched, and an edit of any other left the supervisor spawning workers against mixed
code). A real supervisor, in the foreground as a service manager runs it, with a real worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import SUPPORT, kint_copy, write_store
from kint.supervisor.pidlock import running_pid
from kint.supervisor.code_watch import EXIT_UPGRADED, code_signature
from support.stop_read import stop_read


@pytest.mark.parametrize("changed", ["protocol/envelope.py", "tenant_worker/history.py"])
def test_an_upgrade_on_disk_stops_the_supervisor_for_a_restart(sandbox, changed):
    copy = kint_copy(sandbox.root / "code")
    sandbox.env["PYTHONPATH"] = str(copy.parent)
    write_store(sandbox.sibyl_db)
    sandbox.kint_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    # `kint supervisor start --foreground` through the suite's launcher (the same command),
    # looking at kint's files every second (KINT_TEST_HOUSEKEEPING_S) instead of every 5 s.
    proc = subprocess.Popen([sys.executable, str(SUPPORT / "run_kint.py"), "supervisor",
                             "start", "--foreground"],
                            env={**sandbox.env, "KINT_TEST_HOUSEKEEPING_S": "1"},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    target = copy / changed
    st = target.stat()
    try:
        sandbox.wait_for(lambda: sandbox.client().ping(0.5), what="the foreground supervisor")
        # The forkserver's imports (of the copy of kint), which a loaded box took past a
        # first request's 8 s (session 38), are waited out first: not what the test bounds.
        sandbox.warm_up()
        old = sandbox.call("status", sandbox.sibyl_db)["worker"]["pid"]
        before = code_signature(copy)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        assert code_signature(copy) != before
        try:
            code = proc.wait(timeout=30)
        finally:
            os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert code == EXIT_UPGRADED, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))

    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{old}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{old}"), "the old worker outlived its supervisor"
    log = (sandbox.kint_home / "supervisor.log").read_text()
    assert "kint's installed files changed (an upgrade)" in log
    assert "(commanded: upgrade)" in log and "crash" not in log.lower()
    assert running_pid(sandbox.kint_home) is None

    # The next call (the CLI starts a supervisor on demand) answers from a new worker.
    out = sandbox.kint("status", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["worker"]["pid"] != old
    assert running_pid(sandbox.kint_home) not in (None, proc.pid)


def test_the_signature_is_every_file_of_the_package_and_none_python_or_an_editor_writes(
        tmp_path):
    """Any file of the package, at any depth, added, removed or rewritten, changes it;
    Python's bytecode caches and an editor's hidden or backup files do not."""
    root = tmp_path / "kint"
    (root / "tenant_worker").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    deep = root / "tenant_worker" / "history.py"
    deep.write_text("x = 1\n")
    first = code_signature(root)
    assert [entry[0] for entry in first] == ["__init__.py", "tenant_worker/history.py"]

    (root / "tenant_worker" / "__pycache__").mkdir()
    (root / "tenant_worker" / "__pycache__" / "history.cpython-311.pyc").write_bytes(b"\0")
    (root / "tenant_worker" / ".history.py.swp").write_bytes(b"\0")
    (root / "tenant_worker" / "history.py~").write_text("x = 0\n")
    assert code_signature(root) == first

    st = deep.stat()
    os.utime(deep, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert code_signature(root) != first
    os.utime(deep, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert code_signature(root) == first
    (root / "tenant_worker" / "added.py").write_text("")
    assert code_signature(root) != first


@pytest.mark.parametrize("stepped_down", [False, True], ids=["stop", "stepped-down"])
def test_a_sigterm_during_an_upgrades_drain_answers_the_request_in_flight(sandbox,
                                                                          stepped_down):
    """kint was upgraded while a request ran (an agent's attach, held on the worker's pool:
    KINT_TEST_HOLD_ATTACH), so the supervisor waits for it before it stops for the
    upgrade; a SIGTERM meanwhile (systemd's stop, a user's kill) stops it at once, for a
    stop. The request still gets its worker's real reply, not WORKER_DOWN: the worker
    finishes it within its stop grace and the supervisor passes the answer on before it
    exits. Nothing is handed to a next supervisor, and the exit is a stop's (0).
    `stepped-down`: its pid file removed during the drain, it steps down first (a stop,
    nothing handed on), and the SIGTERM comes during that stop, while its worker still
    holds the attach: the exit is the step-down's 75, as without the upgrade (it exited 0:
    EXIT_STEPPED_DOWN and EXIT_UPGRADED are one value, and the step-down was told from the
    upgrade by it). Its client, whose pid file is gone, still gets the reply (it gave up
    on a supervisor it said had exited, lane client33)."""
    from support.attach_in_flight import attach_in_flight
    from kint.paths import run_dir
    from kint.supervisor.housekeeping import EXIT_STEPPED_DOWN
    from kint.supervisor.pidlock import PID_FILE
    from kint.supervisor.succession import succession_path

    sb = sandbox
    copy = kint_copy(sb.root / "code")
    hold = sb.root / "hold-attach"
    # The test launcher (its faults preloaded into the worker forkserver) over the copy.
    sb.env.update(PYTHONPATH=os.pathsep.join([str(SUPPORT), str(copy.parent)]),
                  KINT_TEST_HOLD_ATTACH=str(hold), KINT_TEST_HOUSEKEEPING_S="0.25",
                  KINT_WORKER_HEARTBEAT_TIMEOUT="60")
    write_store(sb.sibyl_db)
    sb.kint_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, str(SUPPORT / "run_supervisor.py"), "--home",
                             str(sb.kint_home)], env=sb.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    target = copy / "protocol" / "envelope.py"
    st = target.stat()
    log = sb.kint_home / "supervisor.log"
    outcome: dict = {}
    try:
        sb.wait_for(lambda: sb.client().ping(0.5), what="the test supervisor")
        sb.call("status", sb.sibyl_db, timeout_s=60)
        hold.touch()
        caller = attach_in_flight(sb, outcome, timeout_s=90)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        sb.wait_for(lambda: "kint's installed files changed (an upgrade)"
                    in log.read_text(errors="replace"), what="the upgrade seen")
        assert "nothing in flight" not in log.read_text(errors="replace")  # it waits
        if stepped_down:
            (run_dir(sb.kint_home) / PID_FILE).unlink()
            sb.wait_for(lambda: "stepping down" in log.read_text(errors="replace"),
                        what="the supervisor stepping down")
        else:
            proc.send_signal(signal.SIGTERM)
        sb.wait_for(lambda: stop_read(log.read_text(errors="replace")),
                    what="the stop read by the worker")
        if stepped_down:  # its worker still holds the attach: the process has not exited
            proc.send_signal(signal.SIGTERM)
        hold.unlink()  # the attach ends, and the worker exits
        caller.join(60)
        code = proc.wait(timeout=60)
    finally:
        if hold.exists():
            hold.unlink()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    said = log.read_text(errors="replace")
    # The pid file removed, the client waits on the stepped-down supervisor while it is
    # there, and gets its reply (kint.client_liveness: _check_serving, _reached, began_by).
    # The step-down's drain is often shorter than the client's look a second, so this
    # checks that the reply arrives; tests/test_client_pid_file_gone.py proves the wait.
    assert "error" not in outcome, (outcome["error"], said[-3000:])
    assert outcome["reply"]["sessions"] == 1, outcome
    assert "WORKER_DOWN" not in said, said[-3000:]
    assert "(commanded: stop)" in said and "(commanded: upgrade)" not in said, said[-3000:]
    assert not succession_path(sb.kint_home).exists()
    assert code == (EXIT_STEPPED_DOWN if stepped_down else 0), (code, said[-3000:])
