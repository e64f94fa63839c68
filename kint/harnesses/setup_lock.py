"""One `kint setup` (or `kint join`'s registration) at a time per KINT_HOME.

Two setups at once race on every harness's config file: each reads the file, decides, and
asks the harness's CLI to write it, so the one that writes last wins while the other has
already printed its own registration as done (or reports a failure because the entry it
wrote was replaced under it). Setup takes an exclusive flock on `$KINT_HOME/setup.lock`
(0600, holding the pid of the setup that has it) for the whole run; a second one refuses
at once with BUSY, having changed nothing, rather than wait behind harness commands that
may take minutes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from kint.harnesses.failures import SetupError
from kint.paths import ensure_private_dir, kint_home
from kint.pid_file_lock import FOREIGN_FILE_HINT, NotOwnFile, PidFileHeld, hold_pid_file
from kint.protocol.errors import ErrorCode

LOCK_NAME = "setup.lock"


@contextlib.contextmanager
def setup_lock(home: Path | None = None) -> Iterator[None]:
    """Hold the setup lock of `home` (KINT_HOME) for the block; SetupError(BUSY) when
    another setup holds it."""
    folder = ensure_private_dir(home or kint_home())
    path = folder / LOCK_NAME
    try:
        fd = hold_pid_file(path)
    except PidFileHeld as held:
        named = f" (pid {held.pid})" if held.pid is not None else ""
        raise SetupError(f"another kint setup is running for {folder}{named}",
                         "wait for it to finish, then run this one again: nothing was "
                         "changed", ErrorCode.BUSY) from None
    except NotOwnFile as err:
        raise SetupError(str(err), FOREIGN_FILE_HINT, ErrorCode.CORRUPT_STATE) from None
    except OSError as err:
        raise SetupError(f"cannot open {path}: {err.strerror}",
                         "KINT_HOME must be a folder this user can write (kint-server needs it "
                         "too); nothing was changed", ErrorCode.BAD_REQUEST) from None
    try:
        yield
    finally:
        os.close(fd)
