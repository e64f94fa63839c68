"""The devchain's files under $KINT_HOME/devchain/: the record of the running anvil
(`devchain.json`, how the rest of kint finds the devchain), the last anchor's address
(`anchor.json`, kept for the next start), this KINT_HOME's id (`home.id`, which with the
record's own facts tells its own record from a copy: kint.chain.devchain.whose) and the
lock that makes one start, stop or clean-up at a time.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
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
    """The record's anvil keeps its state under this KINT_HOME's path (which a copy from
    another machine whose KINT_HOME has the same path also names: whose.judged asks more)."""
    state = record.get("state")
    return isinstance(state, str) and os.path.realpath(state) == os.path.realpath(state_path(home))


def home_id_path(home: Path) -> Path:
    return devchain_dir(home) / "home.id"


def home_id(home: Path) -> str | None:
    """This KINT_HOME's id (`home_id_path`), or None when no start here has made one (or it
    cannot be read: a record naming an id is then judged by its facts, whose.judged)."""
    try:
        found = home_id_path(home).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return found or None


def own_home_id(home: Path) -> str:
    """This KINT_HOME's id, made (random, 0600) by the first start that needs it. Call with
    the lock held."""
    found = home_id(home)
    if found is None:
        found = secrets.token_hex(16)
        atomic_write(home_id_path(home), found.encode())
    return found


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
