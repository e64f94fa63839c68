"""What session 22's dogfood lane found, beside the restore's edges (test_mcp_restore.py).

- A worker checks on its supervisor by pid at every beat; a supervisor killed under a
  parent that never reaps it stays a zombie, which `os.kill(pid, 0)` still finds, so the
  worker went on serving (a restore it was running included) with no supervisor to answer
  for it. kint.envsettings.pid_alive now counts a zombie as gone.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kint.envsettings import pid_alive


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_zombie_is_not_alive():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        # Exited and not reaped: poll() is not called, and waitid with WNOWAIT leaves it.
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        assert os.path.exists(f"/proc/{child.pid}")  # still in the table, as a zombie
        assert pid_alive(child.pid) is False
    finally:
        child.wait()
    assert pid_alive(child.pid) is False
    assert pid_alive(os.getpid()) is True
