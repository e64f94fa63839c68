"""This machine's keys and the space's data key: how they are made, kept and opened (DESIGN
§8, seed 001 "Files under KINT_HOME").

Why it is built this way:

- The *machine secret* never leaves the machine. It comes from the OS keyring when one
  works, else from `KINT_SESSION_PASSPHRASE`, else from `local.secret` (0600). It is the
  password of `session.key` and the key behind every `vault-<space>.aes`, so a copied
  KINT_HOME alone opens nothing.
- The *session key* (`session.key`) is an ordinary V3 scrypt keystore, so any Ethereum
  tool can open it with the machine secret. An unlock costs ~1 s and ~260 MB, so at most
  one runs at a time on the machine (a flock in the temp folder); callers unlock once and
  keep the account, never per request.
- Each space writes from its own *writer key*, derived (HKDF) from the session key and the
  space id: tenants never share a nonce sequence, and nothing extra has to be stored.
- The *data key* of a space is wrapped for whoever may read it: once under the recovery
  code (scrypt, so a guessed code costs work) and once per enrolled machine (under its
  session key). A wrap binds its kind, its tag and the space into the AES-GCM AAD, so a
  wrap cannot be moved to another space or passed off as another machine's.
- The *vault* caches the data key under the machine secret with an expiry bound into the
  AAD: editing the expiry breaks the tag. A vault that does not open is named and left as
  it is, never replaced behind the user's back.

Every file is written 0600 and atomically (`kint.paths.atomic_write`); files that must not
be clobbered by a concurrent writer (`local.secret`, `session.key`) are published with a
hard link, which fails if the name already exists. No message here ever contains a secret,
a key, a code, or the bytes of a file.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_hash.auto import keccak
from eth_utils import to_checksum_address

from kint.paths import atomic_write, ensure_private_dir

# -- constants -----------------------------------------------------------------------------

KEYRING_SERVICE = "kint"
PASSPHRASE_ENV = "KINT_SESSION_PASSPHRASE"
VAULT_DAYS_ENV = "KINT_VAULT_DAYS"
DEFAULT_VAULT_DAYS = 30
MAX_VAULT_DAYS = 3650

SESSION_KEY_FILE = "session.key"
SESSION_KEY_OLD_FILE = "session.key.old"
LOCAL_SECRET_FILE = "local.secret"

# eth-keyfile's scrypt default (n=2**18, r=8, p=1): ~1 s and ~260 MB per unlock.
SESSION_SCRYPT_N = 262144
_SESSION_SCRYPT_N_MAX = SESSION_SCRYPT_N

# The recovery wrap's KEK: scrypt over the 160-bit code (the code itself is the strength;
# scrypt only makes each guess cost something).
RECOVERY_SCRYPT_N = 2**15
RECOVERY_SCRYPT_R = 8
RECOVERY_SCRYPT_P = 1
_RECOVERY_N_RANGE = (2**1, 2**20)  # what a wrap read from elsewhere may ask for
_RECOVERY_R_MAX = 32
_RECOVERY_P_MAX = 16
_SCRYPT_MEM_MAX = 1 << 30  # 128 * n * r bytes

RECOVERY_CODE_BYTES = 20
_RECOVERY_ALPHABET = re.compile(r"^[A-Z2-7]{32}$")
_RECOVERY_SHAPE = ("a recovery code is 32 characters, letters A-Z and digits 2-7, written as "
                   "8 groups of 4 separated by dashes (case and spaces do not matter)")

WRITER_SALT = b"kint-writer-v1"
MACHINE_WRAP_SALT = b"kint-machine-wrap-v1"
VAULT_SALT = b"kint-vault-v1"
WRAP_AAD_PREFIX = b"kint-wrap-v1|"
VAULT_AAD_PREFIX = b"kint-vault-v1|"

WRAP_VERSION = 1
VAULT_VERSION = 1
DATA_KEY_BYTES = 32
KEY_ID_BYTES = 8

# secp256k1 group order: a private key must be in [1, N-1].
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141

_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")
_ADDRESS_LOWER = re.compile(r"^0x[0-9a-f]{40}$")
_NOTHING_DROPPED = "nothing was dropped, the changes stay in the store until the next push"

SecretSource = Literal["keyring", "passphrase", "local.secret"]


# -- errors --------------------------------------------------------------------------------


class KeysError(Exception):
    """Base of every refusal in this module. Messages are one line and hold no secret."""


class BadSpaceId(KeysError, ValueError):
    def __init__(self, what: str = "space id") -> None:
        super().__init__(f"{what} must be 64 hex characters (a 32-byte space id)")


class MachineSecretUnsafe(KeysError):
    """local.secret exists but is not a private regular file of this user."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path} {why}; kint will not use it as the machine secret "
                         f"(make it a regular file with mode 0600, or remove it)")
        self.path = path


class MachineSecretCorrupt(KeysError):
    """The machine secret's store holds something that is not a machine secret."""

    def __init__(self, where: str) -> None:
        super().__init__(f"{where} does not hold a machine secret (64 hex characters); "
                         f"it was left as it is")
        self.where = where


class ScryptLockUnsafe(KeysError):
    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"the unlock lock {path} {why}; remove it and try again")
        self.path = path


class SessionKeyMissing(KeysError):
    def __init__(self, path: Path) -> None:
        super().__init__(f"no session key at {path}; run kint connect to make one")
        self.path = path


class SessionKeyExists(KeysError):
    def __init__(self, path: Path) -> None:
        super().__init__(f"a session key already exists at {path}; use kint session-key "
                         f"rotate to replace it")
        self.path = path


class SessionKeyCorrupt(KeysError):
    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}; it was left as it is")
        self.path = path
        self.why = why


class SessionKeyLocked(KeysError):
    """The keystore does not open with the machine secret this machine has now."""

    def __init__(self, path: Path, source: str) -> None:
        super().__init__(
            f"{path} does not open with the machine secret from {source}; give the one it "
            f"was made with (the same OS keyring entry, {PASSPHRASE_ENV}, or local.secret)")
        self.path = path
        self.source = source


class BadRecoveryCode(KeysError, ValueError):
    def __init__(self) -> None:
        super().__init__(_RECOVERY_SHAPE)


class WrongSecret(KeysError):
    def __init__(self, what: str) -> None:
        super().__init__(what)


class BadWraps(KeysError, ValueError):
    def __init__(self, why: str) -> None:
        super().__init__(f"bad key wraps: {why}")
        self.why = why


class VaultMissing(KeysError):
    def __init__(self, path: Path, space16: str) -> None:
        super().__init__(f"no data key for space {space16} on this machine ({path.name} is "
                         f"missing): {_NOTHING_DROPPED}")
        self.path = path
        self.space16 = space16


class VaultExpired(KeysError):
    def __init__(self, path: Path, space16: str, expires_at: int) -> None:
        when = datetime.fromtimestamp(expires_at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        super().__init__(f"the data key of space {space16} expired on {when}: {_NOTHING_DROPPED}")
        self.path = path
        self.space16 = space16
        self.expires_at = expires_at


class VaultCorrupt(KeysError):
    """A vault file that is garbled, tampered with, or sealed under another machine secret.
    Named, never rewritten."""

    def __init__(self, path: Path, why: str = "is garbled or was tampered with") -> None:
        super().__init__(f"{path} {why}; it was left as it is")
        self.path = path
        self.why = why


# -- small helpers -------------------------------------------------------------------------


def _space_bytes(space_id: str) -> bytes:
    if not isinstance(space_id, str) or not _HEX64.match(space_id):
        raise BadSpaceId()
    return bytes.fromhex(space_id)


def _check_private_key(key: bytes, what: str = "session private key") -> None:
    if not isinstance(key, (bytes, bytearray)) or len(key) != 32:
        raise ValueError(f"{what} must be 32 bytes")


def _hkdf(secret: bytes, salt: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=info).derive(secret)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_hex(value: Any, nbytes: int) -> bool:
    return (isinstance(value, str) and len(value) == 2 * nbytes
            and re.fullmatch(r"[0-9a-f]*", value) is not None)


def _write_new(path: Path, data: bytes) -> None:
    """Write `path` 0600 and atomically, refusing (FileExistsError) if it already exists.

    The bytes go to a private temp name through `atomic_write`, then a hard link publishes
    them under `path`: link never replaces an existing name, so two processes racing to
    create the same file cannot overwrite each other.
    """
    tmp = path.with_name(f".{path.name}.new-{os.getpid()}-{os.urandom(4).hex()}")
    atomic_write(tmp, data)
    try:
        os.link(tmp, path)
    finally:
        os.unlink(tmp)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def scrypt_lock_path() -> Path:
    return Path(tempfile.gettempdir()) / f"kint-scrypt-{os.getuid()}.lock"


def _secret_lock_path() -> Path:
    return Path(tempfile.gettempdir()) / f"kint-secret-{os.getuid()}.lock"


@contextlib.contextmanager
def _machine_lock(path: Path) -> Iterator[None]:
    """An exclusive flock on `path`, shared by every kint process of this user.

    The lock file sits in the shared temp folder, so it is opened without following a
    symlink and refused if another user owns it.
    """
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as err:
        raise ScryptLockUnsafe(path, f"cannot be opened ({err.strerror})") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or not stat.S_ISREG(st.st_mode):
            raise ScryptLockUnsafe(path, "is not a regular file of this user")
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def scrypt_lock() -> contextlib.AbstractContextManager[None]:
    """The machine-wide lock held around every session-key scrypt (one at a time)."""
    return _machine_lock(scrypt_lock_path())


# -- the machine secret --------------------------------------------------------------------


@dataclass(frozen=True)
class MachineSecret:
    """The machine secret and where it came from. `repr` never shows the secret."""

    secret: bytes = field(repr=False)
    source: SecretSource

    @property
    def password(self) -> str:
        """The keystore password: the secret as hex, whatever its source."""
        return self.secret.hex()


def _keyring_is_useless(backend: Any) -> bool:
    from keyring.backends import fail, null

    if isinstance(backend, (fail.Keyring, null.Keyring)):
        return True
    try:
        from keyring.backends.chainer import ChainerBackend
    except ImportError:  # pragma: no cover - keyring always ships it
        return False
    return isinstance(backend, ChainerBackend) and not list(backend.backends)


def _decode_hex_secret(value: str, where: str) -> bytes:
    value = value.strip()
    if not _HEX64.match(value):
        raise MachineSecretCorrupt(where)
    return bytes.fromhex(value)


def _from_keyring(home: Path) -> bytes | None:
    """The secret from the OS keyring, made there if the keyring works and has none.

    None when there is no usable keyring: the package fails to load, the backend is the
    fail or null one, or any keyring call raises.
    """
    username = f"machine-secret:{home}"
    where = f"the OS keyring entry {KEYRING_SERVICE}/{username}"
    try:
        import keyring

        backend = keyring.get_keyring()
        if _keyring_is_useless(backend):
            return None
        value = backend.get_password(KEYRING_SERVICE, username)
    except Exception:
        return None
    if value is not None:
        return _decode_hex_secret(value, where)
    with _machine_lock(_secret_lock_path()):
        try:
            value = backend.get_password(KEYRING_SERVICE, username)
            if value is None:
                backend.set_password(KEYRING_SERVICE, username, os.urandom(32).hex())
                value = backend.get_password(KEYRING_SERVICE, username)
        except Exception:
            return None
    if value is None:  # the keyring accepted the secret but does not give it back
        return None
    return _decode_hex_secret(value, where)


def _from_local_file(home: Path) -> bytes:
    path = home / LOCAL_SECRET_FILE
    try:
        st = path.lstat()
    except FileNotFoundError:
        ensure_private_dir(home)
        with _machine_lock(_secret_lock_path()):
            try:
                _write_new(path, (os.urandom(32).hex() + "\n").encode())
            except FileExistsError:
                pass  # another process made it first: read theirs
        st = path.lstat()
    if not stat.S_ISREG(st.st_mode):
        raise MachineSecretUnsafe(path, "is not a regular file")
    if st.st_uid != os.getuid():
        raise MachineSecretUnsafe(path, f"is owned by uid {st.st_uid}, not by this user")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise MachineSecretUnsafe(
            path, f"is readable or writable by others (mode {stat.S_IMODE(st.st_mode):04o})")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read(4096)
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise MachineSecretCorrupt(str(path)) from None
    return _decode_hex_secret(text, str(path))


def machine_secret(home: Path) -> MachineSecret:
    """This machine's secret: OS keyring, else KINT_SESSION_PASSPHRASE, else local.secret.

    The keyring entry is service "kint", username "machine-secret:<home>"; when the keyring
    works and has none, 32 random bytes are made and stored there as hex.
    """
    home = Path(home).absolute()
    secret = _from_keyring(home)
    if secret is not None:
        return MachineSecret(secret, "keyring")
    passphrase = os.environ.get(PASSPHRASE_ENV)
    if passphrase:
        return MachineSecret(passphrase.encode("utf-8"), "passphrase")
    return MachineSecret(_from_local_file(home), "local.secret")


# -- the session key -----------------------------------------------------------------------


def session_key_path(home: Path, *, old: bool = False) -> Path:
    return Path(home) / (SESSION_KEY_OLD_FILE if old else SESSION_KEY_FILE)


def _encrypt_keystore(private_key: bytes, secret: MachineSecret, scrypt_n: int) -> bytes:
    with scrypt_lock():
        keystore = Account.encrypt(private_key, secret.password, kdf="scrypt",
                                   iterations=scrypt_n)
    return orjson.dumps(keystore, option=orjson.OPT_INDENT_2)


def _read_keystore(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SessionKeyMissing(path) from None
    except OSError as err:
        raise SessionKeyCorrupt(path, f"cannot be read ({err.strerror})") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise SessionKeyCorrupt(path, "is not valid JSON (truncated or garbled)") from None
    if not isinstance(data, dict) or data.get("version") != 3:
        raise SessionKeyCorrupt(path, "is not a V3 keystore")
    address = data.get("address")
    if not isinstance(address, str) or not re.fullmatch(r"(0x)?[0-9a-fA-F]{40}", address):
        raise SessionKeyCorrupt(path, "has no valid address")
    crypto = data.get("crypto")
    if not isinstance(crypto, dict) or crypto.get("kdf") != "scrypt":
        raise SessionKeyCorrupt(path, "is not a scrypt keystore")
    params = crypto.get("kdfparams")
    if not isinstance(params, dict):
        raise SessionKeyCorrupt(path, "has no scrypt parameters")
    n, r, p = params.get("n"), params.get("r"), params.get("p")
    if not (_is_int(n) and _is_int(r) and _is_int(p) and 2 <= n <= _SESSION_SCRYPT_N_MAX
            and n & (n - 1) == 0 and 1 <= r <= 8 and 1 <= p <= 4
            and params.get("dklen") == 32):
        raise SessionKeyCorrupt(path, "has scrypt parameters kint does not accept")
    iv = crypto.get("cipherparams", {}).get("iv") if isinstance(crypto.get("cipherparams"),
                                                                 dict) else None
    if not (crypto.get("cipher") == "aes-128-ctr" and _is_hexish(iv, 16)
            and _is_hexish(crypto.get("ciphertext"), 32) and _is_hexish(crypto.get("mac"), 32)
            and isinstance(params.get("salt"), str)
            and re.fullmatch(r"(?:[0-9a-fA-F]{2}){1,64}", params["salt"])):
        raise SessionKeyCorrupt(path, "is not a complete V3 keystore")
    return data


def _is_hexish(value: Any, nbytes: int) -> bool:
    """`nbytes` of hex in either case, as keystores from any tool write it."""
    return (isinstance(value, str) and len(value) == 2 * nbytes
            and re.fullmatch(r"[0-9a-fA-F]*", value) is not None)


def _keystore_address(data: dict[str, Any]) -> str:
    address = data["address"]
    return to_checksum_address(address if address.startswith("0x") else "0x" + address)


def session_address(home: Path, *, old: bool = False) -> str:
    """The session key's address (checksummed), read from the keystore without unlocking."""
    return _keystore_address(_read_keystore(session_key_path(home, old=old)))


def create_session_key(home: Path, *, secret: MachineSecret | None = None,
                       scrypt_n: int = SESSION_SCRYPT_N) -> str:
    """Make `session.key` (refused if one exists) and return its checksummed address.

    `scrypt_n` exists for tests only; production always uses the default.
    """
    home = Path(home)
    path = session_key_path(home)
    if path.exists() or path.is_symlink():
        raise SessionKeyExists(path)
    ensure_private_dir(home)
    secret = secret or machine_secret(home)
    account = Account.create()
    data = _encrypt_keystore(bytes(account.key), secret, scrypt_n)
    try:
        _write_new(path, data)
    except FileExistsError:
        raise SessionKeyExists(path) from None
    return account.address


def unlock_session_key(home: Path, *, old: bool = False,
                       secret: MachineSecret | None = None) -> LocalAccount:
    """Open `session.key` (or `session.key.old`) with the machine secret.

    Costs one scrypt (~1 s, ~260 MB); at most one runs at a time on this machine. Keep
    the returned account; do not unlock per request.
    """
    home = Path(home)
    path = session_key_path(home, old=old)
    data = _read_keystore(path)
    secret = secret or machine_secret(home)
    try:
        with scrypt_lock():
            private_key = Account.decrypt(data, secret.password)
    except ValueError:
        # eth-keyfile raises ValueError("MAC mismatch") for a wrong password.
        raise SessionKeyLocked(path, secret.source) from None
    except (KeyError, TypeError):
        raise SessionKeyCorrupt(path, "is not a complete V3 keystore") from None
    account: LocalAccount = Account.from_key(private_key)
    if account.address != _keystore_address(data):
        raise SessionKeyCorrupt(path, "opens to a key that is not the address it names")
    return account


def rotate_session_key(home: Path, *, secret: MachineSecret | None = None,
                       scrypt_n: int = SESSION_SCRYPT_N) -> tuple[str, str]:
    """Replace `session.key` with a new key, keeping the previous one as `session.key.old`.

    Order: unlock the current key (so a key this machine cannot open is never retired),
    write the new keystore to a temp name, copy the current one to `session.key.old`, then
    rename the new one over `session.key`. A crash at any point leaves `session.key`
    holding either the old or the new key, and the old key always exists somewhere.
    Returns (old_address, new_address). `scrypt_n` exists for tests only.
    """
    home = Path(home)
    path = session_key_path(home)
    old_path = session_key_path(home, old=True)
    secret = secret or machine_secret(home)
    old_account = unlock_session_key(home, secret=secret)
    current = path.read_bytes()
    new_account = Account.create()
    new_data = _encrypt_keystore(bytes(new_account.key), secret, scrypt_n)
    staged = home / f".{SESSION_KEY_FILE}.rotating"
    atomic_write(staged, new_data)
    try:
        atomic_write(old_path, current)
        os.replace(staged, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)
        raise
    _fsync_dir(home)
    return old_account.address, new_account.address


# -- the writer key of a space -------------------------------------------------------------


def writer_account(session_private_key: bytes, space_id: str) -> LocalAccount:
    """The space's writer key: HKDF-SHA256(session key, salt "kint-writer-v1", info space).

    Deterministic: the same session key and space always give the same writer. A scalar
    outside [1, n-1] (odds ~2^-128) is retried with a 4-byte counter appended to info.
    """
    _check_private_key(bytes(session_private_key))
    info = _space_bytes(space_id)
    for counter in range(0, 256):
        suffix = b"" if counter == 0 else counter.to_bytes(4, "big")
        scalar = _hkdf(bytes(session_private_key), WRITER_SALT, info + suffix)
        if 0 < int.from_bytes(scalar, "big") < SECP256K1_N:
            return Account.from_key(scalar)
    raise RuntimeError("no valid writer key in 256 tries")  # pragma: no cover


# -- the data key --------------------------------------------------------------------------


def new_data_key() -> bytes:
    return os.urandom(DATA_KEY_BYTES)


def data_key_id(key: bytes) -> bytes:
    """First 8 bytes of keccak256(key): names a data key without revealing it."""
    return keccak(bytes(key))[:KEY_ID_BYTES]


def _check_data_key(key: bytes) -> None:
    if not isinstance(key, (bytes, bytearray)) or len(key) != DATA_KEY_BYTES:
        raise ValueError("a data key must be 32 bytes")


# -- the recovery code ---------------------------------------------------------------------


def format_recovery_code(code: bytes) -> str:
    if not isinstance(code, (bytes, bytearray)) or len(code) != RECOVERY_CODE_BYTES:
        raise BadRecoveryCode()
    text = base64.b32encode(bytes(code)).decode("ascii")
    return "-".join(text[i:i + 4] for i in range(0, len(text), 4))


def new_recovery_code() -> str:
    """160 random bits as base32 (RFC 4648, no padding): 8 groups of 4, joined by '-'."""
    return format_recovery_code(os.urandom(RECOVERY_CODE_BYTES))


def parse_recovery_code(text: str) -> bytes:
    """The 20 bytes of a recovery code. Case, spaces and dashes do not matter; anything
    else is refused with `BadRecoveryCode` (which says the expected shape, never the input)."""
    if not isinstance(text, str):
        raise BadRecoveryCode()
    compact = re.sub(r"[\s-]", "", text).upper()
    if not _RECOVERY_ALPHABET.match(compact):
        raise BadRecoveryCode()
    try:
        return base64.b32decode(compact)
    except (binascii.Error, ValueError):
        raise BadRecoveryCode() from None


# -- wraps ---------------------------------------------------------------------------------


def _recovery_aad(space: bytes) -> bytes:
    return WRAP_AAD_PREFIX + b"recovery|" + space


def _machine_aad(tag: str, space: bytes) -> bytes:
    return WRAP_AAD_PREFIX + b"machine|" + tag.encode("ascii") + b"|" + space


def _scrypt_kek(code: bytes, salt: bytes, n: int, r: int, p: int) -> bytes:
    return Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(bytes(code))


def _machine_kek(session_private_key: bytes, space: bytes) -> bytes:
    return _hkdf(bytes(session_private_key), MACHINE_WRAP_SALT, space)


def wrap_with_recovery_code(data_key: bytes, code_bytes: bytes, space_id: str, *,
                            n: int = RECOVERY_SCRYPT_N, r: int = RECOVERY_SCRYPT_R,
                            p: int = RECOVERY_SCRYPT_P) -> dict[str, Any]:
    """The data key under a KEK made by scrypt from the recovery code's 20 bytes.

    `n`, `r`, `p` exist for tests only; production always uses the defaults (n=2**15, r=8,
    p=1). They are recorded in the wrap, so unwrap uses whatever the wrap says.
    """
    _check_data_key(data_key)
    if not isinstance(code_bytes, (bytes, bytearray)) or len(code_bytes) != RECOVERY_CODE_BYTES:
        raise BadRecoveryCode()
    space = _space_bytes(space_id)
    salt = os.urandom(16)
    kek = _scrypt_kek(code_bytes, salt, n, r, p)
    nonce = os.urandom(12)
    ct = AESGCM(kek).encrypt(nonce, bytes(data_key), _recovery_aad(space))
    return {"v": WRAP_VERSION, "kind": "recovery", "tag": "recovery",
            "kdf": {"name": "scrypt", "n": n, "r": r, "p": p, "salt": salt.hex()},
            "nonce": nonce.hex(), "ct": ct.hex(), "key_id": data_key_id(data_key).hex()}


def wrap_for_machine(data_key: bytes, session_private_key: bytes, session_address: str,
                     space_id: str) -> dict[str, Any]:
    """The data key under a KEK made by HKDF from this machine's session key.

    The tag is the session address in lowercase; kind and tag are bound into the AAD.
    """
    _check_data_key(data_key)
    _check_private_key(bytes(session_private_key))
    space = _space_bytes(space_id)
    derived = Account.from_key(bytes(session_private_key)).address
    if not isinstance(session_address, str) or session_address.lower() != derived.lower():
        raise ValueError("session_address is not the address of session_private_key")
    tag = derived.lower()
    kek = _machine_kek(session_private_key, space)
    nonce = os.urandom(12)
    ct = AESGCM(kek).encrypt(nonce, bytes(data_key), _machine_aad(tag, space))
    return {"v": WRAP_VERSION, "kind": "machine", "tag": tag,
            "kdf": {"name": "hkdf-sha256"},
            "nonce": nonce.hex(), "ct": ct.hex(), "key_id": data_key_id(data_key).hex()}


_WRAP_FIELDS = frozenset({"v", "kind", "tag", "kdf", "nonce", "ct", "key_id"})


def _check_wrap(wrap: Any, where: str = "wrap") -> None:
    """Raise BadWraps naming the first thing wrong with `wrap`'s shape."""
    if not isinstance(wrap, dict):
        raise BadWraps(f"{where} is not an object")
    keys = set(wrap)
    if keys != _WRAP_FIELDS:
        missing, extra = sorted(_WRAP_FIELDS - keys), sorted(str(k) for k in keys - _WRAP_FIELDS)
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + \
                ([f"unknown {', '.join(extra)}"] if extra else [])
        raise BadWraps(f"{where} has the wrong fields ({'; '.join(parts)})")
    if not _is_int(wrap["v"]) or wrap["v"] != WRAP_VERSION:
        raise BadWraps(f"{where} has version {wrap['v']!r}, kint reads version {WRAP_VERSION}")
    kind, tag, kdf = wrap["kind"], wrap["tag"], wrap["kdf"]
    if not isinstance(kdf, dict):
        raise BadWraps(f"{where}: kdf is not an object")
    if kind == "recovery":
        if tag != "recovery":
            raise BadWraps(f"{where}: a recovery wrap's tag must be \"recovery\"")
        if set(kdf) != {"name", "n", "r", "p", "salt"} or kdf["name"] != "scrypt":
            raise BadWraps(f"{where}: kdf must be scrypt with n, r, p and salt")
        n, r, p = kdf["n"], kdf["r"], kdf["p"]
        if not (_is_int(n) and _RECOVERY_N_RANGE[0] <= n <= _RECOVERY_N_RANGE[1]
                and n & (n - 1) == 0):
            raise BadWraps(f"{where}: scrypt n must be a power of two up to 2**20")
        if not (_is_int(r) and 1 <= r <= _RECOVERY_R_MAX and _is_int(p)
                and 1 <= p <= _RECOVERY_P_MAX and 128 * n * r <= _SCRYPT_MEM_MAX):
            raise BadWraps(f"{where}: scrypt r or p is out of range")
        if not _is_hex(kdf["salt"], 16):
            raise BadWraps(f"{where}: kdf salt is not 16 bytes of lowercase hex")
    elif kind == "machine":
        if not isinstance(tag, str) or not _ADDRESS_LOWER.match(tag):
            raise BadWraps(f"{where}: a machine wrap's tag must be a lowercase 0x address")
        if kdf != {"name": "hkdf-sha256"}:
            raise BadWraps(f"{where}: a machine wrap's kdf must be hkdf-sha256")
    else:
        raise BadWraps(f"{where} has an unknown kind (expected recovery or machine)")
    if not _is_hex(wrap["nonce"], 12):
        raise BadWraps(f"{where}: nonce is not 12 bytes of lowercase hex")
    if not _is_hex(wrap["ct"], DATA_KEY_BYTES + 16):
        raise BadWraps(f"{where}: ct is not 48 bytes of lowercase hex")
    if not _is_hex(wrap["key_id"], KEY_ID_BYTES):
        raise BadWraps(f"{where}: key_id is not 8 bytes of lowercase hex")


def unwrap(wrap: dict[str, Any], *, space_id: str, recovery_code: bytes | None = None,
           session_private_key: bytes | None = None) -> bytes:
    """The data key inside `wrap`, opened with the recovery code's 20 bytes (recovery
    wraps) or the session private key (machine wraps).

    A code or key that does not open it raises `WrongSecret`; a wrap that is not shaped
    like one, or whose key_id does not name what it holds, raises `BadWraps`.
    """
    _check_wrap(wrap)
    space = _space_bytes(space_id)
    nonce, ct = bytes.fromhex(wrap["nonce"]), bytes.fromhex(wrap["ct"])
    if wrap["kind"] == "recovery":
        if recovery_code is None:
            raise ValueError("a recovery wrap opens with recovery_code")
        if not isinstance(recovery_code, (bytes, bytearray)) or \
                len(recovery_code) != RECOVERY_CODE_BYTES:
            raise BadRecoveryCode()
        kdf = wrap["kdf"]
        kek = _scrypt_kek(recovery_code, bytes.fromhex(kdf["salt"]), kdf["n"], kdf["r"],
                          kdf["p"])
        aad = _recovery_aad(space)
        wrong = "the recovery code does not open this space's key wrap (a wrong code?)"
    else:
        if session_private_key is None:
            raise ValueError("a machine wrap opens with session_private_key")
        _check_private_key(bytes(session_private_key))
        mine = Account.from_key(bytes(session_private_key)).address.lower()
        if mine != wrap["tag"]:
            raise WrongSecret(f"this key wrap is for session key {wrap['tag']}, not this "
                              f"machine's {mine}")
        kek = _machine_kek(session_private_key, space)
        aad = _machine_aad(wrap["tag"], space)
        wrong = "this machine's session key does not open its key wrap (altered or another space)"
    try:
        data_key = AESGCM(kek).decrypt(nonce, ct, aad)
    except InvalidTag:
        raise WrongSecret(wrong) from None
    if data_key_id(data_key).hex() != wrap["key_id"]:
        raise BadWraps("key_id does not name the key inside the wrap")
    return data_key


def encode_wraps(wraps: list[dict[str, Any]]) -> bytes:
    """The wraps as JSON bytes (the `wraps-<space>.json` file and the publishWraps blob)."""
    _check_wraps(wraps, unique=True)
    return orjson.dumps(wraps)


def decode_wraps(data: bytes) -> list[dict[str, Any]]:
    """Parse and strictly check a list of wraps; `BadWraps` names what is wrong."""
    try:
        wraps = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise BadWraps("not valid JSON (truncated or garbled)") from None
    _check_wraps(wraps)
    return wraps


def _check_wraps(wraps: Any, *, unique: bool = False) -> None:
    """Every wrap well formed; with `unique` (what kint itself publishes), no two wraps of
    the same kind and tag for the same key. Reading tolerates such repeats: they are
    harmless, and refusing them would lock every machine out of the space."""
    if not isinstance(wraps, list):
        raise BadWraps("not a list of wraps")
    seen: set[tuple[str, str, str]] = set()
    for i, wrap in enumerate(wraps):
        _check_wrap(wrap, f"wrap {i}")
        ident = (wrap["kind"], wrap["tag"], wrap["key_id"])
        if unique and ident in seen:
            raise BadWraps(f"wrap {i} repeats a {wrap['kind']} wrap for the same key")
        seen.add(ident)


# -- the vault -----------------------------------------------------------------------------


def vault_path(home: Path, space_id: str) -> Path:
    _space_bytes(space_id)
    return Path(home) / f"vault-{space_id.lower()[:16]}.aes"


def vault_days() -> int:
    """KINT_VAULT_DAYS as a whole number of days in [1, 3650]; anything else: 30."""
    raw = os.environ.get(VAULT_DAYS_ENV, "").strip()
    try:
        days = int(raw)
    except ValueError:
        return DEFAULT_VAULT_DAYS
    return days if 1 <= days <= MAX_VAULT_DAYS else DEFAULT_VAULT_DAYS


def _vault_key(machine_secret: bytes, space: bytes) -> bytes:
    return _hkdf(bytes(machine_secret), VAULT_SALT, space)


def _vault_aad(space: bytes, expires_at: int, key_id: bytes) -> bytes:
    return VAULT_AAD_PREFIX + space + b"|" + expires_at.to_bytes(8, "big") + b"|" + key_id


def write_vault(home: Path, space_id: str, data_key: bytes, machine_secret: bytes,
                now: float | None = None) -> int:
    """Seal the data key under the machine secret until now + KINT_VAULT_DAYS; returns
    the expiry (unix seconds)."""
    _check_data_key(data_key)
    if isinstance(machine_secret, MachineSecret):
        machine_secret = machine_secret.secret
    space = _space_bytes(space_id)
    now = time.time() if now is None else now
    expires_at = int(now) + vault_days() * 86400
    key_id = data_key_id(data_key)
    nonce = os.urandom(12)
    ct = AESGCM(_vault_key(machine_secret, space)).encrypt(
        nonce, bytes(data_key), _vault_aad(space, expires_at, key_id))
    body = {"v": VAULT_VERSION, "space": space_id.lower(), "expires_at": expires_at,
            "key_id": key_id.hex(), "nonce": nonce.hex(), "ct": ct.hex()}
    atomic_write(vault_path(home, space_id), orjson.dumps(body))
    return expires_at


def open_vault(home: Path, space_id: str, machine_secret: bytes,
               now: float | None = None) -> bytes:
    """The data key from `vault-<space16>.aes`.

    Raises `VaultMissing`, `VaultCorrupt` (garbled, tampered, or sealed under another
    machine secret; the file is named and never rewritten), or `VaultExpired`. The file is
    authenticated before its expiry is believed.
    """
    if isinstance(machine_secret, MachineSecret):
        machine_secret = machine_secret.secret
    space = _space_bytes(space_id)
    path = vault_path(home, space_id)
    space16 = space_id.lower()[:16]
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise VaultMissing(path, space16) from None
    except OSError as err:
        raise VaultCorrupt(path, f"cannot be read ({err.strerror})") from None
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise VaultCorrupt(path, "is not valid JSON (truncated or garbled)") from None
    if not isinstance(body, dict) or set(body) != {"v", "space", "expires_at", "key_id",
                                                   "nonce", "ct"}:
        raise VaultCorrupt(path, "does not have the fields of a vault")
    if body["v"] != VAULT_VERSION or not _is_int(body["v"]):
        raise VaultCorrupt(path, f"is not a version {VAULT_VERSION} vault")
    if body["space"] != space_id.lower():
        raise VaultCorrupt(path, "belongs to another space")
    expires_at = body["expires_at"]
    if not _is_int(expires_at) or not 0 <= expires_at < 2**63:
        raise VaultCorrupt(path, "has no valid expiry")
    if not (_is_hex(body["key_id"], KEY_ID_BYTES) and _is_hex(body["nonce"], 12)
            and _is_hex(body["ct"], DATA_KEY_BYTES + 16)):
        raise VaultCorrupt(path, "has a key_id, nonce or ct that is not the right hex")
    key_id = bytes.fromhex(body["key_id"])
    try:
        data_key = AESGCM(_vault_key(machine_secret, space)).decrypt(
            bytes.fromhex(body["nonce"]), bytes.fromhex(body["ct"]),
            _vault_aad(space, expires_at, key_id))
    except InvalidTag:
        raise VaultCorrupt(path, "does not open with this machine's secret (edited, or "
                                 "sealed under another machine secret)") from None
    if data_key_id(data_key) != key_id:  # pragma: no cover - key_id is in the AAD
        raise VaultCorrupt(path, "holds a key that is not the one it names")
    now = time.time() if now is None else now
    if now >= expires_at:
        raise VaultExpired(path, space16, expires_at)
    return data_key


# -- the recovery file ---------------------------------------------------------------------


def recovery_file_path(home: Path, space16: str) -> Path:
    if not isinstance(space16, str) or not _HEX16.match(space16):
        raise BadSpaceId("space16")
    return Path(home) / f"RECOVERY-{space16}.txt"


def write_recovery_file(home: Path, space16: str, code: str) -> Path:
    """Write `RECOVERY-<space16>.txt` (0600): the code, then two lines on what it is for."""
    path = recovery_file_path(home, space16)
    shown = format_recovery_code(parse_recovery_code(code))
    text = (f"{shown}\n"
            f"This is the recovery code of kint space {space16}: with it, a new machine "
            f"opens the space's data key.\n"
            f"Use it with: kint connect --recovery-code {shown}  (keep this file private "
            f"and a copy somewhere safe)\n")
    atomic_write(path, text.encode("ascii"))
    return path
