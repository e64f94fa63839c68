"""The sealed epoch: header, AAD, AES-256-GCM (06-epochs.md, "The header" and "The AAD").

    blob = header || AES-256-GCM(DEK, gcm_nonce, padded, aad)

Header, big-endian, 59 fixed bytes then 77 per wrap:

    version(1)=0x01 | flags(1) | gcm_nonce(12) | rows_root(32) | dek_id(8) | lenBucket(4)
    | n_wraps(1) | wraps (kind(1) | kek_tag(16) | wrap_nonce(12) | wrapped_dek(48)) x n_wraps

Why it is checked in this order when opening: the header is parsed before anything is
decrypted (a walk reads its flags to know where to stop, connect reads its wraps), so a
header that does not parse is its own error. The length and the `dek_id` are checked before
decrypting, so a key from before a rotation is named as the wrong key rather than reported as
tampering. The AAD binds chain id 8453, owner, space, seq, prev, bucket, rows_root and dek_id,
but not the flags: anyone allowed to push can flip the snapshot bit, so the snapshot flag only
counts when the plaintext's `"snapshot"` key (under the tag) agrees with it. Flag bits other
than the snapshot bit (0x01 is defined, never set) are ignored, never refused.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eth_abi import encode as abi_encode

from kint.custody.data_key import DEK_ID_LEN, check_data_key, dek_id
from kint.custody.wraps import WRAP_LEN, Wrap
from kint.epochs import buckets, coerce
from kint.epochs.errors import (
    AuthenticationFailed,
    CiphertextLengthError,
    Disagreement,
    HeaderError,
    MalformedHeader,
    UnsupportedVersion,
    WrongDataKey,
)
from kint.epochs.plaintext import Plaintext, parse_plaintext
from kint.keccak import keccak

__all__ = ["CHAIN_ID", "FLAG_SALTED", "FLAG_SNAPSHOT", "GCM_TAG_LEN", "HEADER_LEN", "Header",
           "MalformedHeader", "Opened", "SNAPSHOT_DISAGREES", "VERSION", "aad",
           "check_agreement", "open_epoch", "parse_header", "rebuild", "seal"]

VERSION = 0x01
FLAG_SALTED = 0x01  # a signature wrap salted with a passphrase: defined, set by no writer
FLAG_SNAPSHOT = 0x02
CHAIN_ID = 8453  # in the AAD whatever chain the epoch is pushed to

NONCE_LEN = 12
ROOT_LEN = 32
GCM_TAG_LEN = 16
MAX_WRAPS = 0xFF

_FIXED = struct.Struct(">BB12s32s8sIB")
HEADER_LEN = _FIXED.size  # 59

_AAD_TYPES = ("uint256", "address", "bytes32", "uint64", "bytes32", "uint32", "bytes32",
              "bytes8")

SNAPSHOT_DISAGREES = "snapshot flag disagrees between header and plaintext"


def aad(*, owner: bytes | str, space: bytes | str, seq: int, prev: bytes | str, bucket: int,
        rows_root: bytes | str, dek_id: bytes) -> bytes:
    """keccak256(abi.encode(8453, owner, space, seq, prev, lenBucket, rows_root, dek_id)):
    pins the ciphertext to one vault and one position in its chain."""
    if not isinstance(dek_id, (bytes, bytearray)) or len(dek_id) != DEK_ID_LEN:
        raise ValueError(f"dek_id is {DEK_ID_LEN} bytes")
    return keccak(abi_encode(_AAD_TYPES, [
        CHAIN_ID, coerce.address(owner), coerce.bytes32(space, "space"),
        coerce.uint(seq, "seq", coerce.U64_MAX), coerce.bytes32(prev, "prev"),
        coerce.uint(bucket, "bucket", coerce.U32_MAX), coerce.bytes32(rows_root, "rows_root"),
        bytes(dek_id)]))


@dataclass(frozen=True)
class Header:
    """The clear header. `length` is how many bytes of the blob it takes."""

    flags: int
    nonce: bytes
    rows_root: bytes
    dek_id: bytes
    bucket: int
    wraps: tuple[Wrap, ...]
    version: int = VERSION

    def __post_init__(self) -> None:
        if self.version != VERSION:
            raise ValueError("unsupported envelope version")
        coerce.uint(self.flags, "flags", 0xFF)
        coerce.uint(self.bucket, "lenBucket", coerce.U32_MAX)
        for name, size in (("nonce", NONCE_LEN), ("rows_root", ROOT_LEN),
                           ("dek_id", DEK_ID_LEN)):
            value = getattr(self, name)
            if not isinstance(value, bytes) or len(value) != size:
                raise ValueError(f"header {name} is not {size} bytes")
        if len(self.wraps) > MAX_WRAPS or not all(isinstance(w, Wrap) for w in self.wraps):
            raise ValueError(f"a header carries at most {MAX_WRAPS} Wrap values")

    @property
    def snapshot(self) -> bool:
        """What the header claims; it counts only once the plaintext agrees."""
        return bool(self.flags & FLAG_SNAPSHOT)

    @property
    def length(self) -> int:
        return HEADER_LEN + WRAP_LEN * len(self.wraps)

    def wrap_for(self, kek_tag: bytes) -> Wrap | None:
        """The wrap under the KEK with this tag: found by tag, never by trial decryption."""
        return next((w for w in self.wraps if w.tag == kek_tag), None)

    def encode(self) -> bytes:
        return _FIXED.pack(self.version, self.flags, self.nonce, self.rows_root, self.dek_id,
                           self.bucket, len(self.wraps)) \
            + b"".join(w.encode() for w in self.wraps)

    @classmethod
    def decode(cls, blob: bytes) -> Header:
        """The header at the start of `blob` (the ciphertext after it is left alone).
        Raises `HeaderError` when the bytes are not a v1 header."""
        data = bytes(blob[:HEADER_LEN])
        if len(data) < HEADER_LEN:
            raise HeaderError(f"epoch is {len(blob)} bytes, shorter than the {HEADER_LEN}-byte "
                              "header")
        version, flags, nonce, root, key_id, bucket, n_wraps = _FIXED.unpack(data)
        if version != VERSION:
            raise UnsupportedVersion(version)
        end = HEADER_LEN + WRAP_LEN * n_wraps
        if len(blob) < end:
            raise HeaderError(f"header names {n_wraps} wraps ({end} bytes with the fixed "
                              f"part) but the epoch is {len(blob)} bytes")
        wraps = tuple(Wrap.decode(bytes(blob[at:at + WRAP_LEN]))
                      for at in range(HEADER_LEN, end, WRAP_LEN))
        return cls(flags=flags, nonce=nonce, rows_root=root, dek_id=key_id, bucket=bucket,
                   wraps=wraps, version=version)


def parse_header(blob: bytes) -> Header:
    """`Header.decode`, by the name a walk looking for flags or wraps reaches for. Raises
    `MalformedHeader` (= `HeaderError`) and nothing else on bytes that are not a header."""
    return Header.decode(blob)



@dataclass(frozen=True)
class Opened:
    """An epoch that opened and agrees with its header and the chain. `raw` is the exact
    plaintext bytes; `payload` is the gzip member they came out of, byte for byte (what the
    epoch cache keeps: with the header and the data key it rebuilds the ciphertext)."""

    header: Header
    plaintext: Plaintext
    raw: bytes
    payload: bytes = b""

    @property
    def snapshot(self) -> bool:
        return self.plaintext.snapshot


def check_agreement(plaintext: Plaintext, *, snapshot_flag: bool, space: bytes | str,
                    seq: int, prev: bytes | str, rows_root: bytes | str) -> None:
    """The plaintext must say what the header (snapshot flag, rows_root) and the chain
    (space, seq, prev) say. Raises `Disagreement` naming the first field that does not."""
    if plaintext.snapshot != snapshot_flag:
        raise Disagreement("snapshot", SNAPSHOT_DISAGREES, plaintext.snapshot, snapshot_flag)
    expected = (
        ("seq", plaintext.seq, coerce.uint(seq, "seq", coerce.U64_MAX), "the chain"),
        ("prev", plaintext.prev, coerce.hex32(prev, "prev"), "the chain"),
        ("space", plaintext.space, coerce.hex32(space, "space"), "the space being read"),
        ("rows_root", plaintext.rows_root, coerce.hex32(rows_root, "rows_root"), "the header"),
    )
    for name, got, want, source in expected:
        if got != want:
            raise Disagreement(name, f"epoch plaintext {name} {got} disagrees with {source} "
                                     f"({want})", got, want)


def seal(plaintext: bytes, *, dek: bytes, owner: bytes | str, space: bytes | str, seq: int,
         prev: bytes | str, rows_root: bytes | str, wraps: Sequence[Wrap], snapshot: bool,
         bucket_floor: int = 0, nonce: bytes | None = None) -> tuple[bytes, Header]:
    """Seal plaintext bytes (from `build_plaintext`) into the blob `push` sends as `ct`.

    `bucket_floor` is the previous epoch's bucket in this space (0 for the first), so the
    bucket never shrinks. The plaintext is read back and held to the same agreement checks
    `open_epoch` applies, so this never seals an epoch that kint would refuse to open.
    `nonce` is for test vectors only; by default it is 12 fresh random bytes.
    """
    key = check_data_key(dek)
    if not wraps:
        raise ValueError("an epoch carries the wraps of its data key; none were given")
    if not isinstance(snapshot, bool):
        raise ValueError(f"snapshot {snapshot!r} is not a bool")
    if nonce is None:
        nonce = os.urandom(NONCE_LEN)
    root = coerce.bytes32(rows_root, "rows_root")
    parsed = parse_plaintext(plaintext)
    try:
        check_agreement(parsed, snapshot_flag=snapshot, space=space, seq=seq, prev=prev,
                        rows_root=root)
    except Disagreement as err:
        raise ValueError(f"refusing to seal: {err}") from None
    padded = buckets.pack(bytes(plaintext), floor=bucket_floor)
    header = Header(flags=FLAG_SNAPSHOT if snapshot else 0, nonce=bytes(nonce), rows_root=root,
                    dek_id=dek_id(key), bucket=len(padded), wraps=tuple(wraps))
    associated = aad(owner=owner, space=space, seq=seq, prev=prev, bucket=header.bucket,
                     rows_root=root, dek_id=header.dek_id)
    return header.encode() + AESGCM(key).encrypt(header.nonce, padded, associated), header


def open_epoch(blob: bytes, *, dek: bytes, owner: bytes | str, space: bytes | str, seq: int,
               prev: bytes | str) -> Opened:
    """Open one epoch with the data key in hand. `seq` and `prev` are what the chain says
    (the Epoch event; `prev` is 32 zero bytes for seq 1), `space` is the space being read.

    Raises, in the order checked: `HeaderError`, `CiphertextLengthError`, `WrongDataKey`,
    `AuthenticationFailed` (the `Unopenable` family); `PayloadError`, `PlaintextError`
    (`Malformed`); `Disagreement`.
    """
    key = check_data_key(dek)
    header = Header.decode(blob)
    ciphertext = bytes(blob[header.length:])
    if len(ciphertext) != header.bucket + GCM_TAG_LEN:
        raise CiphertextLengthError(
            f"ciphertext is {len(ciphertext)} bytes, but lenBucket {header.bucket} makes it "
            f"{header.bucket + GCM_TAG_LEN}")
    key_id = dek_id(key)
    if key_id != header.dek_id:
        raise WrongDataKey(header.dek_id, key_id)
    associated = aad(owner=owner, space=space, seq=seq, prev=prev, bucket=header.bucket,
                     rows_root=header.rows_root, dek_id=header.dek_id)
    try:
        padded = AESGCM(key).decrypt(header.nonce, ciphertext, associated)
    except InvalidTag:
        raise AuthenticationFailed(
            "AES-GCM refused the epoch: it was altered, or it belongs to another owner, "
            "space or position in the chain") from None
    payload = buckets.unpad(padded)
    raw = buckets.gunzip(payload)
    plaintext = parse_plaintext(raw)
    check_agreement(plaintext, snapshot_flag=header.snapshot, space=space, seq=seq, prev=prev,
                    rows_root=header.rows_root)
    return Opened(header=header, plaintext=plaintext, raw=raw, payload=payload)


def rebuild(header: bytes, payload: bytes, *, dek: bytes, owner: bytes | str,
            space: bytes | str, seq: int, prev: bytes | str) -> bytes:
    """The blob an epoch was sent as, from its clear header and the gzip member sealed in
    it: AES-GCM is deterministic for one key, nonce (in the header) and AAD, so a machine
    that keeps these two (a few hundred bytes more than the compressed plaintext) and holds
    the data key can reproduce the ciphertext exactly and check its keccak against the
    chain's digest, without keeping the padded ciphertext itself. Raises `HeaderError` on a
    header that does not parse and `ValueError` on a payload that does not fit its bucket."""
    key = check_data_key(dek)
    parsed = Header.decode(header)
    if parsed.length != len(header):
        raise HeaderError(f"the header is {len(header)} bytes, but its wraps make it "
                          f"{parsed.length}")
    padded = buckets.pad(bytes(payload), parsed.bucket)
    associated = aad(owner=owner, space=space, seq=seq, prev=prev, bucket=parsed.bucket,
                     rows_root=parsed.rows_root, dek_id=parsed.dek_id)
    return bytes(header) + AESGCM(key).encrypt(parsed.nonce, padded, associated)
