"""The session key's address, and a custody refusal as a command prints it: the code a worker
would give it and what to do.

Apart from `kint.commands.onchain` (which loads web3): `kint authorize` reads the session
key's address before it asks the chain anything, and a machine with no session key (the
usual first refusal) should not wait for web3 to load to be told so.
"""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

from kint.commands.common import refuse
from kint.custody import errors as custody
from kint.custody.session_key import session_address
from kint.paths import UnsafePathError
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.custody_errors import as_protocol_error

# What to do about a custody refusal of the session key, where the message does not say it
# and the code's default hint (written for a space's files) would send the user elsewhere.
_CUSTODY_HINTS: tuple[tuple[type[custody.CustodyError], str], ...] = (
    (custody.LocalSecretCorrupt, "restore it from a copy, or set KINT_SESSION_PASSPHRASE to "
                                 "the passphrase the session key was made with"),
    (custody.LocalSecretUnsafe, "make it a regular file of yours with mode 0600"),
    (custody.LockUnsafe, "remove the lock named, then run the command again"),
)


def custody_refusal(err: custody.CustodyError) -> ProtocolError:
    """A custody refusal of this machine's own files (the session key, the local
    passphrase, a lock) as a command says it: the code a worker would give it and what to
    do."""
    found = as_protocol_error(err)
    hint = next((h for kind, h in _CUSTODY_HINTS if isinstance(err, kind)), found.hint)
    return ProtocolError(found.code, found.message, hint)


def refuse_custody(err: custody.CustodyError | UnsafePathError) -> NoReturn:
    """A custody refusal (the session key, the local passphrase, a folder kint must own)
    with the code a worker would give it and what to do."""
    if isinstance(err, UnsafePathError):
        refuse(ErrorCode.CORRUPT_STATE, str(err), err.hint)
    found = custody_refusal(err)
    refuse(found.code, found.message, found.hint)


def session_key_address(home: Path) -> str:
    """This machine's session key address, read from the keystore without unlocking it."""
    try:
        return session_address(home)
    except custody.CustodyError as err:
        refuse_custody(err)
