"""Process helpers. (Settings are read through kint.settings, and nowhere else.)"""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True while a process with this pid exists (it may be another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
