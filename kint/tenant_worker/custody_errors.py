"""One place that turns a custody refusal into the reply a client sees: its code decides
the exit status (09-cli.md) and what a script or an agent does next."""

from __future__ import annotations

from kint.custody import errors as e
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import (REKEY_JOURNAL_HINT, REKEY_JOURNAL_NEWER_HINT,
                                 SESSION_KEY_CORRUPT_HINT, SESSION_KEY_LOCKED_HINT,
                                 SESSION_KEY_MISSING_HINT, recovery_code_hint)

_CODES: tuple[tuple[type[e.CustodyError], ErrorCode], ...] = (
    (e.SessionKeyMissing, ErrorCode.NO_SESSION_KEY),
    (e.SessionKeyLocked, ErrorCode.NO_SESSION_KEY),
    (e.NoLocalPassphrase, ErrorCode.NO_SESSION_KEY),
    (e.LocalSecretCorrupt, ErrorCode.CORRUPT_STATE),
    (e.LocalSecretUnsafe, ErrorCode.CORRUPT_STATE),
    (e.LockUnsafe, ErrorCode.CORRUPT_STATE),
    (e.WrapsFileCorrupt, ErrorCode.CORRUPT_STATE),
    (e.VaultCacheCorrupt, ErrorCode.CORRUPT_STATE),
    (e.KekTagMismatch, ErrorCode.WRONG_KEY),
    (e.WrapAltered, ErrorCode.WRONG_KEY),
)


# A derive signature that is not one (cut short in a copy, another tool's output): what a
# whole one looks like and how it comes over.
SIGNATURE_HINT = ("give the whole signature the wallet printed for `kint canonical-payload "
                  "--owner ADDRESS` (0x and 130 hex characters), on stdin with --signature - "
                  "or in a file with --signature-file")


def as_protocol_error(err: e.CustodyError, space16: str | None = None) -> ProtocolError:
    """`err` as the refusal a client sees. `space16`: the space the refused step was for,
    where the caller knows it (a connect's), so a recovery code refused names that space's
    file rather than its pattern (recovery_code_hint)."""
    if isinstance(err, e.WrongSigner):  # another wallet signed: say which, and what to do
        return ProtocolError(ErrorCode.WRONG_KEY, str(err), wrong_signer_hint(err))
    if isinstance(err, e.RekeyJournalNewer):  # not damaged: the kint that wrote it settles it
        return ProtocolError(ErrorCode.CORRUPT_STATE, str(err), REKEY_JOURNAL_NEWER_HINT)
    if isinstance(err, e.RekeyJournalCorrupt):  # the one key file kint never rewrites itself
        return ProtocolError(ErrorCode.CORRUPT_STATE, str(err), REKEY_JOURNAL_HINT)
    if isinstance(err, e.BadRecoveryCode):  # a typo: the command's --help would not say where
        return ProtocolError(ErrorCode.BAD_REQUEST, str(err), recovery_code_hint(space16))
    if isinstance(err, e.BadDeriveSignature):  # cut short or mangled on its way over
        return ProtocolError(ErrorCode.BAD_REQUEST, str(err), SIGNATURE_HINT)
    if isinstance(err, e.SessionKeyMissing):  # no file: no passphrase to check
        return ProtocolError(ErrorCode.NO_SESSION_KEY, str(err), SESSION_KEY_MISSING_HINT)
    if isinstance(err, e.SessionKeyLocked):
        return ProtocolError(ErrorCode.NO_SESSION_KEY, str(err), SESSION_KEY_LOCKED_HINT)
    if isinstance(err, e.SessionKeyCorrupt):
        return ProtocolError(ErrorCode.CORRUPT_STATE, str(err), SESSION_KEY_CORRUPT_HINT)
    for kind, code in _CODES:
        if isinstance(err, kind):
            return ProtocolError(code, str(err))
    return ProtocolError(ErrorCode.BAD_REQUEST, str(err))


def wrong_signer_hint(err: e.WrongSigner) -> str:
    """A derive signature made by another account than the owner (a wallet with several
    accounts signs with the one selected): the generic "the key given does not open this
    vault" said nothing of which account to sign with."""
    return (f"sign the vault message (kint canonical-payload --owner {err.expected}) with "
            f"the owner's own account, {err.expected}, selected in the wallet")
