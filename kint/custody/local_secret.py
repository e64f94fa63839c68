"""The machine-local secret: the password of `session.key` and the key behind the data key
cache. The user never types it.

It comes from the first of these that exists:

1. `KINT_SESSION_PASSPHRASE` (servers, anything without a Keychain). Empty counts as unset.
2. On macOS only, the Keychain generic password service `dev.kint-session-key`, account
   `passphrase`, created with 32 random bytes as URL-safe text on first use (if the write
   fails, kint falls through). `KINT_NO_KEYCHAIN=1` skips it. Reached through the `keyring`
   package, whose macOS backend is that Keychain.
3. `$KINT_HOME/local.secret`, mode 0600, created with 32 random bytes as URL-safe text on
   first use.

When kint only needs to load (unlock the session key, read the cache) it creates nothing,
and with none of the three stops with `no local passphrase: set KINT_SESSION_PASSPHRASE`.

Why keep the source stable: what was sealed under one source's secret does not open under
another's. The secret is used as text, exactly as stored (trailing whitespace of a file
trimmed), so a local.secret written by an earlier kint as hex keeps opening its keystore.
"""

from __future__ import annotations

import os
import secrets
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kint.custody.errors import LocalSecretCorrupt, LocalSecretUnsafe, NoLocalPassphrase
from kint.custody.files import home_lock, home_or_default, write_new
from kint.home_modes import LOOSE_BITS
from kint.paths import LOCAL_SECRET_FILE, ensure_private_dir

PASSPHRASE_ENV = "KINT_SESSION_PASSPHRASE"
NO_KEYCHAIN_ENV = "KINT_NO_KEYCHAIN"
KEYCHAIN_SERVICE = "dev.kint-session-key"
KEYCHAIN_ACCOUNT = "passphrase"
_SECRET_LOCK_FILE = "local-secret.lock"
_LOCAL_SECRET_MAX = 4096

Source = Literal["KINT_SESSION_PASSPHRASE", "keychain", "local.secret"]


@dataclass(frozen=True)
class LocalSecret:
    """The local secret and where it came from. `repr` never shows the secret."""

    text: str = field(repr=False)
    source: Source

    @property
    def password(self) -> str:
        """The keystore password."""
        return self.text

    @property
    def key_material(self) -> bytes:
        """The HKDF input of the data key cache (the text as UTF-8)."""
        return self.text.encode("utf-8")


def _new_secret_text() -> str:
    return secrets.token_urlsafe(32)


def keychain_enabled() -> bool:
    """Whether kint may use the macOS Keychain here (macOS, and KINT_NO_KEYCHAIN not 1): for
    this secret, and for v0.3.0's Alchemy key (kint.chain.keychain_rpc)."""
    from kint import settings

    return sys.platform == "darwin" and not settings.value(NO_KEYCHAIN_ENV)


def _from_keychain(home: Path, create: bool) -> str | None:
    """The Keychain item's value; made first when absent and `create`. None whenever the
    Keychain cannot be used (no keyring, a failing backend, any error, a failed write)."""
    try:
        import keyring

        value = keyring.get_password(KEYCHAIN_SERVICE, KEYCHAIN_ACCOUNT)
    except Exception:
        return None
    if value:
        return value
    if not create:
        return None
    with home_lock(home, _SECRET_LOCK_FILE):  # two first uses must not write two secrets
        try:
            value = keyring.get_password(KEYCHAIN_SERVICE, KEYCHAIN_ACCOUNT)
            if not value:
                keyring.set_password(KEYCHAIN_SERVICE, KEYCHAIN_ACCOUNT, _new_secret_text())
                value = keyring.get_password(KEYCHAIN_SERVICE, KEYCHAIN_ACCOUNT)
        except Exception:
            return None
    return value or None


def local_secret_path(home: Path | None = None) -> Path:
    return home_or_default(home) / LOCAL_SECRET_FILE


def _from_file(home: Path, create: bool) -> str | None:
    path = local_secret_path(home)
    try:
        st = path.lstat()
    except FileNotFoundError:
        if not create:
            return None
        ensure_private_dir(home)
        try:
            write_new(path, (_new_secret_text() + "\n").encode("ascii"))
        except FileExistsError:
            pass  # another process made it first: read theirs
        st = path.lstat()
    if not stat.S_ISREG(st.st_mode):
        raise LocalSecretUnsafe(path, "is not a regular file")
    if st.st_uid != os.getuid():
        raise LocalSecretUnsafe(path, f"is owned by uid {st.st_uid}, not by this user")
    if st.st_mode & LOOSE_BITS:
        raise LocalSecretUnsafe(
            path, f"is readable or writable by others (mode {stat.S_IMODE(st.st_mode):04o})")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read(_LOCAL_SECRET_MAX + 1)
    if len(raw) > _LOCAL_SECRET_MAX:
        raise LocalSecretCorrupt(path, "is too large to be a local secret")
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise LocalSecretCorrupt(path, "is not UTF-8 text") from None
    if not text:
        raise LocalSecretCorrupt(path, "is empty")
    return text


def local_secret(home: Path | None = None, *, create: bool = True) -> LocalSecret:
    """This machine's local secret (see the module docstring for the order).

    `create=False` is for loading only: nothing is written, and NoLocalPassphrase is raised
    when no source has one.
    """
    from kint import settings

    passphrase = settings.value(PASSPHRASE_ENV)
    if passphrase:
        return LocalSecret(passphrase, "KINT_SESSION_PASSPHRASE")
    home = home_or_default(home)
    if keychain_enabled():
        value = _from_keychain(home, create)
        if value is not None:
            return LocalSecret(value, "keychain")
    text = _from_file(home, create)
    if text is None:
        raise NoLocalPassphrase()
    return LocalSecret(text, "local.secret")


def load_local_secret(home: Path | None = None) -> LocalSecret:
    """The local secret when one exists; NoLocalPassphrase otherwise. Creates nothing."""
    return local_secret(home, create=False)
