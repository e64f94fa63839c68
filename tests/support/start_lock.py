"""Whether a client holds a home's start lock (kint/supervisor/autostart.py): it is then in
its wait for a supervisor, a state that lasts while the supervisor it waits for is held.
Tests wait for it as the premise of what a signal or a stop meets in that wait.
"""

from __future__ import annotations

import errno
import fcntl
import os
from typing import Any

from kint.paths import run_dir
from kint.supervisor.autostart import START_LOCK


def start_lock_held(sb: Any) -> bool:
    """Whether a client (a start, a goodbye's wait) holds the start lock of `sb`'s home."""
    try:
        fd = os.open(run_dir(sb.kint_home) / START_LOCK, os.O_RDONLY)
    except FileNotFoundError:  # made by the first start that takes it
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
            raise
        return True
    finally:
        os.close(fd)  # a lock this look took goes with it
    return False
