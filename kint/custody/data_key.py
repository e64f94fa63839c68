"""The data key (DEK): one random 32-byte AES-256 key per space, and its public name.

Why: a KEK never encrypts memory. The DEK does, and it is wrapped under every KEK allowed to
open it, so keys can be added or dropped without re-encrypting anything. `dek_id` names a
DEK in every epoch header without revealing it (an HMAC keyed by the DEK itself), so a
reader can tell which key sealed an epoch, and a recovery code can be bound to a vault.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from kint.custody.errors import BadDataKey

DEK_LEN = 32
DEK_ID_LEN = 8
DEK_ID_LABEL = b"kint-dek-id-v1"


def check_data_key(dek: bytes) -> bytes:
    """`dek` as bytes, or BadDataKey when it is not 32 bytes."""
    if not isinstance(dek, (bytes, bytearray)) or len(dek) != DEK_LEN:
        raise BadDataKey()
    return bytes(dek)


def new_data_key() -> bytes:
    """32 bytes from the OS CSPRNG."""
    return os.urandom(DEK_LEN)


def dek_id(dek: bytes) -> bytes:
    """HMAC-SHA256(DEK, "kint-dek-id-v1")[:8]."""
    return hmac.new(check_data_key(dek), DEK_ID_LABEL, hashlib.sha256).digest()[:DEK_ID_LEN]
