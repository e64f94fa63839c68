"""The supervisor daemon's entry (`python -m kint.supervisor`) takes the start-up step the
`kint` console script takes (kint.startup, lane left18): its imports load with the cyclic
collector paused and are then frozen, and the collector is on again for the daemon's run.
It froze nothing before, though it keeps what its imports made for days.

The daemon is run as `-m` runs it (runpy), in a child process, with its loop replaced by a
function that reports the collector's state and returns, so no supervisor starts.
"""

from __future__ import annotations

import json
import subprocess
import sys

_AS_THE_DAEMON = """
import gc, json, runpy, sys
import kint.supervisor.autostart as autostart

def report(home, *, daemon):
    print(json.dumps({"enabled": gc.isenabled(), "frozen": gc.get_freeze_count(),
                      "home": str(home), "daemon": daemon}))
    return 0

autostart.run_foreground = report
sys.argv = ["kint.supervisor", "--home", sys.argv[1]]
runpy.run_module("kint.supervisor", run_name="__main__", alter_sys=True)
"""


def test_the_daemon_entry_freezes_what_its_imports_made(tmp_path):
    out = subprocess.run([sys.executable, "-c", _AS_THE_DAEMON, str(tmp_path)], text=True,
                         capture_output=True, timeout=90)
    assert out.returncode == 0, out.stderr
    after = json.loads(out.stdout.splitlines()[-1])
    assert after["home"] == str(tmp_path) and after["daemon"] is True, after
    assert after["enabled"] and after["frozen"] > 1000, after
