"""`kint supervisor start` beside a supervisor that holds KINT_HOME and does not answer
(stopped or stuck): lane door29, session 28's leftover.

The start waits up to UNREACHABLE_AFTER_S (10 s) for a running supervisor's first answer,
so that under load it still tells it found one running (fix28g: it had waited 1 s). Before,
beside a stopped or stuck one that wait was silent, and the start's own wait for an answer
then gave it as long again before its refusal. Now a line on stderr says what it waits for
once a second has gone unanswered, and the refusal comes at the end of that one wait.

A real supervisor, held with SIGSTOP; the command runs through tests/support/run_kint.py
with the 10 s cut to 2 (KINT_TEST_UNREACHABLE_AFTER_S).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from conftest import SUPPORT, make_sandbox


def test_a_start_beside_a_stopped_supervisor_says_what_it_waits_for(tmp_path):
    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        os.kill(pid, signal.SIGSTOP)
        try:
            out = subprocess.run([sys.executable, str(SUPPORT / "run_kint.py"), "supervisor",
                                  "start"], env={**sb.env, "KINT_TEST_UNREACHABLE_AFTER_S": "2"},
                                 text=True, capture_output=True, timeout=120,
                                 stdin=subprocess.DEVNULL)
        finally:
            os.kill(pid, signal.SIGCONT)
        lines = out.stderr.splitlines()
        assert lines[0] == (
            f"kint: waiting for the supervisor (pid {pid}) to answer: it holds "
            f"{sb.kint_home} and has not answered for 1s (it is stopped: `kill -CONT {pid}` "
            f"resumes it); it is said stuck if it has not within 2s"), out.stderr
        assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
        said = f"the supervisor (pid {pid}) runs but does not answer"
        assert sum(said in line for line in lines) == 1, out.stderr
        assert "[SUPERVISOR_UNAVAILABLE]" in out.stderr, out.stderr
        assert out.stdout == "", out.stdout
        # Continued, it answers the next start at once, which says nothing of a wait.
        again = sb.kint("supervisor", "start")
        assert again.returncode == 0, again.stdout + again.stderr
        assert again.stdout == f"supervisor running, pid {pid} ({sb.kint_home})\n", again.stdout
        assert "waiting for the supervisor" not in again.stderr, again.stderr
    finally:
        sb.shutdown()
