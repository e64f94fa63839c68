"""One test run per `--basetemp`: a run given a folder another running run was given is
refused as it starts, before it removes or sweeps anything.

The run's last sweep (support/run_hooks.py's pytest_sessionfinish, left_supervisors.py) stops
every supervisor still running under the run's folders, the `--basetemp` given included:
a second run given the same folder would stop the first run's supervisors mid-test (and
the first run, ending first, the second's), and pytest itself empties that folder as a
run starts, under the other run's machines. A run that was given no `--basetemp` has a
folder of its own under its run folder (KINT_TESTS_RUN_ROOT), and needs no lock.

The lock is a flock on a file beside the folder (not in it: pytest removes the folder and
makes it again), held by the run's controller for its life and let go by the kernel when
it ends, however it ends. The file stays (an empty one, the holder's pid in it): removing
a lock file races the run that opened it meanwhile.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

CODE = "BASETEMP_SHARED"


class BasetempShared(Exception):
    """Another running run holds the lock of this `--basetemp`."""


def lock_path(basetemp: Path) -> Path:
    """The lock file of `basetemp`: beside it, named after it."""
    basetemp = Path(os.path.abspath(basetemp))
    return basetemp.parent / f".{basetemp.name}.kint-run.lock"


def hold_basetemp(basetemp: Path) -> int | None:
    """The flock of `basetemp`'s lock file, held on the returned fd (kept by the caller
    for the run's life, never inherited); None where the folder's parent does not exist
    (pytest refuses such a --basetemp itself). BasetempShared, with a code, what happened
    and a hint, where another running run holds it."""
    path = lock_path(basetemp)
    if not path.parent.is_dir():
        return None
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise BasetempShared(
            f"[{CODE}] another test run (pid {holder}) is running with --basetemp "
            f"{basetemp}: pytest empties that folder as a run starts, and each run's last "
            f"sweep stops every supervisor under it, the other run's too\n"
            f"hint: give each run a --basetemp of its own, or none (a run then makes a "
            f"folder of its own)") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
