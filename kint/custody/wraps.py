"""A wrap: the space's data key sealed under one key-encryption key (05-keys.md).

On the wire a wrap is 77 bytes, `kind(1) | kek_tag(16) | wrap_nonce(12) | wrapped_dek(48)`,
and every epoch header carries the whole list. A reader finds its wrap by `kek_tag`, never by
trying each one, because AES-GCM does not commit to its key.
"""

from __future__ import annotations

import hmac
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kint.custody.data_key import DEK_ID_LEN, check_data_key
from kint.custody.errors import KekTagMismatch, WrapAltered, WrapsFileCorrupt
from kint.custody.files import space_file, write_private
from kint.custody.ids import space_bytes, space_hex
from kint.custody.keks import kek_tag

WRAP_LEN = 77
TAG_LEN = 16
NONCE_LEN = 12
WRAPPED_LEN = 48

KIND_SIGNATURE = 0x01
KIND_PASSPHRASE = 0x02
# Reserved by the frozen enum (extended only at the end); no key of this build opens them.
KIND_WEBAUTHN_PRF = 0x03
KIND_SMART_ACCOUNT = 0x04


class MalformedWrap(ValueError):
    """Bytes that are not a 77-byte wrap."""


@dataclass(frozen=True)
class Wrap:
    kind: int
    tag: bytes
    nonce: bytes
    wrapped: bytes

    def __post_init__(self) -> None:
        if not 0 <= self.kind <= 0xFF:
            raise MalformedWrap(f"wrap kind {self.kind} is not one byte")
        if (len(self.tag), len(self.nonce), len(self.wrapped)) != (TAG_LEN, NONCE_LEN, WRAPPED_LEN):
            raise MalformedWrap("a wrap is kind(1) | kek_tag(16) | wrap_nonce(12) | "
                                "wrapped_dek(48)")

    def encode(self) -> bytes:
        return bytes([self.kind]) + self.tag + self.nonce + self.wrapped

    @classmethod
    def decode(cls, data: bytes) -> Wrap:
        if len(data) != WRAP_LEN:
            raise MalformedWrap(f"a wrap is {WRAP_LEN} bytes, not {len(data)}")
        return cls(data[0], bytes(data[1:17]), bytes(data[17:29]), bytes(data[29:77]))


# -- sealing and opening -------------------------------------------------------------------
#
# wrapped_dek = AES-256-GCM(KEK, wrap_nonce, DEK, aad = "kint-wrap-v1" || kind || kek_tag).
# The AAD binds the kind and the tag, so a wrap cannot be passed off as another kind or as
# another key's. The tag is checked before AES runs: AES-GCM is not key-committing, so only
# the tag proves the key is the right one, and a foreign wrap (another key, a kind this
# build does not know) is never fed to AES at all.

WRAP_AAD_PREFIX = b"kint-wrap-v1"
WRAPS_FILE_VERSION = 1
_WRAPS_FILE_MAX = 1 << 20


def wrap_aad(kind: int, tag: bytes) -> bytes:
    """"kint-wrap-v1" || kind (1 byte) || kek_tag (16 bytes)."""
    return WRAP_AAD_PREFIX + bytes([kind]) + bytes(tag)


def wrap_data_key(dek: bytes, kek: bytes, kind: int, nonce: bytes | None = None) -> Wrap:
    """The DEK sealed under `kek` as a wrap of `kind`. `nonce` is for test vectors only:
    left None, a fresh random 12-byte nonce is drawn (one key, one wrap, one nonce)."""
    dek = check_data_key(dek)
    tag = kek_tag(kek)
    nonce = os.urandom(NONCE_LEN) if nonce is None else bytes(nonce)
    if len(nonce) != NONCE_LEN:
        raise MalformedWrap(f"a wrap nonce is {NONCE_LEN} bytes")
    wrapped = AESGCM(bytes(kek)).encrypt(nonce, dek, wrap_aad(kind, tag))
    return Wrap(kind, tag, nonce, wrapped)


def unwrap(wrap: Wrap, kek: bytes) -> bytes:
    """The DEK inside `wrap`, opened with `kek`.

    Refuses with KekTagMismatch before AES runs when `kek` is not the key the wrap names;
    with WrapAltered when the tag matches but the bytes were changed.
    """
    if not hmac.compare_digest(kek_tag(kek), wrap.tag):
        raise KekTagMismatch()
    try:
        return AESGCM(bytes(kek)).decrypt(wrap.nonce, wrap.wrapped, wrap_aad(wrap.kind, wrap.tag))
    except InvalidTag:
        raise WrapAltered() from None


def find_wrap(wraps: Iterable[Wrap], tag: bytes) -> Wrap | None:
    """The first wrap carrying `tag`, by tag only (kind is not consulted), else None."""
    tag = bytes(tag)
    for wrap in wraps:
        if wrap.tag == tag:
            return wrap
    return None


# -- the local wraps file ------------------------------------------------------------------
#
# `wraps-<space16>.json`, 0600, atomic replace. Local to this machine, so its layout is
# kint's own; each wrap is kept as the hex of its 77 wire bytes, so what is cached is exactly
# what a header carries and is checked by the same decoder:
#
#   {"version": 1, "space": "<64 hex>", "dek_id": "<16 hex>", "wraps": ["<154 hex>", ...]}
#
# `space` guards against a file copied under another space's name; `dek_id` says which data
# key the wraps hold, so connect can tell whether they still hold the current one without
# opening anything.


@dataclass(frozen=True)
class WrapsFile:
    """What `wraps-<space16>.json` holds."""

    space: bytes
    dek_id: bytes
    wraps: tuple[Wrap, ...]


def wraps_path(home: Path | None, space: str | bytes) -> Path:
    return space_file(home, "wraps", space, ".json")


def write_wraps(home: Path | None, space: str | bytes, dek_id: bytes,
                wraps: Iterable[Wrap]) -> Path:
    """Write the current wraps of the space's DEK (0600, atomic); returns the path.

    The list is kept as given (a header's list may be copied verbatim; a repeated tag is
    harmless, `find_wrap` takes the first). An empty list is a caller's bug (ValueError).
    """
    wraps = tuple(wraps)
    if not wraps:
        raise ValueError("a wraps file holds at least one wrap")
    if not isinstance(dek_id, (bytes, bytearray)) or len(dek_id) != DEK_ID_LEN:
        raise ValueError(f"dek_id is {DEK_ID_LEN} bytes")
    body = {"version": WRAPS_FILE_VERSION, "space": space_hex(space), "dek_id": dek_id.hex(),
            "wraps": [w.encode().hex() for w in wraps]}
    path = wraps_path(home, space)
    write_private(path, orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")
    return path


def read_wraps(home: Path | None, space: str | bytes) -> WrapsFile | None:
    """The space's local wraps, or None when this machine has none. A file that is there but
    not a wraps file of this space raises WrapsFileCorrupt, naming it."""
    want = space_bytes(space)
    path = wraps_path(home, space)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_WRAPS_FILE_MAX + 1)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise WrapsFileCorrupt(path, f"cannot be read ({err.strerror})") from None
    if len(raw) > _WRAPS_FILE_MAX:
        raise WrapsFileCorrupt(path, "is too large to be a wraps file")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise WrapsFileCorrupt(path, "is not valid JSON (truncated or garbled)") from None
    if not isinstance(body, dict) or set(body) != {"version", "space", "dek_id", "wraps"}:
        raise WrapsFileCorrupt(path, "does not have the fields of a wraps file")
    if body["version"] != WRAPS_FILE_VERSION or isinstance(body["version"], bool):
        raise WrapsFileCorrupt(path, f"is not a version {WRAPS_FILE_VERSION} wraps file")
    if _hex_bytes(body["space"], 32) != want:
        raise WrapsFileCorrupt(path, "belongs to another space")
    dek_id = _hex_bytes(body["dek_id"], DEK_ID_LEN)
    if dek_id is None:
        raise WrapsFileCorrupt(path, "has a dek_id that is not 8 bytes of hex")
    items = body["wraps"]
    if not isinstance(items, list) or not items:
        raise WrapsFileCorrupt(path, "holds no wraps")
    wraps = []
    for i, item in enumerate(items):
        data = _hex_bytes(item, WRAP_LEN)
        if data is None:
            raise WrapsFileCorrupt(path, f"wrap {i} is not {WRAP_LEN} bytes of hex")
        wraps.append(Wrap.decode(data))
    return WrapsFile(want, dek_id, tuple(wraps))


_HEX = re.compile(r"[0-9a-fA-F]*")


def _hex_bytes(value: object, nbytes: int) -> bytes | None:
    """`nbytes` from hex text in either case (nothing else: no spaces, no prefix), else None."""
    if not isinstance(value, str) or len(value) != 2 * nbytes or not _HEX.fullmatch(value):
        return None
    return bytes.fromhex(value)
