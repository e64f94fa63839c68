"""kint upgraded under a running supervisor: it finishes what is in flight, stops its
workers, exits with EXIT_UPGRADED (which systemd's Restart=on-failure and launchd's
KeepAlive/SuccessfulExit=false restart), and the next call starts the new version.

The "upgrade" is what an install does to a watched file: it is written anew. The test
moves one watched file's mtime forward (its content is untouched) and puts it back before
the next supervisor starts. A real supervisor, in the foreground as a service manager runs
it, with a real worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import kint
from conftest import SUPPORT, write_store
from kint.supervisor.pidlock import running_pid
from kint.supervisor.code_watch import EXIT_UPGRADED, code_signature


def test_an_upgrade_on_disk_stops_the_supervisor_for_a_restart(sandbox):
    write_store(sandbox.sibyl_db)
    sandbox.kint_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    # `kint supervisor start --foreground` through the suite's launcher (the same command),
    # looking at kint's files every second (KINT_TEST_HOUSEKEEPING_S) instead of every 5 s.
    proc = subprocess.Popen([sys.executable, str(SUPPORT / "run_kint.py"), "supervisor",
                             "start", "--foreground"],
                            env={**sandbox.env, "KINT_TEST_HOUSEKEEPING_S": "1"},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    target = Path(kint.__file__).parent / "protocol" / "envelope.py"
    st = target.stat()
    try:
        sandbox.wait_for(lambda: sandbox.client().ping(0.5), what="the foreground supervisor")
        old = sandbox.call("status", sandbox.sibyl_db)["worker"]["pid"]
        before = code_signature()
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        assert code_signature() != before
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
