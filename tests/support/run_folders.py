"""The run's folder (KINT_TESTS_RUN_ROOT, tests/support/run_env.py): its lock, held for
the run's life, and the clean-up of the folders of runs killed before their end (their
anvil and their supervisors stopped, then the folder removed).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import tempfile
from pathlib import Path

# What the run's processes share (the devchain, the chain's turn lock): made by the first
# process, the controller (which imports this file before it starts the workers), and
# inherited by the workers through the environment.
RUN_LOCK = "run.lock"


def hold_run_lock(root: Path) -> int:
    """An exclusive flock on `root`/run.lock, held for this process's life (the fd is kept,
    never inherited): a later run removes a run folder whose lock is free and that is no
    failed run's, the folder of a run killed before its end, which removed nothing. The
    file is locked before it is named, so no later run sees it unlocked while this one
    starts."""
    fd, made = tempfile.mkstemp(dir=root, prefix=".run-lock-")
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.rename(made, root / RUN_LOCK)
    return fd


def remove_abandoned_runs(own: Path) -> None:
    """Remove this user's run folders beside `own` whose run ended without removing them
    (killed, or its machine stopped): their lock is free. A failed run's folder is kept
    (`_keep_last_failed_runs` keeps the last three); one with no lock yet is a run being
    made, or a folder of an older conftest, and is left alone. A folder's anvil and the
    supervisors still running under it (its run's last sweep never ran) are stopped
    before it is removed."""
    for folder in own.parent.glob("kt-*"):
        try:
            if folder == own or folder.is_symlink() or folder.stat().st_uid != os.getuid() \
                    or (folder / "failed").exists():
                continue
            fd = os.open(folder / RUN_LOCK, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a run going on
            continue
        else:
            _stop_abandoned_anvil(folder)
            sweep_left(folder)  # under its homes, which the folder's removal forgets
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            os.close(fd)


def _stop_abandoned_anvil(folder: Path) -> None:
    """Stop the devchain's anvil of the abandoned run whose folder is `folder`, if it still
    runs: the controller stops it at the run's end, and a killed run never got there, so
    its anvil (in a session of its own, past any Ctrl-C) outlived it, and removing the
    folder took its record with it. The record `kint devchain start` wrote in the run's
    folder is the anvil's pid and identity (its command line and start time, which
    kint.chain.devchain.identity reads again): `kint devchain stop`'s own code signals the
    pid only while it is still that anvil, never a process that took the pid since. A
    clean-up that fails leaves the anvil, never this run unstarted."""
    from kint.chain.config import devchain_record

    home = folder / DEVCHAIN_KINT_HOME
    if not devchain_record(home).is_file():
        return
    from kint.chain.devchain.lifecycle import stop

    try:
        stop(home)
    except Exception:  # noqa: BLE001 - a corrupt record, a foreign file: left, as before
        pass


def sweep_left(*roots: Path) -> None:
    """Stop the supervisors a test left under `roots` (support/left_supervisors.py): a
    sweep that fails is said, and never keeps a run from starting, its anvil from being
    stopped or its folder from being removed."""
    from support.left_supervisors import stop_left_under

    try:
        stop_left_under(*roots)
    except Exception as err:  # noqa: BLE001 - a clean-up's own failure, said and left
        print(f"\nwarning: the sweep of the supervisors left under {', '.join(map(str, roots))}"
              f" failed: {type(err).__name__}: {err}", file=sys.stderr)


# The run's devchain's KINT_HOME, inside its folder (`chain_home`).
DEVCHAIN_KINT_HOME = Path("devchain") / "kint"
