"""The vault key cache: the unwrapped data key, kept so the agent is not blocked on the owner
again for a while.

Why it is built this way:

- On disk it is `vault-<space16>.aes`, sealed with AES-256-GCM under
  HKDF-SHA256(local secret, salt = "", info = "kint-vault-cache-v1"), with the space id in hex
  as the AAD: a copied KINT_HOME without the local secret opens nothing, and a cache file
  moved to another space's name does not open.
- The expiry is inside the ciphertext, so it cannot be edited without breaking the tag.
- How long it lasts is KINT_KEY_TTL: unset, empty or unparseable is 24 hours; a number is
  seconds; a number with s, m, h or d; `session` keeps the key in this process's memory only
  (`MEMORY`) and never writes it (an older file for the space is removed, so no other
  process keeps using a key this one replaced).
- Expired, missing, no local secret, or sealed under another local secret (the source
  changed) all read as absent, each with its own reason: nothing is lost, the user connects
  again. A file that is garbled or was altered is refused by name and left as it is.
- An expired file loses its key when it is next read: the expiry is only a field inside
  it, and the key in it opens the memory for anyone holding the local secret, expired or
  not. kint v0.3.0's 05-keys.md keeps a machine's cached key for its TTL only, which is
  what a TTL must mean after `revokeSessionKey`. It is replaced (atomically, durably) by a
  tombstone: the same layout, the same expiry, an all-zero key in the key's place. So
  every later read says "expired" too, with the same way out, where removing the file made
  the second read say "missing" (as if this machine had never connected) and dropped the
  advice about KINT_KEY_TTL. A key cached again between the read and the replacement is a
  new file (an atomic replace) and stays; a tombstone that cannot be written (a read-only
  folder) is a removal, and one that cannot be removed either is left for the next read.

File layout (80 bytes; local to this machine, so the layout is kint's own):

    magic "KVC\\x01" (4) | key_check (8) | nonce (12) | AES-256-GCM(cache key, nonce,
        expires_at (uint64 big-endian unix seconds, 8) || DEK (32), aad = space hex) (56)

key_check = HMAC-SHA256(cache key, "kint-vault-cache-check-v1")[:8] tells "sealed under
another local secret" (absent) apart from "altered" (corrupt), which AES-GCM alone cannot.
A DEK of 32 zero bytes is a tombstone: expired, whatever the clock says now.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kint.custody.data_key import DEK_LEN, check_data_key
from kint.custody.errors import NoLocalPassphrase, VaultCacheCorrupt
from kint.custody.files import space_file, write_private
from kint.custody.ids import space_bytes, space_hex, space16
from kint.custody.keks import hkdf_sha256
from kint.custody.local_secret import LocalSecret, load_local_secret, local_secret
from kint.outcomes import NOTHING_DROPPED
from kint.paths import remove_file

TTL_ENV = "KINT_KEY_TTL"
SESSION = "session"
DEFAULT_TTL_SECONDS = 24 * 3600
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_TTL = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")

CACHE_INFO = b"kint-vault-cache-v1"
CHECK_LABEL = b"kint-vault-cache-check-v1"
MAGIC = b"KVC\x01"
_CHECK_LEN = 8
_NONCE_LEN = 12
_EXPIRY_LEN = 8
CACHE_FILE_LEN = len(MAGIC) + _CHECK_LEN + _NONCE_LEN + _EXPIRY_LEN + DEK_LEN + 16  # 80
_EXPIRY_MAX = 2**64 - 1
# What an expired file holds in the key's place once read (the module's docstring).
_NO_KEY = bytes(DEK_LEN)
# The cache files' writes and removals in this process (one worker per space serves every
# caller): an expired file is removed only while no fresh one is being written in its place.
_FILES = threading.Lock()

Ttl = float | Literal["session"]
AbsentReason = Literal["missing", "expired", "other-secret", "no-local-secret"]


def parse_key_ttl(raw: str | None) -> Ttl:
    """KINT_KEY_TTL as seconds, or SESSION. Unset, empty or unparseable: 24 hours."""
    text = (raw or "").strip().lower()
    if text == SESSION:
        return SESSION
    match = _TTL.fullmatch(text)
    if match is None:
        return float(DEFAULT_TTL_SECONDS)
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    return seconds if math.isfinite(seconds) else float(DEFAULT_TTL_SECONDS)


def key_ttl() -> Ttl:
    """The TTL this call asks for (KINT_KEY_TTL: the caller's, else the space's)."""
    from kint import settings

    return parse_key_ttl(settings.value(TTL_ENV))


# -- results -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CachedKey:
    """A cached data key. `expires_at` is unix seconds, or None for a key held in memory for
    the life of this process (KINT_KEY_TTL=session)."""

    dek: bytes = field(repr=False)
    expires_at: int | None
    where: Literal["memory", "file"]


@dataclass(frozen=True)
class NoCachedKey:
    """No usable cached key, and why (push reports KEY_EXPIRED on `expired`)."""

    reason: AbsentReason
    message: str
    expires_at: int | None = None


# -- the in-process holder -----------------------------------------------------------------


class MemoryKeys:
    """Data keys held in this process only, by space (KINT_KEY_TTL=session). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: dict[bytes, bytes] = {}

    def put(self, space: str | bytes, dek: bytes) -> None:
        dek = check_data_key(dek)
        with self._lock:
            self._keys[space_bytes(space)] = dek

    def get(self, space: str | bytes) -> bytes | None:
        with self._lock:
            return self._keys.get(space_bytes(space))

    def forget(self, space: str | bytes) -> None:
        with self._lock:
            self._keys.pop(space_bytes(space), None)

    def clear(self) -> None:
        with self._lock:
            self._keys.clear()


MEMORY = MemoryKeys()


def held_in_memory(space: str | bytes) -> bool:
    """Whether this process holds the space's data key in memory only (a connect, renewal
    or rotation under KINT_KEY_TTL=session): what tells a later renewal to keep it there."""
    return MEMORY.get(space) is not None


# -- the file ------------------------------------------------------------------------------


def vault_cache_path(home: Path | None, space: str | bytes) -> Path:
    return space_file(home, "vault", space, ".aes")


def _cache_key(secret: LocalSecret) -> bytes:
    return hkdf_sha256(secret.key_material, b"", CACHE_INFO)


def _key_check(key: bytes) -> bytes:
    return hmac.new(key, CHECK_LABEL, hashlib.sha256).digest()[:_CHECK_LEN]


def cache_data_key(home: Path | None, space: str | bytes, dek: bytes, *,
                   ttl: Ttl | None = None, secret: LocalSecret | None = None,
                   now: float | None = None) -> CachedKey:
    """Cache `dek` for the space for `ttl` (default: KINT_KEY_TTL) from `now`.

    With SESSION the key goes to MEMORY only and any cache file of the space is removed;
    otherwise it is written to `vault-<space16>.aes` (0600, atomic), and MEMORY forgets the
    space so the file is what every reader sees.
    """
    dek = check_data_key(dek)
    ttl = key_ttl() if ttl is None else ttl
    path = vault_cache_path(home, space)
    if ttl == SESSION:
        MEMORY.put(space, dek)
        with _FILES:
            remove_file(path)
        return CachedKey(dek, None, "memory")
    secret = secret or local_secret(home)
    now = time.time() if now is None else now
    expires_at = min(max(int(now + float(ttl)), 0), _EXPIRY_MAX)
    key = _cache_key(secret)
    with _FILES:
        write_private(path, _seal(key, space, expires_at, dek))
    MEMORY.forget(space)
    return CachedKey(dek, expires_at, "file")


def read_cached_key(home: Path | None, space: str | bytes, *,
                    secret: LocalSecret | None = None,
                    now: float | None = None) -> CachedKey | NoCachedKey:
    """The cached data key of the space: from MEMORY, else from the file.

    Returns NoCachedKey (with its reason) when there is none, it expired, no local secret
    exists, or the file was sealed under another local secret. Raises VaultCacheCorrupt,
    naming the file, when it is garbled or was altered.
    """
    held = MEMORY.get(space)
    if held is not None:
        return CachedKey(held, None, "memory")
    path = vault_cache_path(home, space)
    name = space16(space)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(CACHE_FILE_LEN + 1)
            opened = os.fstat(fh.fileno())
    except FileNotFoundError:
        # kint v0.3.0's words (03-new-machine.md, "Pull"), which a script may match on.
        return NoCachedKey("missing", f"no data key on this machine: run `kint connect` for "
                           f"space {name} first ({path.name} is missing; {NOTHING_DROPPED})")
    except OSError as err:
        raise VaultCacheCorrupt(path, f"cannot be read ({err.strerror})") from None
    if len(raw) != CACHE_FILE_LEN or not raw.startswith(MAGIC):
        raise VaultCacheCorrupt(path, "is not a vault key cache (truncated or garbled)")
    if secret is None:
        try:
            secret = load_local_secret(home)
        except NoLocalPassphrase as err:
            # v0.3.0's words alone: connecting again cannot help, the session key is sealed
            # under the same secret (the refusal's hint says to give it back).
            return NoCachedKey("no-local-secret", str(err))
    key = _cache_key(secret)
    offset = len(MAGIC)
    check, nonce, sealed = (raw[offset:offset + _CHECK_LEN],
                            raw[offset + _CHECK_LEN:offset + _CHECK_LEN + _NONCE_LEN],
                            raw[offset + _CHECK_LEN + _NONCE_LEN:])
    if not hmac.compare_digest(check, _key_check(key)):
        return NoCachedKey("other-secret", f"{path} was sealed under another local passphrase "
                           f"than the one from {secret.source} (did its source change?): "
                           f"{NOTHING_DROPPED}; run kint connect")
    try:
        plain = AESGCM(key).decrypt(nonce, sealed, space_hex(space).encode("ascii"))
    except InvalidTag:
        raise VaultCacheCorrupt(path, "does not open: it was altered, or belongs to another "
                                      "space") from None
    expires_at = int.from_bytes(plain[:_EXPIRY_LEN], "big")
    dek = plain[_EXPIRY_LEN:]
    now = time.time() if now is None else now
    if dek == _NO_KEY or now >= expires_at:
        if dek != _NO_KEY:
            _retire_expired(path, opened, key, space, expires_at)
        when = datetime.fromtimestamp(min(expires_at, 253402300799),
                                      tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        return NoCachedKey("expired", f"the cached data key of space {name} expired at "
                           f"{when}: {NOTHING_DROPPED}; run kint connect again, or set "
                           f"KINT_KEY_TTL=30d on a machine that stays up", expires_at)
    return CachedKey(dek, expires_at, "file")


def _seal(key: bytes, space: str | bytes, expires_at: int, dek: bytes) -> bytes:
    nonce = os.urandom(_NONCE_LEN)
    sealed = AESGCM(key).encrypt(nonce, expires_at.to_bytes(_EXPIRY_LEN, "big") + dek,
                                 space_hex(space).encode("ascii"))
    return MAGIC + _key_check(key) + nonce + sealed


def _retire_expired(path: Path, opened: os.stat_result, key: bytes, space: str | bytes,
                    expires_at: int) -> None:
    """Replace the expired cache file just read by its tombstone (no key, same expiry),
    unless another file took its name meanwhile. A tombstone that cannot be written is a
    removal; one that cannot be removed either is left for the next look: the read still
    says "expired", never an error of its own."""
    with _FILES:
        try:
            there = os.stat(path)
            if (there.st_dev, there.st_ino) != (opened.st_dev, opened.st_ino):
                return
            try:
                write_private(path, _seal(key, space, expires_at, _NO_KEY))
            except OSError:
                remove_file(path)
        except OSError:
            return


def forget_cached_key(home: Path | None, space: str | bytes) -> None:
    """Drop the space's cached key from MEMORY and from disk (nothing else is touched)."""
    MEMORY.forget(space)
    with _FILES:
        remove_file(vault_cache_path(home, space))
