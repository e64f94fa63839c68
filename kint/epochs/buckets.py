"""Compression, the six size buckets and the padded payload (06-epochs.md, "Sealing the
payload").

The bucket is the only length on chain, so the payload is padded to one of six sizes:
`padded = uint32(len(gz)) || gz || zeros`. The true compressed length is the first four bytes,
inside the ciphertext. The bucket ratchets per space (an epoch never uses a smaller bucket
than the epoch before it), so a small epoch after a large one does not reveal that the store
shrank.

gzip is level 9 with mtime 0 so the same plaintext compresses to the same bytes. The 10-byte
member header is written here by hand rather than taken from a library, because its last
byte (the OS code) is whatever the platform's zlib stamps, and v0.3.0's published vectors
carry 0x13 (zlib's code for macOS, where they were generated). Writing that byte everywhere
keeps our epochs byte-identical to v0.3.0's; readers ignore it.
"""

from __future__ import annotations

import bisect
import struct
import zlib

from kint.epochs.errors import EpochTooLarge, PayloadError

BUCKETS: tuple[int, ...] = (4096, 8192, 16384, 32768, 65536, 98304)
LENGTH_PREFIX = 4
MAX_GZ = BUCKETS[-1] - LENGTH_PREFIX

# magic, deflate, no flags, mtime 0, XFL 2 (slowest, best compression), OS 0x13.
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x13"
GZIP_LEVEL = 9

# A payload is at most 98,300 bytes of gzip; anything inflating past this is refused before
# it is produced, so a hostile epoch cannot exhaust memory.
MAX_INFLATED = 64 * 1024 * 1024

_U32 = struct.Struct(">I")


class PayloadTooLarge(EpochTooLarge):
    """The compressed plaintext does not fit the largest bucket."""


def gzip_bytes(data: bytes) -> bytes:
    """gzip level 9, mtime 0: one member, byte-identical to v0.3.0's output."""
    deflate = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, 8,
                               zlib.Z_DEFAULT_STRATEGY)
    body = deflate.compress(data) + deflate.flush()
    return GZIP_HEADER + body + struct.pack("<II", zlib.crc32(data),
                                            len(data) & 0xFFFFFFFF)


def gunzip(data: bytes, *, cap: int = MAX_INFLATED) -> bytes:
    """Inflate exactly one gzip member, refusing output past `cap` bytes, a truncated
    stream, or bytes after it. Any header OS byte is accepted."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, cap + 1)
    except zlib.error as err:
        raise PayloadError(f"payload is not valid gzip ({err})") from None
    if len(out) > cap:
        raise PayloadError(f"payload inflates past {cap} bytes; refused")
    if not inflater.eof:
        raise PayloadError("payload gzip stream is truncated")
    if inflater.unused_data:
        raise PayloadError("payload has bytes after its gzip stream")
    return out


def bucket_for(gz_len: int, *, floor: int = 0) -> int:
    """The smallest bucket holding `gz_len + 4` bytes and no smaller than `floor`, the
    previous epoch's bucket in this space (0 for the first epoch)."""
    if isinstance(gz_len, bool) or not isinstance(gz_len, int) or gz_len < 0:
        raise ValueError(f"compressed length {gz_len!r} is not a size")
    if floor not in (0, *BUCKETS):
        raise ValueError(f"bucket floor {floor!r} is not 0 or one of {BUCKETS}")
    need = max(gz_len + LENGTH_PREFIX, floor)
    i = bisect.bisect_left(BUCKETS, need)
    if i == len(BUCKETS):
        raise PayloadTooLarge(f"the epoch compresses to {gz_len} bytes, more than the "
                              f"{MAX_GZ} the largest bucket ({BUCKETS[-1]}) holds")
    return BUCKETS[i]


def pad(gz: bytes, bucket: int) -> bytes:
    """`uint32(len(gz)) || gz || zeros` up to `bucket`."""
    if len(gz) + LENGTH_PREFIX > bucket:
        raise ValueError(f"{len(gz)} bytes of gzip do not fit a {bucket}-byte bucket")
    return _U32.pack(len(gz)) + gz + bytes(bucket - LENGTH_PREFIX - len(gz))


def unpad(padded: bytes) -> bytes:
    """The gzip bytes inside a padded payload. The length must fit and the padding must be
    zeros: anything else is not what a kint writer produces."""
    if len(padded) < LENGTH_PREFIX:
        raise PayloadError("payload is shorter than its 4-byte length")
    (length,) = _U32.unpack_from(padded)
    end = LENGTH_PREFIX + length
    if end > len(padded):
        raise PayloadError(f"payload says {length} bytes of gzip, but only "
                           f"{len(padded) - LENGTH_PREFIX} follow")
    if bytes(padded[end:]).lstrip(b"\x00"):
        raise PayloadError("payload padding is not zeros")
    return bytes(padded[LENGTH_PREFIX:end])


def pack(plaintext: bytes, *, floor: int = 0) -> bytes:
    """gzip, pick the bucket (ratcheted by `floor`), pad: the bytes that get encrypted."""
    gz = gzip_bytes(plaintext)
    return pad(gz, bucket_for(len(gz), floor=floor))


def unpack(padded: bytes, *, cap: int = MAX_INFLATED) -> bytes:
    """The plaintext bytes inside a decrypted payload."""
    return gunzip(unpad(padded), cap=cap)
