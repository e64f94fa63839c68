"""Every refusal the custody package makes.

Why one module: callers (the CLI, the worker) map these to exit codes and tool errors, and
want one base class to catch. Each message is one line, names the file or the value that is
wrong and, where there is one, what to do; none ever contains a secret, a key, a signature,
a code or the bytes of a file.
"""

from __future__ import annotations

from pathlib import Path


class CustodyError(Exception):
    """Base of every custody refusal."""


# -- shapes of values handed in -------------------------------------------------------------


class BadOwner(CustodyError, ValueError):
    def __init__(self) -> None:
        super().__init__("owner must be a 20-byte address (0x and 40 hex characters)")


class BadSpace(CustodyError, ValueError):
    def __init__(self) -> None:
        super().__init__("space must be 32 bytes (64 hex characters)")


class BadDataKey(CustodyError, ValueError):
    def __init__(self) -> None:
        super().__init__("a data key is 32 bytes")


class BadKek(CustodyError, ValueError):
    def __init__(self) -> None:
        super().__init__("a key-encryption key is 32 bytes")


# -- the derive signature and the passphrases -----------------------------------------------


class BadDeriveSignature(CustodyError, ValueError):
    """A signature that is not a well-formed 65-byte secp256k1 signature."""

    def __init__(self, why: str) -> None:
        super().__init__(f"derive signature {why}")


class WrongSigner(CustodyError):
    """The derive signature is valid but was made by another key than the owner's."""

    def __init__(self, recovered: str, expected: str) -> None:
        super().__init__(f"derive signature recovers to {recovered}, expected {expected}; "
                         f"refusing to derive a key from it")
        self.recovered = recovered
        self.expected = expected


class EmptyPassphrase(CustodyError, ValueError):
    def __init__(self) -> None:
        super().__init__("the passphrase is empty; kint refuses an empty passphrase")


# -- wraps ---------------------------------------------------------------------------------


class KekTagMismatch(CustodyError):
    def __init__(self) -> None:
        super().__init__("kek_tag mismatch: this key does not open this wrap")


class WrapAltered(CustodyError):
    """The tag matched (so the key is the right one) but AES-GCM refused: the wrap changed."""

    def __init__(self) -> None:
        super().__init__("this wrap carries this key's tag but does not open: its bytes were "
                         "altered")


class WrapsFileCorrupt(CustodyError):
    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path} {why}; it was left as it is (connect again to rewrite it)")
        self.path = path
        self.why = why


# -- the recovery code ---------------------------------------------------------------------


class BadRecoveryCode(CustodyError, ValueError):
    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or "a recovery code is 55 characters, letters A-Z and "
                         "digits 2-7, in groups of 4 separated by hyphens (case and spaces "
                         "do not matter)")


class RecoveryChecksumFailed(BadRecoveryCode):
    def __init__(self) -> None:
        super().__init__("recovery code checksum failed (typo?)")


# -- the local secret ----------------------------------------------------------------------


class NoLocalPassphrase(CustodyError):
    def __init__(self) -> None:
        super().__init__("no local passphrase: set KINT_SESSION_PASSPHRASE")


class LocalSecretUnsafe(CustodyError):
    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path} {why}; kint will not use it as the local passphrase (make "
                         f"it a regular file of yours with mode 0600, or remove it)")
        self.path = path


class LocalSecretCorrupt(CustodyError):
    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path} {why}; it was left as it is")
        self.path = path


class LockUnsafe(CustodyError):
    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"the lock {path} {why}; remove it and try again")
        self.path = path


# -- the session key -----------------------------------------------------------------------


class SessionKeyMissing(CustodyError):
    def __init__(self, path: Path) -> None:
        # v0.3.0's words first (14-agents.md, "Common errors and fixes"), then where.
        super().__init__(f"no session key on this machine (none at {path}); run kint "
                         f"session-key create")
        self.path = path


class SessionKeyCorrupt(CustodyError):
    """A keystore that is truncated, garbled, or not a V3 keystore. Named, never replaced;
    what to do about it is kint.protocol.hints.SESSION_KEY_CORRUPT_HINT."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path} is not a session key kint can read: it {why}; it was left "
                         f"as it is")
        self.path = path
        self.why = why


class SessionKeyLocked(CustodyError):
    """A well-formed keystore that does not open with this machine's local passphrase."""

    def __init__(self, path: Path, source: str) -> None:
        super().__init__(f"{path} does not open with the local passphrase from {source}; "
                         f"use the source it was made with (KINT_SESSION_PASSPHRASE, the "
                         f"Keychain, or local.secret)")
        self.path = path
        self.source = source


# -- the vault key cache -------------------------------------------------------------------


class RekeyJournalCorrupt(CustodyError):
    """A journal that is garbled, was altered, or was sealed under another local secret.
    Named and left in place: it may hold the only copy of a data key the chain uses."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path} {why}; it was left as it is (it may hold the only copy of "
                         f"the data key a rekey anchored)")
        self.path = path


class RekeyJournalNewer(RekeyJournalCorrupt):
    """A journal a later kint wrote, in a version this kint does not read. Not damaged: the
    kint that wrote it settles it, and moving it aside (the way out of a garbled one) would
    drop what may be the only copy of the data key the chain's head is sealed under."""


class VaultCacheCorrupt(CustodyError):
    """A cache file that is garbled or was altered. Named, never rewritten behind the user."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path} {why}; it was left as it is (kint connect writes it again)")
        self.path = path
        self.why = why
