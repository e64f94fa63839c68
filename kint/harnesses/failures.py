"""How `kint setup` says what went wrong: `SetupError` when setup cannot run at all,
`HarnessFailure` when one harness could not be registered, each a code of kint.protocol's
closed set with a one-line message and a hint, and the OSErrors met on a
harness's config file said as what the user can fix (a folder where the file should be, a
permission, a read-only home, a full disk) rather than as an exception's repr.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from kint.protocol.errors import ErrorCode


class SetupError(Exception):
    """Setup cannot run at all (no kint-server, a bad --env); `hint` says what to do, and
    `code` (kint.protocol's closed set) is BAD_REQUEST for a value given on the command
    line, INTERNAL for a kint installed without its kint-server."""

    def __init__(self, message: str, hint: str = "",
                 code: ErrorCode = ErrorCode.BAD_REQUEST) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code.value


class HarnessFailure(Exception):
    """One harness could not be registered. `code` is CONFIG_INVALID for the harness's own
    config file (not readable, not parseable, not writable), TIMEOUT for a harness command
    that did not finish, HARNESS_ERROR for one that failed or did not save kint, DISK_FULL,
    BAD_REQUEST for a Hermes profile that is not there, INTERNAL for a fault in setup."""

    def __init__(self, message: str, hint: str,
                 code: ErrorCode = ErrorCode.CONFIG_INVALID) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code.value


RERUN = "run `kint setup` again"


def file_failure(err: OSError, doing: str) -> HarnessFailure:
    """An OSError met on a harness's config file (or its backup), said as what the user can
    fix: a folder where the file should be, a permission, a full disk. `doing` is the
    verb phrase ("read", "back up")."""
    path = err.filename or "the file"
    if isinstance(err, IsADirectoryError):
        return HarnessFailure(f"{path} is a folder, where a config file should be",
                              f"move that folder aside, then {RERUN}; nothing was changed")
    if err.errno == errno.ENOSPC:
        return HarnessFailure(f"cannot {doing} {path}: the disk is full",
                              f"free some space, then {RERUN}",
                              ErrorCode.DISK_FULL)
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return HarnessFailure(
            f"cannot {doing} {path}: {err.strerror}",
            f"this user (uid {os.geteuid()}) needs to read and write that file and create "
            f"files in its folder; give it that, then {RERUN}")
    return HarnessFailure(f"cannot {doing} {path}: {err.strerror or err}",
                          f"fix what the message names, then {RERUN}")


def read_config(path: Path) -> str | None:
    """A harness's config file as text, None when there is none; a file that is a folder
    or that this user may not read fails with a line saying so (rather than being taken
    for an empty one, which the harness's own CLI would then refuse, or write over)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as err:
        raise HarnessFailure(f"{path} is not UTF-8 text ({err.reason} at byte {err.start})",
                             f"fix or move aside that file, then {RERUN}; nothing was "
                             "changed") from None
    except OSError as err:
        raise file_failure(err, "read") from None
