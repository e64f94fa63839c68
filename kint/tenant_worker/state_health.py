"""What is wrong with a space's files under KINT_HOME, said the same way by every op
(docs/faults.md, the corrupt-state rows): a corrupt file is refused by name with its own
code, never called a bug in kint, never overwritten; a full disk says so, and so does a
store another process holds locked (BUSY, whichever op met it); `status` and
`doctor` report the problems verify would refuse on instead of "in step" / "ok".
"""

from __future__ import annotations

import errno
import sqlite3
from typing import Any, Callable

from sibyl_memory_client.exceptions import SibylMemoryError

from kint.open_files import causes
from kint.pid_file_lock import FOREIGN_FILE_HINT, NotOwnFile
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.errors import DEFAULT_HINTS
from kint.protocol.hints import (CORRUPT_FILE_HINT, DISK_FULL_PULL_TAIL, STORE_LOCKED_HINT,
                                 STORE_LOCKED_PULL_HINT, STORE_LOCKED_PUSH_HINT,
                                 STORE_UNREADABLE_HINT)
from kint.store_denied import DENIED_HINT
from kint.tenant_worker.statefiles import CorruptStateFile
from kint.tenant_worker.store_errors import StoreDenied, StoreLocked, StoreUnreadable, is_locked

_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
SQLITE_FULL = 13  # sqlite3.h: "Insertion failed because database is full"

Handler = Callable[[Any, dict[str, Any]], dict[str, Any]]


def corrupt_error(err: CorruptStateFile) -> ProtocolError:
    return ProtocolError(ErrorCode.CORRUPT_STATE,
                         f"kint's state file {err.path} {err.why}; nothing was rewritten",
                         CORRUPT_FILE_HINT)


def store_full(err: BaseException) -> bool:
    """Whether a write to Sibyl's store failed because its disk is full: SQLite says
    SQLITE_FULL, or the write's OSError ENOSPC or EDQUOT (Sibyl wraps SQLite's error in its
    own StorageError, the sqlite3 error as the cause)."""
    for cur in causes(err):
        if isinstance(cur, sqlite3.Error) and getattr(cur, "sqlite_errorcode", 0) & 0xFF \
                == SQLITE_FULL:
            return True
        if isinstance(cur, OSError) and cur.errno in _DISK_FULL:
            return True
    return False


def store_lock(err: BaseException) -> sqlite3.Error | None:
    """SQLite's error in `err`'s chain that says another process holds the store's lock past
    the busy wait (store_errors.is_locked), or None."""
    return next((cur for cur in causes(err)
                 if isinstance(cur, sqlite3.Error) and is_locked(cur)), None)


def _locked(message: str, op: str) -> ProtocolError:
    """BUSY naming the store and the lock (`message`), in a push's words (push_refusals):
    the store is fine, only taken, and `op` runs once the other writer lets go; never
    INTERNAL, which tells the user it is a bug in kint."""
    hint = {"push": STORE_LOCKED_PUSH_HINT, "pull": STORE_LOCKED_PULL_HINT}.get(
        op, STORE_LOCKED_HINT)
    return ProtocolError(ErrorCode.BUSY, message, hint)


def store_refusal(err: StoreUnreadable, op: str, tail: str = "") -> ProtocolError:
    """A read of the store that failed (store_errors.unreadable), as `op` refuses it, its
    message ending in `tail`: a lock is BUSY (`_locked`); a store this user may not open is
    SIBYL_ERROR with the permission's hint (nothing says it is damaged); anything else is
    INTERNAL naming the store and SQLite's error, the file the human's to check. Never the
    op's bare "failed inside the worker", which calls it a bug in kint and names no store."""
    if isinstance(err, StoreLocked):
        return _locked(f"{err}{tail}", op)
    if isinstance(err, StoreDenied):
        return ProtocolError(ErrorCode.SIBYL_ERROR, f"{err}{tail}", DENIED_HINT)
    return ProtocolError(ErrorCode.INTERNAL, f"{err}{tail}", STORE_UNREADABLE_HINT)


def disk_full(err: OSError) -> bool:
    """Whether `err` is the disk (or the user's quota) refusing a write."""
    return err.errno in _DISK_FULL


def _disk_full(what: str, why: str, op: str) -> ProtocolError:
    hint = DEFAULT_HINTS[ErrorCode.DISK_FULL]
    if op == "pull":
        hint += DISK_FULL_PULL_TAIL
    return ProtocolError(ErrorCode.DISK_FULL,
                         f"the disk is full: writing {what} failed ({why}); what was already "
                         f"recorded stays as it was", hint)


def guarded(op: str, handler: Handler) -> Handler:
    """`handler` (op `op`), with the faults of the machine (a corrupt file, a link or a
    stranger's file where kint keeps its own, a full disk under kint's state or under
    Sibyl's store) answered as what they are, naming the file."""

    def run(ctx: Any, args: dict[str, Any]) -> dict[str, Any]:
        try:
            return handler(ctx, args)
        except CorruptStateFile as err:
            raise corrupt_error(err) from None
        except StoreUnreadable as err:  # a count's or the archive's read, naming the store
            raise store_refusal(err, op) from None
        except NotOwnFile as err:  # a link where a lock of the space's goes, named
            raise ProtocolError(ErrorCode.CORRUPT_STATE, str(err), FOREIGN_FILE_HINT) from None
        except OSError as err:
            if not disk_full(err):
                raise
            raise _disk_full(err.filename or "a file", err.strerror, op) from None
        except (SibylMemoryError, sqlite3.Error) as err:
            lock = store_lock(err)
            if lock is not None:  # met by any op: a pull's, a restore's, a history's read
                raise _locked(f"the store {ctx.config.db} is locked by another process "
                              f"({lock})", op) from None
            if not store_full(err):
                raise
            raise _disk_full(f"Sibyl's store {ctx.config.db}", "database or disk is full",
                                  op) from None

    run.__name__ = op
    run.__doc__ = handler.__doc__
    return run


def problems(ctx: Any) -> list[str]:
    """Every state file of the space that cannot be trusted, named (empty when all read)."""
    return [said for said, _ in problems_and_hints(ctx)]


def problems_and_hints(ctx: Any) -> list[tuple[str, str]]:
    """`problems`, each with what to do about it as the op that meets it says: doctor gave
    one "move the file aside" for all, a newer kint's rekey journal too, which is to be
    kept (it may hold the only copy of the data key the chain's head is sealed under)."""
    from kint.custody.errors import CustodyError
    from kint.custody.rekey_journal import load_rekey_journal
    from kint.custody.session_key import read_keystore, session_key_path
    from kint.custody.vault_cache import read_cached_key
    from kint.custody.wraps import read_wraps
    from kint.tenant_worker import lost_restore
    from kint.tenant_worker.apply_journal import interrupted
    from kint.tenant_worker.custody_errors import as_protocol_error

    found: list[tuple[str, str]] = []
    state, home, space = ctx.state, ctx.config.home, ctx.config.space_id
    checks: list[Callable[[], Any]] = [
        ctx.enrolment, state.mirror, state.watermark,
        lambda: read_wraps(home, space), lambda: read_cached_key(home, space),
        lambda: interrupted(state), lambda: lost_restore.kept(state),
        # A rekey journal that does not open stops every push and pull (rekey_settle.py):
        # status and doctor name it too, not only the refusal.
        lambda: load_rekey_journal(home, space)]
    if session_key_path(home).exists():
        checks.append(lambda: read_keystore(session_key_path(home)))
    for check in checks:
        try:
            check()
        except CorruptStateFile as err:
            found.append((f"{err.path} {err.why}", CORRUPT_FILE_HINT))
        except CustodyError as err:
            found.append((str(err), as_protocol_error(err).hint or CORRUPT_FILE_HINT))
        except ProtocolError as err:
            found.append((err.message, err.hint or CORRUPT_FILE_HINT))
    return found
