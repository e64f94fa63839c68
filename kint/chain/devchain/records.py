"""The devchain's files under $KINT_HOME/devchain/: the record of the running anvil
(`devchain.json`, how the rest of kint finds the devchain), the last anchor's address
(`anchor.json`, kept for the next start) and the lock that makes one start, stop or clean-up
at a time.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from kint.chain.config import devchain_record
from kint.chain.devchain.errors import DevchainError
from kint.paths import UnsafePathError, atomic_write, devchain_dir, ensure_private_dir
from kint.pid_file_lock import FOREIGN_FILE_HINT, NotOwnFile, open_own_file
from kint.protocol import ErrorCode


def state_path(home: Path) -> Path:
    return devchain_dir(home) / "state.json"


def started_here(record: dict[str, Any], home: Path) -> bool:
    """The record's anvil keeps its state under this KINT_HOME (not a record copied from
    another machine's home, which points at that home's anvil)."""
    state = record.get("state")
    return isinstance(state, str) and os.path.realpath(state) == os.path.realpath(state_path(home))


def copied(record: dict[str, Any], home: Path) -> bool:
    """The record names another KINT_HOME's state file: a copy (docs/quickstart.md, "A second
    machine on the devchain") of a record whose anvil this home did not start, and whose pid
    means nothing here. A record naming no state file (one kint wrote before it kept one)
    is this home's own."""
    return "state" in record and not started_here(record, home)


def anchor_file(home: Path) -> Path:
    return devchain_dir(home) / "anchor.json"


@contextlib.contextmanager
def locked(home: Path) -> Iterator[None]:
    """One start, stop or clean-up at a time per KINT_HOME."""
    try:
        folder = ensure_private_dir(devchain_dir(ensure_private_dir(home)))
    except UnsafePathError as err:
        raise DevchainError(str(err), hint="KINT_HOME and its devchain/ folder must be plain "
                                           "folders of this user",
                            code=ErrorCode.CORRUPT_STATE) from None
    try:
        fd = open_own_file(folder / ".lock")
    except NotOwnFile as err:
        raise DevchainError(str(err), hint=FOREIGN_FILE_HINT,
                            code=ErrorCode.CORRUPT_STATE) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_record(home: Path) -> dict[str, Any] | None:
    path = devchain_record(home)
    try:
        record = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except orjson.JSONDecodeError:
        record = None
    if not isinstance(record, dict):
        raise DevchainError(f"{path} is corrupt",
                            hint="remove it and run `kint devchain start`",
                            code=ErrorCode.CORRUPT_STATE)
    return record


def forget(home: Path, record: dict[str, Any]) -> None:
    """Remove the record of an anvil that no longer runs, keeping its anchor's address for
    the next start (the state file still holds that contract)."""
    anchor = record.get("anchor")
    if isinstance(anchor, str) and anchor and not anchor_file(home).exists():
        atomic_write(anchor_file(home), orjson.dumps({"anchor": anchor}))
    with contextlib.suppress(FileNotFoundError):
        devchain_record(home).unlink()


def previous_anchor(home: Path, record: dict[str, Any] | None) -> str | None:
    try:
        anchor = orjson.loads(anchor_file(home).read_bytes()).get("anchor")
    except (FileNotFoundError, orjson.JSONDecodeError, AttributeError):
        anchor = None
    if not anchor and record:
        anchor = record.get("anchor")
    return anchor if isinstance(anchor, str) and anchor else None
