"""The suite's processes take Ctrl-C however the suite was started (tests/support/ctrl_c.py).
Started as a background job of a shell without job control, the suite ran with SIGINT
ignored, and so did every process it started: test_many_clients' `kint supervisor status
--watch` ran on past its SIGINT and its test failed at the 30 s bound (seen in this
session's stress runs, started with `&`), as would the other tests that send SIGINT. And
SIGHUP, which `nohup` leaves ignored: test_pid_lock_stopped's SIGHUP cases each waited out
their bound (seen under nohup, session 38)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

SUPPORT = Path(__file__).parent / "support"
# A process started with SIGINT ignored (as the suite then is), which starts one more and
# prints whether that one takes SIGINT as Ctrl-C (Python's KeyboardInterrupt).
_CHILD = """
import subprocess, sys
sys.path.insert(0, {tests!r})
if {mended}:
    from support.ctrl_c import let_ctrl_c_through
    let_ctrl_c_through()
print(subprocess.run([sys.executable, "-c", "import signal; "
                      "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, "
                      "signal.getsignal(signal.SIGHUP) is signal.SIG_DFL)"],
                     capture_output=True, text=True, check=True).stdout.strip())
"""


def _ignore_ctrl_c_and_hang_up() -> None:
    """As a shell without job control (SIGINT) and nohup (SIGHUP) start the suite."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _started_with_sigint_ignored(mended: bool) -> str:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.format(tests=str(SUPPORT.parent), mended=mended)],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        preexec_fn=_ignore_ctrl_c_and_hang_up)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_process_the_suite_starts_takes_ctrl_c_though_the_suite_was_started_ignoring_it():
    assert _started_with_sigint_ignored(mended=False) == "False False"  # what the suite met
    assert _started_with_sigint_ignored(mended=True) == "True True"


def test_this_suite_does_not_ignore_ctrl_c():
    """conftest.py let it through at its import."""
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    assert signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN
