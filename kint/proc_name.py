"""The name `ps`, `top` and /proc/PID/comm show for kint's long-lived processes.

Why: on a shared box with many profiles, every one of kint's processes was a `python`
among the user's other Pythons, and the refusal of a `pull --discard-local` whose store is
held named its holders by that name (kint/tenant_worker/store_holders.py). Naming them
`kint-supervisor`, `kint-forkserver` and `kint-worker` tells a user which is which, what
to stop, and what is eating a core. The command line (/proc/PID/cmdline) is left as it is.

Linux only (prctl PR_SET_NAME); elsewhere, or when libc cannot be loaded, nothing changes.
"""

from __future__ import annotations

import ctypes
import sys

PR_SET_NAME = 15
# The kernel keeps 15 bytes of a task's name (TASK_COMM_LEN 16, with its NUL).
MAX_NAME_BYTES = 15

SUPERVISOR = "kint-supervisor"
FORKSERVER = "kint-forkserver"
WORKER = "kint-worker"


def set_process_name(name: str) -> bool:
    """Name this process (its main thread) `name`, cut to 15 bytes. Whether it took: a
    name is a convenience, never a reason to fail."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        # The process's own symbols, libc's among them: no `ldconfig -p` run per start,
        # as ctypes.util.find_library would.
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_NAME, name.encode()[:MAX_NAME_BYTES], 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
