"""What is wrong with a space's files under KINT_HOME, said the same way by every op
(issue 14, item 4): a corrupt file is refused by name with its own code, never called a
bug in kint, never overwritten; a full disk says so; `status` and `doctor` report the
problems verify would refuse on instead of "in step" / "ok".
"""

from __future__ import annotations

import errno
from typing import Any, Callable

from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.statefiles import CorruptStateFile

_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)

Handler = Callable[[Any, dict[str, Any]], dict[str, Any]]


def corrupt_error(err: CorruptStateFile) -> ProtocolError:
    return ProtocolError(ErrorCode.CORRUPT_STATE,
                         f"kint's state file {err.path} {err.why}; nothing was rewritten",
                         "move the file aside and run `kint pull` (or `kint connect` for a key "
                         "file); kint never replaces a corrupt file by itself")


def guarded(handler: Handler) -> Handler:
    """`handler`, with the faults of the machine (a corrupt file, a full disk) answered as
    what they are."""

    def run(ctx: Any, args: dict[str, Any]) -> dict[str, Any]:
        try:
            return handler(ctx, args)
        except CorruptStateFile as err:
            raise corrupt_error(err) from None
        except OSError as err:
            if err.errno not in _DISK_FULL:
                raise
            raise ProtocolError(ErrorCode.DISK_FULL,
                                f"the disk is full: writing {err.filename or 'a file'} failed "
                                f"({err.strerror}); what was already recorded stays as it was",
                                "free some space, then run the command again") from None

    run.__name__ = getattr(handler, "__name__", "handler")
    run.__doc__ = handler.__doc__
    return run


def problems(ctx: Any) -> list[str]:
    """Every state file of the space that cannot be trusted, named (empty when all read)."""
    from kint.custody.errors import CustodyError
    from kint.custody.session_key import read_keystore, session_key_path
    from kint.custody.vault_cache import read_cached_key
    from kint.custody.wraps import read_wraps

    found: list[str] = []
    state, home, space = ctx.state, ctx.config.home, ctx.config.space_id
    checks: list[Callable[[], Any]] = [
        ctx.enrolment, state.mirror, state.watermark,
        lambda: read_wraps(home, space), lambda: read_cached_key(home, space)]
    if session_key_path(home).exists():
        checks.append(lambda: read_keystore(session_key_path(home)))
    for check in checks:
        try:
            check()
        except CorruptStateFile as err:
            found.append(f"{err.path} {err.why}")
        except CustodyError as err:
            found.append(str(err))
        except ProtocolError as err:
            found.append(err.message)
    return found
