"""kint upgraded under a running supervisor: it finishes what is in flight, stops its
workers, exits with EXIT_UPGRADED (which systemd's Restart=on-failure and launchd's
KeepAlive/SuccessfulExit=false restart), and the next call starts the new version.

The "upgrade" is what an install (or an edit of an editable install) does to a file of the
package: it is written anew. The machine runs a copy of kint (conftest.kint_copy), and the
test moves one file's mtime forward in it (its content is untouched) and puts it back before
the next supervisor starts, the checkout and the tests beside it untouched: the package's root module,
and an op's module deep in it that only a worker imports, on its first request (before,
only four files were watched, and an edit of any other left the supervisor spawning
workers against mixed code). A real supervisor, in the foreground as a service manager
runs it, with a real worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import SUPPORT, kint_copy, write_store
from kint.supervisor.pidlock import running_pid
from kint.supervisor.code_watch import EXIT_UPGRADED, code_signature


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
