"""The encrypted epoch envelope (DESIGN §9): the bytes that go on chain as `push`'s
`ciphertext`, and how a change set is cut into epochs that fit.

Why it looks like this:

- Calldata is the cost (DESIGN §7: about 40 gas a byte), so the plaintext is gzipped at
  level 9 before anything else, and the clear header is a fixed 104 bytes.
- The size on chain should say little about the rows, so the compressed payload is
  zero-padded to a bucket. Buckets start at 512 bytes and each is at most 1.25x the one
  before, so padding costs under 25% of the framed payload (above the 512-byte floor).
- The header is in the clear so a reader can pick the data key and refuse an epoch before
  decrypting, but it is bound into the AES-GCM associated data together with the chain id,
  the owner and the space. Flipping any header bit, or replaying an epoch on another
  chain, owner or space, fails authentication.
- The plaintext repeats seq, prev, rows root, the snapshot flag and the space, and opening
  checks they agree with the header and the caller, so a writer holding the key still
  cannot make the header say one thing and the rows another.
- Everything here is a pure function of its arguments (bar the random nonce), with no
  I/O: push and pull own the files and the chain.

Layout (big-endian), `HEADER_SIZE` = 104 bytes:

    magic "KINTEP" (6) | version u8 = 1 | flags u8 (bit 0 = snapshot) | seq u64 |
    prev (32) | bucket u32 | rows_root (32) | data key id (8) | nonce (12)

followed by AES-256-GCM(key, nonce, payload, aad) = `bucket` + 16 bytes, where

    payload = u32 len(gz) || gz || zero padding up to `bucket`
    gz      = gzip level 9, mtime 0, OS byte 255, of orjson.dumps(plaintext)
    aad     = chain id u64 || owner (20 raw bytes) || space (32 raw bytes) || header

So `bucket` is the size of the padded plaintext payload, and the envelope is
`HEADER_SIZE + bucket + TAG_SIZE` bytes.

Errors: `EnvelopeError` means the bytes (or a plaintext to seal) are not a valid epoch for
this chain, owner and space; `UnknownDataKey` means the epoch may be fine but this machine
does not hold its key (after a rekey, that is a gap, not a tamper); `RowTooLarge` names a
row that cannot fit one epoch on its own. A bad argument (a key that is not 32 bytes, an
owner that is not an address) is a `ValueError`.
"""

from __future__ import annotations

import bisect
import itertools
import os
import re
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eth_hash.auto import keccak

from kint.rows.canon import row_label

MAGIC = b"KINTEP"
VERSION = 1
FLAG_SNAPSHOT = 0x01
_KNOWN_FLAGS = FLAG_SNAPSHOT

_HEADER = struct.Struct(">6sBBQ32sI32s8s12s")
HEADER_SIZE = _HEADER.size  # 104
TAG_SIZE = 16
NONCE_SIZE = 12
KEY_ID_SIZE = 8
DATA_KEY_SIZE = 32
_FRAME = struct.Struct(">I")

PLAINTEXT_VERSION = 1
MAX_PLAINTEXT_BYTES = 64 * 1024 * 1024  # a payload inflating past this is refused

DEFAULT_EPOCH_MAX_BYTES = 90_000
EPOCH_MAX_BYTES_ENV = "KINT_EPOCH_MAX_BYTES"

_U64_MAX = 2**64 - 1
_U32_MAX = 2**32 - 1
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
_SPACE_ARG = re.compile(r"^[0-9a-fA-F]{64}$")

# gzip member header: magic, deflate, no flags, mtime 0, XFL 2 (best compression), OS 255
# (unknown). Written by hand so the bytes are the same on every platform: zlib's own
# gzip wrapper stamps the build's OS code.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"


class EnvelopeError(Exception):
    """The bytes are not a valid epoch for this chain, owner and space (or a plaintext to
    seal does not have the epoch's shape). The message says what is wrong."""


class PlaintextMismatch(EnvelopeError):
    """The decrypted plaintext disagrees with its header or with the space asked for.
    `field` is the disagreeing field: seq, prev, rows_root, snapshot or space."""

    def __init__(self, field: str, plaintext_value: Any, expected: Any, against: str) -> None:
        super().__init__(f"plaintext and {against} disagree on {field}: "
                         f"plaintext {plaintext_value!r}, {against} {expected!r}")
        self.field = field


class UnknownDataKey(Exception):
    """The epoch is under a data key this machine does not hold. Not a tamper: after a
    rekey, an epoch under a key that was never shared here is a gap."""

    def __init__(self, key_id: bytes) -> None:
        super().__init__(f"epoch is under data key {key_id.hex()}, which this machine "
                         "does not hold")
        self.key_id = key_id


class RowTooLarge(Exception):
    """One row alone measures over the epoch limit, so no split can carry it. Push refuses
    until it is shrunk or split in Sibyl."""

    def __init__(self, tier: str, category: str | None, key: str, size: int,
                 limit: int | None = None) -> None:
        label = row_label(tier, category, key)
        over = f", over the {limit}-byte epoch limit" if limit is not None else ""
        super().__init__(f"{label} is too large for one epoch ({size} bytes compressed"
                         f"{over}): shrink or split it in Sibyl, then push again")
        self.tier = tier
        self.category = category
        self.key = key
        self.size = size
        self.limit = limit
        self.label = label


# --- buckets -------------------------------------------------------------------------


def _next_bucket(size: int) -> int:
    """1.25x, rounded down to a multiple of 16: growth never exceeds 1.25x."""
    return (size * 5 // 4) // 16 * 16


def _bucket_sequence() -> tuple[int, ...]:
    out = [512]
    while (nxt := _next_bucket(out[-1])) <= _U32_MAX:
        out.append(nxt)
    return tuple(out)


# Every bucket that fits the header's u32 field: 512, 640, 800, 992, 1232, ... (all
# multiples of 16, each at most 1.25x the last; well past 1 MiB).
BUCKETS: tuple[int, ...] = _bucket_sequence()
_BUCKET_SET = frozenset(BUCKETS)


def bucket_for(n: int) -> int:
    """The smallest bucket holding a framed payload of `n` bytes (4-byte length + gzip).
    For n above 512 the padding is under 25% of n."""
    if n < 0:
        raise ValueError(f"payload size {n} is negative")
    i = bisect.bisect_left(BUCKETS, n)
    if i == len(BUCKETS):
        raise EnvelopeError(f"payload of {n} bytes is larger than the largest bucket "
                            f"({BUCKETS[-1]})")
    return BUCKETS[i]


# --- small codecs --------------------------------------------------------------------


def data_key_id(key: bytes) -> bytes:
    """The first 8 bytes of keccak256(data key): names the key in the clear header."""
    _require_data_key(key)
    return keccak(key)[:KEY_ID_SIZE]


def _require_data_key(key: bytes) -> None:
    if not isinstance(key, (bytes, bytearray)) or len(key) != DATA_KEY_SIZE:
        raise ValueError(f"a data key is {DATA_KEY_SIZE} bytes")


def _owner_bytes(owner: str) -> bytes:
    if not isinstance(owner, str) or not _ADDRESS.match(owner):
        raise ValueError(f"owner {owner!r} is not a 0x-prefixed 20-byte hex address")
    return bytes.fromhex(owner[2:])


def _space_bytes(space: str) -> bytes:
    if not isinstance(space, str) or not _SPACE_ARG.match(space):
        raise ValueError(f"space {space!r} is not 64 hex digits")
    return bytes.fromhex(space)


def associated_data(chain_id: int, owner: str, space: str, header: bytes) -> bytes:
    """chain id u64 || owner (20 bytes) || space (32 bytes) || header bytes."""
    if isinstance(chain_id, bool) or not isinstance(chain_id, int) \
            or not 0 <= chain_id <= _U64_MAX:
        raise ValueError(f"chain id {chain_id!r} is not a u64")
    return struct.pack(">Q", chain_id) + _owner_bytes(owner) + _space_bytes(space) + header


def gzip_bytes(data: bytes) -> bytes:
    """gzip level 9 with a fixed header: the same input gives the same bytes."""
    body = zlib.compress(data, 9, wbits=-15)
    return _GZIP_HEADER + body + struct.pack("<II", zlib.crc32(data), len(data) & _U32_MAX)


def gunzip_capped(data: bytes, cap: int = MAX_PLAINTEXT_BYTES) -> bytes:
    """Inflate one gzip member, refusing output past `cap` bytes before producing it."""
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(data, cap + 1)
    except zlib.error as err:
        raise EnvelopeError(f"payload is not valid gzip ({err})") from None
    if len(out) > cap:
        raise EnvelopeError(f"payload inflates past {cap} bytes; refused")
    if not inflater.eof:
        raise EnvelopeError("payload gzip stream is truncated")
    if inflater.unused_data:
        raise EnvelopeError("payload has bytes after its gzip stream")
    return out


def frame_payload(plaintext_bytes: bytes) -> bytes:
    """gzip, 4-byte length frame, zero padding to the bucket: the bytes that get encrypted."""
    if len(plaintext_bytes) > MAX_PLAINTEXT_BYTES:
        raise EnvelopeError(f"plaintext is {len(plaintext_bytes)} bytes, over the "
                            f"{MAX_PLAINTEXT_BYTES}-byte limit a reader accepts")
    gz = gzip_bytes(plaintext_bytes)
    framed = _FRAME.pack(len(gz)) + gz
    return framed + bytes(bucket_for(len(framed)) - len(framed))


def unframe_payload(payload: bytes) -> bytes:
    """The gzip bytes inside a padded payload; the padding must be zeros."""
    if len(payload) < _FRAME.size:
        raise EnvelopeError("payload is shorter than its length frame")
    (length,) = _FRAME.unpack_from(payload)
    end = _FRAME.size + length
    if end > len(payload):
        raise EnvelopeError(f"payload frame says {length} bytes, but only "
                            f"{len(payload) - _FRAME.size} follow")
    padding = payload[end:]
    if padding.count(0) != len(padding):
        raise EnvelopeError("payload padding is not zeros")
    return payload[_FRAME.size:end]


# --- header --------------------------------------------------------------------------


@dataclass(frozen=True)
class Header:
    """The clear header. `prev` and `rows_root` are the 32 raw bytes (the plaintext
    carries them as 64 lowercase hex digits)."""

    seq: int
    prev: bytes
    snapshot: bool
    bucket: int
    rows_root: bytes
    key_id: bytes
    nonce: bytes

    def __post_init__(self) -> None:
        if isinstance(self.seq, bool) or not isinstance(self.seq, int) \
                or not 0 <= self.seq <= _U64_MAX:
            raise EnvelopeError(f"header seq {self.seq!r} is not a u64")
        for name in ("prev", "rows_root"):
            if not isinstance(getattr(self, name), bytes) or len(getattr(self, name)) != 32:
                raise EnvelopeError(f"header {name} is not 32 bytes")
        if not isinstance(self.snapshot, bool):
            raise EnvelopeError(f"header snapshot {self.snapshot!r} is not a bool")
        if self.bucket not in _BUCKET_SET:
            raise EnvelopeError(f"header bucket {self.bucket!r} is not a bucket size")
        if not isinstance(self.key_id, bytes) or len(self.key_id) != KEY_ID_SIZE:
            raise EnvelopeError(f"header data key id is not {KEY_ID_SIZE} bytes")
        if not isinstance(self.nonce, bytes) or len(self.nonce) != NONCE_SIZE:
            raise EnvelopeError(f"header nonce is not {NONCE_SIZE} bytes")

    @property
    def flags(self) -> int:
        return FLAG_SNAPSHOT if self.snapshot else 0

    def encode(self) -> bytes:
        return _HEADER.pack(MAGIC, VERSION, self.flags, self.seq, self.prev, self.bucket,
                            self.rows_root, self.key_id, self.nonce)

    @classmethod
    def decode(cls, data: bytes) -> Header:
        """Parse exactly `HEADER_SIZE` bytes; refuse a wrong magic, version, flag or size."""
        if len(data) != HEADER_SIZE:
            raise EnvelopeError(f"header is {len(data)} bytes, expected {HEADER_SIZE}")
        magic, version, flags, seq, prev, bucket, root, key_id, nonce = _HEADER.unpack(data)
        if magic != MAGIC:
            raise EnvelopeError(f"not a kint epoch (magic {magic!r}, expected {MAGIC!r})")
        if version != VERSION:
            raise EnvelopeError(f"unsupported epoch version {version} (this kint reads "
                                f"version {VERSION})")
        if flags & ~_KNOWN_FLAGS:
            raise EnvelopeError(f"unknown header flag bits 0x{flags & ~_KNOWN_FLAGS:02x}")
        return cls(seq=seq, prev=prev, snapshot=bool(flags & FLAG_SNAPSHOT), bucket=bucket,
                   rows_root=root, key_id=key_id, nonce=nonce)


# --- plaintext -----------------------------------------------------------------------


def _check_plaintext_shape(plaintext: Any) -> None:
    """The fields the header mirrors must have the types the header can carry."""
    if not isinstance(plaintext, dict):
        raise EnvelopeError("plaintext is not a JSON object")
    if plaintext.get("v") != PLAINTEXT_VERSION or isinstance(plaintext.get("v"), bool):
        raise EnvelopeError(f"plaintext version {plaintext.get('v')!r} is not "
                            f"{PLAINTEXT_VERSION}")
    seq = plaintext.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= _U64_MAX:
        raise EnvelopeError(f"plaintext seq {seq!r} is not a u64")
    for name in ("space", "prev", "rows_root"):
        value = plaintext.get(name)
        if not isinstance(value, str) or not _HEX64.match(value):
            raise EnvelopeError(f"plaintext {name} {value!r} is not 64 lowercase hex digits")
    if not isinstance(plaintext.get("snapshot"), bool):
        raise EnvelopeError(f"plaintext snapshot {plaintext.get('snapshot')!r} is not a bool")
    if not isinstance(plaintext.get("rows"), list):
        raise EnvelopeError("plaintext rows is not a list")


def _check_agreement(plaintext: dict[str, Any], header: Header, space: str) -> None:
    expected = {"seq": header.seq, "prev": header.prev.hex(),
                "rows_root": header.rows_root.hex(), "snapshot": header.snapshot}
    for name, value in expected.items():
        if plaintext[name] != value:
            raise PlaintextMismatch(name, plaintext[name], value, "header")
    if plaintext["space"] != space.lower():
        raise PlaintextMismatch("space", plaintext["space"], space.lower(), "requested space")


# --- seal and open -------------------------------------------------------------------


def seal(plaintext: dict[str, Any], *, data_key: bytes, chain_id: int, owner: str,
         nonce: bytes | None = None) -> bytes:
    """The envelope (header || AES-256-GCM ciphertext) for one epoch's plaintext. Header
    seq, prev, snapshot and rows root come from the plaintext; the AAD's space too."""
    _check_plaintext_shape(plaintext)
    key_id = data_key_id(data_key)
    try:
        plaintext_bytes = orjson.dumps(plaintext)
    except orjson.JSONEncodeError as err:
        raise EnvelopeError(f"plaintext cannot be encoded as JSON ({err})") from None
    payload = frame_payload(plaintext_bytes)
    header = Header(seq=plaintext["seq"], prev=bytes.fromhex(plaintext["prev"]),
                    snapshot=plaintext["snapshot"], bucket=len(payload),
                    rows_root=bytes.fromhex(plaintext["rows_root"]), key_id=key_id,
                    nonce=os.urandom(NONCE_SIZE) if nonce is None else nonce)
    header_bytes = header.encode()
    aad = associated_data(chain_id, owner, plaintext["space"], header_bytes)
    return header_bytes + AESGCM(data_key).encrypt(header.nonce, payload, aad)


def open_envelope(envelope: bytes, *, keys: dict[bytes, bytes], chain_id: int, owner: str,
                  space: str) -> tuple[Header, dict[str, Any]]:
    """Check and decrypt one envelope: header, then key, then tag, then the plaintext's
    agreement with the header and `space`. `keys` maps data key id to data key."""
    if len(envelope) < HEADER_SIZE:
        raise EnvelopeError(f"envelope is {len(envelope)} bytes, shorter than the "
                            f"{HEADER_SIZE}-byte header")
    header_bytes = bytes(envelope[:HEADER_SIZE])
    header = Header.decode(header_bytes)
    ciphertext = bytes(envelope[HEADER_SIZE:])
    if len(ciphertext) != header.bucket + TAG_SIZE:
        raise EnvelopeError(f"ciphertext is {len(ciphertext)} bytes, but the header's "
                            f"bucket {header.bucket} makes it {header.bucket + TAG_SIZE}")
    key = keys.get(header.key_id)
    if key is None:
        raise UnknownDataKey(header.key_id)
    if data_key_id(key) != header.key_id:
        raise ValueError(f"keys maps id {header.key_id.hex()} to a key whose id is "
                         f"{data_key_id(key).hex()}")
    aad = associated_data(chain_id, owner, space, header_bytes)
    try:
        payload = AESGCM(key).decrypt(header.nonce, ciphertext, aad)
    except InvalidTag:
        raise EnvelopeError("authentication failed: the envelope was altered, or it "
                            "belongs to another chain, owner or space") from None
    raw = gunzip_capped(unframe_payload(payload))
    try:
        plaintext = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise EnvelopeError(f"plaintext is not valid JSON ({err})") from None
    _check_plaintext_shape(plaintext)
    _check_agreement(plaintext, header, space)
    return header, plaintext


# --- sizing and splitting ------------------------------------------------------------


def epoch_max_bytes() -> int:
    """KINT_EPOCH_MAX_BYTES as a positive int; anything else means the default."""
    value = os.environ.get(EPOCH_MAX_BYTES_ENV, "")
    try:
        parsed = int(value.strip())
    except ValueError:
        return DEFAULT_EPOCH_MAX_BYTES
    return parsed if parsed > 0 else DEFAULT_EPOCH_MAX_BYTES


def measured_size(rows: list[dict[str, Any]], *, base: dict[str, Any]) -> int:
    """The gzip size of the plaintext `base` with these rows: the size the epoch limit
    applies to (the envelope adds the 4-byte frame, padding under 25%, the 104-byte
    header and the 16-byte tag)."""
    return len(gzip_bytes(orjson.dumps({**base, "rows": rows})))


# A guess aims a little under the limit; a chunk this full is accepted without trying
# to grow it; after this many measurements a chunk that fits is taken as it is.
_AIM = 0.97
_FULL = 0.95
_MAX_PROBES = 8


def _row_estimate(row: dict[str, Any]) -> int:
    """A row's deflate size on its own: a rough stand-in for what it costs inside a chunk
    (the running ratio corrects for what rows share), cheap, and right about outliers that
    raw JSON length gets wrong (a long run of one character, random hex)."""
    return len(zlib.compress(orjson.dumps(row), 6, wbits=-15)) + 1


def split_rows(rows: list[dict[str, Any]], *, max_bytes: int,
               base: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Cut an ordered change set into consecutive chunks, each measuring at most
    `max_bytes` as a plaintext with `base`'s fields. Order is kept and nothing is dropped.

    Greedy without being quadratic: a chunk's end is guessed from each row's own deflate
    size and a running ratio (what a measured chunk came to, over the sum of its rows'
    own sizes), then confirmed by measuring; over the limit it backs off (to the ratio's
    new guess, else halfway), and a chunk well under the limit grows. Each row is
    compressed a small constant number of times. `base` should carry the epoch's fields
    with values of their real length (the digests vary, their length does not). Raises
    RowTooLarge for a row that alone measures over `max_bytes`.
    """
    if max_bytes <= 0:
        raise ValueError(f"max_bytes {max_bytes} is not positive")
    rows = list(rows)
    if not rows:
        return []
    prefix = list(itertools.accumulate((_row_estimate(row) for row in rows), initial=0))
    base_estimate = measured_size([], base=base)
    chunks: list[list[dict[str, Any]]] = []
    ratio = 1.0
    start = 0
    while start < len(rows):
        end, ratio = _next_chunk(rows, start, prefix, base_estimate, ratio, max_bytes, base)
        chunks.append(rows[start:end])
        start = end
    return chunks


def _guess_end(prefix: list[int], start: int, base_estimate: int, ratio: float,
               max_bytes: int) -> int:
    """The furthest end whose rows, at `ratio`, are estimated to fit."""
    budget = (max_bytes * _AIM - base_estimate) / max(ratio, 1e-6)
    return bisect.bisect_right(prefix, prefix[start] + budget, lo=start) - 1


def _next_chunk(rows: list[dict[str, Any]], start: int, prefix: list[int],
                base_estimate: int, ratio: float, max_bytes: int,
                base: dict[str, Any]) -> tuple[int, float]:
    """(end, ratio): rows[start:end] is the next chunk. Invariant: rows[start:fits]
    measured within the limit (or fits == start), rows[start:over] measured over it."""
    n = len(rows)
    fits, over = start, n + 1
    single_size = 0
    end = _guess_end(prefix, start, base_estimate, ratio, max_bytes)
    probes = 0
    while over - fits > 1 and (probes < _MAX_PROBES or fits == start):
        if not fits < end < over:
            end = (fits + over) // 2 if over <= n else min(max(end, fits + 1), n)
        size = measured_size(rows[start:end], base=base)
        probes += 1
        if end == start + 1:
            single_size = size
        if size > base_estimate:
            ratio = (size - base_estimate) / (prefix[end] - prefix[start])
        if size <= max_bytes:
            fits = end
            if end == n or size >= max_bytes * _FULL:
                break
            end = max(_guess_end(prefix, start, base_estimate, ratio, max_bytes), end + 1)
        else:
            over = end
            end = _guess_end(prefix, start, base_estimate, ratio, max_bytes)
    if fits == start:
        row = rows[start]
        raise RowTooLarge(row.get("tier", "?"), row.get("category"), row.get("key", "?"),
                          single_size, max_bytes)
    return fits, ratio
