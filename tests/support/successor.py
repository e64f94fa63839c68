"""The next test supervisor of a home, started beside (or after) one that stops: the
tests of a stop's and a client's way to a successor start it alike, and hold the old one
while it takes the home.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from kint.paths import run_dir
from kint.supervisor.pidlock import PID_FILE, running_pid

SUPPORT = Path(__file__).resolve().parent


def start_successor(sb: Any, hold: str) -> subprocess.Popen[bytes]:
    """The next test supervisor of `sb`'s home, with the machine's environment less the
    `hold` variable (its workers hold no attach): a new process, which takes the home the
    pid file's removal left to it. Its stderr is appended to the machine's successor.err."""
    env = {k: v for k, v in sb.env.items() if k != hold}
    log = open(sb.root / "successor.err", "ab")
    try:
        return subprocess.Popen([sys.executable, str(SUPPORT / "run_supervisor.py"), "--home",
                                 str(sb.kint_home)], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    finally:
        log.close()


def take_over_while_held(sb: Any, old: int, hold: str,
                         premise: Callable[[], bool] | None = None) -> None:
    """The old supervisor `old` held (SIGSTOP) while its pid file goes and a successor takes
    the home and answers; `premise`, when given, is asserted first, while held. The old one
    runs on (SIGCONT) whatever failed."""
    os.kill(old, signal.SIGSTOP)
    try:
        if premise is not None:
            assert premise()  # the premise, held
        (run_dir(sb.kint_home) / PID_FILE).unlink()
        start_successor(sb, hold)
        sb.wait_for(lambda: running_pid(sb.kint_home) not in (None, old)
                    and sb.client().ping(0.5), what="the successor serving")
    finally:
        os.kill(old, signal.SIGCONT)
