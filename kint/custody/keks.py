"""Key-encryption keys (KEKs): what opens a wrap of the data key.

Two paths, both ending in HKDF-SHA256 with the same 63-byte info:

- signature (wrap kind 0x01): ikm = r || s of the owner's checked, low-S derive signature
  (v never enters); salt empty, or scrypt(salt passphrase, owner20) as a second factor.
- passphrase (wrap kind 0x02, owners that cannot sign deterministically): ikm =
  scrypt(passphrase, owner20); salt empty.

Why: the info binds the owner and the space, so one signature gives each tenant its own KEK;
the scrypt salt is the owner, so one passphrase gives each owner its own stretch. The
passphrase is UTF-8 exactly as typed (no Unicode normalisation): the browser reader must get
the same bytes. An empty passphrase is refused, never stretched.

scrypt at N = 2^17, r = 8 uses 128 MiB, so every stretch takes the scrypt lock under
KINT_HOME and several workers do not run one at once.

`kek_tag` names a KEK in a wrap without revealing it, so a reader finds its wrap by tag and
never trial-decrypts (AES-GCM does not commit to its key).
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from kint.custody.errors import BadKek, EmptyPassphrase
from kint.custody.files import scrypt_lock
from kint.custody.ids import owner_bytes, space_bytes
from kint.custody.vault_message import check_derive_signature

KEK_LEN = 32
KEK_INFO_PREFIX = b"kint-kek-v1"
KEK_INFO_LEN = len(KEK_INFO_PREFIX) + 20 + 32  # 63
KEK_TAG_LABEL = b"kint-kek-check-v1"
KEK_TAG_LEN = 16

SCRYPT_N = 2**17
SCRYPT_R = 8
SCRYPT_P = 1
SCRYPT_LEN = 32


def kek_info(owner: str | bytes, space: str | bytes) -> bytes:
    """"kint-kek-v1" || owner (20 bytes) || space (32 bytes): 63 bytes."""
    return KEK_INFO_PREFIX + owner_bytes(owner) + space_bytes(space)


def hkdf_sha256(ikm: bytes, salt: bytes, info: bytes, length: int = KEK_LEN) -> bytes:
    """HKDF-SHA256 (RFC 5869). An empty salt is the RFC's default (a zero-filled key)."""
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt or None,
                info=info).derive(ikm)


def stretch_passphrase(passphrase: str, owner: str | bytes, *,
                       home: Path | None = None) -> bytes:
    """scrypt(passphrase UTF-8, salt = owner20, N = 2^17, r = 8, p = 1, 32 bytes).

    Takes the scrypt lock in `home` (default KINT_HOME) for the ~0.4 s it runs.
    """
    if not isinstance(passphrase, str):
        raise TypeError("a passphrase is text (str)")
    if not passphrase:
        raise EmptyPassphrase()
    salt = owner_bytes(owner)
    with scrypt_lock(home):
        return Scrypt(salt=salt, length=SCRYPT_LEN, n=SCRYPT_N, r=SCRYPT_R,
                      p=SCRYPT_P).derive(passphrase.encode("utf-8"))


def signature_kek(signature: bytes, owner: str | bytes, space: str | bytes, *,
                  salt_passphrase: str | None = None, home: Path | None = None) -> bytes:
    """The KEK of a signature wrap (kind 0x01).

    The signature is checked first (it must recover to the owner; WrongSigner otherwise), so
    no caller can derive a key from an unchecked signature. `salt_passphrase` is the optional
    second factor; None means unsalted. An empty one is refused, not taken as unsalted.
    """
    r, s = check_derive_signature(signature, owner)
    ikm = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    salt = b"" if salt_passphrase is None else stretch_passphrase(salt_passphrase, owner,
                                                                  home=home)
    return hkdf_sha256(ikm, salt, kek_info(owner, space))


def passphrase_kek(passphrase: str, owner: str | bytes, space: str | bytes, *,
                   home: Path | None = None) -> bytes:
    """The KEK of a passphrase wrap (kind 0x02): HKDF(scrypt(passphrase, owner20), "", info)."""
    ikm = stretch_passphrase(passphrase, owner, home=home)
    return hkdf_sha256(ikm, b"", kek_info(owner, space))


def kek_tag(kek: bytes) -> bytes:
    """HMAC-SHA256(KEK, "kint-kek-check-v1")[:16]."""
    if not isinstance(kek, (bytes, bytearray)) or len(kek) != KEK_LEN:
        raise BadKek()
    return hmac.new(bytes(kek), KEK_TAG_LABEL, hashlib.sha256).digest()[:KEK_TAG_LEN]
