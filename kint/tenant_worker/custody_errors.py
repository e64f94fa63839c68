"""One place that turns a custody refusal into the reply a client sees: its code decides
the exit status (09-cli.md) and what a script or an agent does next."""

from __future__ import annotations

from kint.custody import errors as e
from kint.protocol import ErrorCode, ProtocolError

_CODES: tuple[tuple[type[e.CustodyError], ErrorCode], ...] = (
    (e.SessionKeyMissing, ErrorCode.NO_SESSION_KEY),
    (e.SessionKeyLocked, ErrorCode.NO_SESSION_KEY),
    (e.SessionKeyCorrupt, ErrorCode.CORRUPT_STATE),
    (e.NoLocalPassphrase, ErrorCode.NO_SESSION_KEY),
    (e.LocalSecretCorrupt, ErrorCode.CORRUPT_STATE),
    (e.LocalSecretUnsafe, ErrorCode.CORRUPT_STATE),
    (e.LockUnsafe, ErrorCode.CORRUPT_STATE),
    (e.WrapsFileCorrupt, ErrorCode.CORRUPT_STATE),
    (e.VaultCacheCorrupt, ErrorCode.CORRUPT_STATE),
    (e.WrongSigner, ErrorCode.WRONG_KEY),
    (e.KekTagMismatch, ErrorCode.WRONG_KEY),
    (e.WrapAltered, ErrorCode.WRONG_KEY),
)


def as_protocol_error(err: e.CustodyError) -> ProtocolError:
    for kind, code in _CODES:
        if isinstance(err, kind):
            return ProtocolError(code, str(err))
    return ProtocolError(ErrorCode.BAD_REQUEST, str(err))
