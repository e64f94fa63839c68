"""The head lock (16-limits.md, "Two machines writing at once"): one file lock per space,
`head-<space16>.lock` under KINT_HOME, so two kint processes on one machine do not push or
pull at once; the second waits up to 30 seconds, then stops with v0.3.0's words. The other
holder here is a real second process.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from kint.paths import space_files
from kint.tenant_worker.head_lock import MESSAGE, WAIT_S, HeadLockBusy, head_lock

SPACE16 = "fd83319f25a64bb2"
HOLDER = ("import fcntl, os, sys\n"
          "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
          "fcntl.flock(fd, fcntl.LOCK_EX)\n"
          "print('held', flush=True)\n"
          "sys.stdin.read()\n")


def test_a_second_process_waits_for_the_head_lock_then_stops_by_name(tmp_path):
    assert WAIT_S == 30.0
    assert MESSAGE == "another kint process holds the head lock for this space"
    home = tmp_path / "kint"
    path = space_files(home, SPACE16)["head_lock"]
    assert path == home / f"head-{SPACE16}.lock"
    with head_lock(path):
        assert path.is_file() and (path.stat().st_mode & 0o777) == 0o600
        assert (home.stat().st_mode & 0o777) == 0o700
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        started = time.monotonic()
        with pytest.raises(HeadLockBusy, match=f"^{MESSAGE}$"):
            with head_lock(path, wait_s=0.6):
                pytest.fail("took the head lock another process holds")
        assert time.monotonic() - started >= 0.6
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    with head_lock(path, wait_s=5):  # released with its holder
        pass
