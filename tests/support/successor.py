"""The next test supervisor of a home, started beside (or after) one that stops: the
tests of a stop's and a client's way to a successor start it alike.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

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
