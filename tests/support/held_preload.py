"""A preload module that holds the worker forkserver's import until the test lets it go:
its import waits for the file named by KINT_TEST_PRELOAD_HOLD to exist (at most a minute,
so a test that fails never leaves a forkserver waiting), having first written the
forkserver's pid to `<hold>.forkserver`. With it a test sees what a supervisor does while
its forkserver is still importing, for as long as it needs to look. With
KINT_TEST_PRELOAD_HOLD_KEEPS_ON set, the forkserver ignores SIGTERM from there on: the
SIGTERM a stopping supervisor sends a forkserver still importing misses it, as it does one
that had just ended its preload (kint/supervisor/spawner.py). Used by
tests/test_forkserver_warm_up.py only."""

import os
import signal
import time

_hold = os.environ.get("KINT_TEST_PRELOAD_HOLD")
if _hold and os.environ.get("KINT_TEST_PRELOAD_HOLD_KEEPS_ON"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if _hold:
    with open(f"{_hold}.forkserver.tmp", "w") as fh:
        fh.write(str(os.getpid()))
    os.replace(f"{_hold}.forkserver.tmp", f"{_hold}.forkserver")
_deadline = time.monotonic() + 60
while _hold and not os.path.exists(_hold) and time.monotonic() < _deadline:
    time.sleep(0.05)
