"""This machine's session key: `$KINT_HOME/session.key`, a V3 scrypt keystore.

Why it is built this way:

- It is an ordinary Web3 Secret Storage (V3) keystore made by eth-account, so any Ethereum
  tool opens it with the local secret (`local_secret.py`) as its password, and a copied
  KINT_HOME alone opens nothing. It pays for epochs and decrypts nothing.
- An unlock costs one scrypt (n = 2^18: ~1 s, 256 MiB), so it runs under the scrypt lock in
  KINT_HOME; callers unlock once and keep the account.
- Reading is as lenient as the standard and its writers, strict about everything else
  (docs/authorize.md; tests/test_session_keystore.py). eth-account writes the AES-CTR iv as
  the hex of an integer, so about one keystore in 256 has a 15-byte (30 hex digit) iv. Hex
  fields may carry 0x, either case, and a fixed-size field (iv, ciphertext, mac) may have
  lost leading zero bytes; it is padded back. Keys are matched case-insensitively ("Crypto"
  from older geth). What is not a complete V3 keystore (truncated JSON, a field missing,
  garbled hex, a field longer than its size, absurd KDF costs) is refused by name and left
  as it is. A keystore that decrypts is never refused.
- kint writes every fixed-size field at full length, so what it writes any reader accepts.
- `create` never replaces a key; `rotate` keeps the previous one as `session.key.old`.
- eth-account (~0.3 s of imports) loads in the two functions that encrypt or decrypt a
  keystore: reading the address it names (`kint session-key show`, the first check of
  `kint authorize`) does not need it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from kint.custody.errors import SessionKeyCorrupt, SessionKeyLocked, SessionKeyMissing
from kint.custody.files import (home_lock, home_or_default, scrypt_lock, write_new,
                                write_private)
from kint.custody.ids import checksum_address
from kint.custody.local_secret import LocalSecret, load_local_secret, local_secret
from kint.paths import ensure_private_dir

if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount

SESSION_KEY_FILE = "session.key"
SESSION_KEY_OLD_FILE = "session.key.old"
_SESSION_LOCK_FILE = "session-key.lock"

# eth-keyfile's scrypt default (n = 2^18, r = 8, p = 1).
SESSION_SCRYPT_N = 2**18

_KEYSTORE_MAX = 1 << 16
# The most a keystore from elsewhere may make one unlock cost: 1 GiB of scrypt memory
# (geth's "standard" is 256 MiB), 10 million PBKDF2 rounds.
_SCRYPT_MEM_MAX = 1 << 30
_SCRYPT_P_MAX = 16
_PBKDF2_C_MAX = 10_000_000
# Fixed-size fields: their bytes, for padding back dropped leading zeros.
_IV_LEN = 16
_CIPHERTEXT_LEN = 32  # a secp256k1 private key
_MAC_LEN = 32
_HEX = re.compile(r"(?:0[xX])?([0-9a-fA-F]*)")
_ADDRESS = re.compile(r"(?:0[xX])?([0-9a-fA-F]{40})")


def session_key_path(home: Path | None = None, *, old: bool = False) -> Path:
    return home_or_default(home) / (SESSION_KEY_OLD_FILE if old else SESSION_KEY_FILE)


# -- reading a keystore --------------------------------------------------------------------


def _lower_keys(value: Any) -> Any:
    """Every object key lowercased, as eth-keyfile does before reading."""
    if isinstance(value, dict):
        return {k.lower() if isinstance(k, str) else k: _lower_keys(v) for k, v in value.items()}
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _hex_field(path: Path, value: Any, what: str, *, size: int | None = None) -> str:
    """`value` as lowercase hex without 0x. With `size` (a fixed-size field), 1 to `size`
    bytes, left-padded with zero bytes to `size`; an odd digit count is read as a dropped
    leading zero. Without `size` (the salt), whole bytes as written, at least one."""
    match = _HEX.fullmatch(value) if isinstance(value, str) else None
    digits = match.group(1).lower() if match else ""
    if not digits:
        raise SessionKeyCorrupt(path, f"has no valid {what} (not hex)")
    if size is None:
        if len(digits) % 2:
            raise SessionKeyCorrupt(path, f"has a garbled {what} (an odd number of digits)")
        return digits
    if len(digits) > 2 * size:
        raise SessionKeyCorrupt(path, f"has a {what} longer than {size} bytes (garbled)")
    return digits.rjust(2 * size, "0")


def normalize_keystore(data: Any, path: Path) -> dict[str, Any]:
    """A V3 keystore as any reader takes it: keys lowercased, hex fields lowercase without
    0x, fixed-size fields at full length. SessionKeyCorrupt (naming `path`) when it is not a
    complete V3 keystore kint can open."""
    data = _lower_keys(data)
    if not isinstance(data, dict):
        raise SessionKeyCorrupt(path, "is not a V3 keystore (not a JSON object)")
    if data.get("version") != 3 or not _is_int(data.get("version")):
        raise SessionKeyCorrupt(path, "is not a V3 keystore")
    out: dict[str, Any] = {k: v for k, v in data.items() if k not in ("address", "crypto")}
    if "address" in data:
        match = _ADDRESS.fullmatch(data["address"]) if isinstance(data["address"], str) else None
        if match is None:
            raise SessionKeyCorrupt(path, "has an address that is not 20 bytes of hex")
        out["address"] = match.group(1).lower()
    crypto = data.get("crypto")
    if not isinstance(crypto, dict):
        raise SessionKeyCorrupt(path, "is not a complete V3 keystore (no crypto)")
    cipher = crypto.get("cipher")
    if not isinstance(cipher, str) or cipher.lower() != "aes-128-ctr":
        raise SessionKeyCorrupt(path, "is not an aes-128-ctr keystore")
    params = crypto.get("cipherparams")
    if not isinstance(params, dict) or "iv" not in params:
        raise SessionKeyCorrupt(path, "is not a complete V3 keystore (no iv)")
    if "ciphertext" not in crypto or "mac" not in crypto:
        raise SessionKeyCorrupt(path, "is not a complete V3 keystore (no ciphertext or mac)")
    kdf = crypto.get("kdf")
    kdfparams = crypto.get("kdfparams")
    if not isinstance(kdfparams, dict):
        raise SessionKeyCorrupt(path, "is not a complete V3 keystore (no kdfparams)")
    dklen = kdfparams.get("dklen")
    if not (_is_int(dklen) and 32 <= dklen <= 64):
        raise SessionKeyCorrupt(path, "has a kdf dklen kint does not accept")
    salt = _hex_field(path, kdfparams.get("salt"), "kdf salt")
    if kdf == "scrypt":
        n, r, p = kdfparams.get("n"), kdfparams.get("r"), kdfparams.get("p")
        if not (_is_int(n) and _is_int(r) and _is_int(p) and n >= 2 and n & (n - 1) == 0
                and r >= 1 and 1 <= p <= _SCRYPT_P_MAX and 128 * n * r <= _SCRYPT_MEM_MAX):
            raise SessionKeyCorrupt(path, "has scrypt parameters kint does not accept")
        new_params: dict[str, Any] = {"dklen": dklen, "n": n, "r": r, "p": p, "salt": salt}
    elif kdf == "pbkdf2":
        c, prf = kdfparams.get("c"), kdfparams.get("prf")
        if not (_is_int(c) and 1 <= c <= _PBKDF2_C_MAX and prf == "hmac-sha256"):
            raise SessionKeyCorrupt(path, "has pbkdf2 parameters kint does not accept")
        new_params = {"c": c, "dklen": dklen, "prf": prf, "salt": salt}
    else:
        raise SessionKeyCorrupt(path, "uses a key derivation kint does not know")
    out["crypto"] = {
        "cipher": "aes-128-ctr",
        "cipherparams": {"iv": _hex_field(path, params["iv"], "iv", size=_IV_LEN)},
        "ciphertext": _hex_field(path, crypto["ciphertext"], "ciphertext",
                                 size=_CIPHERTEXT_LEN),
        "kdf": kdf,
        "kdfparams": new_params,
        "mac": _hex_field(path, crypto["mac"], "mac", size=_MAC_LEN),
    }
    return out


def read_keystore(path: Path) -> dict[str, Any]:
    """The keystore at `path`, normalised (see `normalize_keystore`). SessionKeyMissing when
    there is none; SessionKeyCorrupt, naming it, when it is truncated or garbled."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_KEYSTORE_MAX + 1)
    except FileNotFoundError:
        raise SessionKeyMissing(path) from None
    except OSError as err:
        raise SessionKeyCorrupt(path, f"cannot be read ({err.strerror})") from None
    if len(raw) > _KEYSTORE_MAX:
        raise SessionKeyCorrupt(path, "is too large to be a keystore")
    if raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark some editors add
        raw = raw[3:]
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise SessionKeyCorrupt(path, "is not valid JSON (truncated or garbled)") from None
    return normalize_keystore(data, path)


def keystore_address(data: dict[str, Any]) -> str | None:
    """The checksummed address a normalised keystore names, or None when it names none."""
    address = data.get("address")
    return checksum_address(address) if address else None


def decrypt_keystore(data: dict[str, Any], password: str, path: Path, source: str,
                     *, home: Path | None = None) -> LocalAccount:
    """Open a normalised keystore. SessionKeyLocked when the password does not open it;
    SessionKeyCorrupt when it opens to something that is not the key it names."""
    from eth_account import Account

    try:
        with scrypt_lock(home if home is not None else path.parent):
            private_key = Account.decrypt(data, password)
    except ValueError as err:
        if "MAC" in str(err):  # eth-keyfile: ValueError("MAC mismatch") for a wrong password
            raise SessionKeyLocked(path, source) from None
        raise SessionKeyCorrupt(path, "does not decrypt to a private key") from None
    except (KeyError, TypeError, AssertionError):
        raise SessionKeyCorrupt(path, "is not a complete V3 keystore") from None
    try:
        account: LocalAccount = Account.from_key(private_key)
    except Exception:
        raise SessionKeyCorrupt(path, "does not decrypt to a valid private key") from None
    named = keystore_address(data)
    if named is not None and account.address != named:
        raise SessionKeyCorrupt(path, "opens to a key that is not the address it names")
    return account


# -- writing -------------------------------------------------------------------------------


def encrypt_keystore(private_key: bytes, password: str, *, scrypt_n: int = SESSION_SCRYPT_N,
                     home: Path | None = None) -> tuple[bytes, str]:
    """(file bytes, checksummed address) of a V3 scrypt keystore for `private_key`, with
    every fixed-size hex field written at full length."""
    from eth_account import Account

    with scrypt_lock(home):
        keystore = Account.encrypt(private_key, password, kdf="scrypt", iterations=scrypt_n)
    crypto = keystore["crypto"]
    crypto["cipherparams"]["iv"] = crypto["cipherparams"]["iv"].rjust(2 * _IV_LEN, "0")
    crypto["ciphertext"] = crypto["ciphertext"].rjust(2 * _CIPHERTEXT_LEN, "0")
    crypto["mac"] = crypto["mac"].rjust(2 * _MAC_LEN, "0")
    address = checksum_address(keystore["address"])
    return orjson.dumps(keystore, option=orjson.OPT_INDENT_2) + b"\n", address


# -- the session key -----------------------------------------------------------------------


def session_address(home: Path | None = None, *, old: bool = False) -> str:
    """The session key's checksummed address, read from the keystore without unlocking."""
    path = session_key_path(home, old=old)
    address = keystore_address(read_keystore(path))
    if address is None:
        raise SessionKeyCorrupt(path, "does not name its address")
    return address


def session_key_exists(home: Path | None = None) -> bool:
    path = session_key_path(home)
    return path.exists() or path.is_symlink()


def create_session_key(home: Path | None = None, *, secret: LocalSecret | None = None,
                       scrypt_n: int = SESSION_SCRYPT_N) -> tuple[str, bool]:
    """(address, existed): `created: 0x...` when existed is False, `exists: 0x...` when an
    existing key was left alone. An existing file that is not a keystore is refused
    (SessionKeyCorrupt), never replaced. `scrypt_n` is lowered by tests only."""
    home = home_or_default(home)
    path = session_key_path(home)
    if session_key_exists(home):
        return session_address(home), True
    ensure_private_dir(home)
    secret = secret or local_secret(home)
    private_key = os.urandom(32)
    data, address = encrypt_keystore(private_key, secret.password, scrypt_n=scrypt_n,
                                     home=home)
    try:
        write_new(path, data)
    except FileExistsError:  # another process made one first: theirs stands
        return session_address(home), True
    return address, False


def unlock_session_key(home: Path | None = None, *, old: bool = False,
                       secret: LocalSecret | None = None) -> LocalAccount:
    """Open `session.key` (or `session.key.old`) with the local secret. Loading only: no
    secret is created (NoLocalPassphrase when there is none). Keep the returned account."""
    home = home_or_default(home)
    path = session_key_path(home, old=old)
    data = read_keystore(path)
    secret = secret or load_local_secret(home)
    return decrypt_keystore(data, secret.password, path, secret.source, home=home)


def rotate_session_key(home: Path | None = None, *, secret: LocalSecret | None = None,
                       scrypt_n: int = SESSION_SCRYPT_N) -> tuple[str | None, str]:
    """Move `session.key` to `session.key.old` (replacing an older one), then create a new
    key. Returns (old address or None, new address). Does not touch the chain.

    The current file is moved whatever it holds (a key this machine cannot open any more is
    exactly what one rotates away from). The new keystore is made first, and `session.key`
    always names a complete keystore: the current one is hard-linked to `session.key.old`,
    then the new one renamed over it.
    """
    home = home_or_default(home)
    path = session_key_path(home)
    old_path = session_key_path(home, old=True)
    ensure_private_dir(home)
    with home_lock(home, _SESSION_LOCK_FILE):
        secret = secret or local_secret(home)
        data, address = encrypt_keystore(os.urandom(32), secret.password, scrypt_n=scrypt_n,
                                         home=home)
        old_address: str | None = None
        if os.path.lexists(path):
            try:
                old_address = session_address(home)
            except (SessionKeyCorrupt, SessionKeyMissing):
                old_address = None
            staged_old = home / f".{SESSION_KEY_OLD_FILE}.{os.getpid()}"
            if os.path.lexists(staged_old):
                os.unlink(staged_old)
            os.link(path, staged_old, follow_symlinks=False)
            os.replace(staged_old, old_path)
        write_private(path, data)  # its folder's fsync makes the link and rename durable too
    return old_address, address
