"""The epoch envelope (DESIGN §9): round trip, every refusal, the buckets, and the split.

Pure functions, so no sandbox: real AES-GCM, real gzip, real keccak. Envelopes that a
correct sealer would never make (a header that disagrees with its plaintext, a gzip bomb)
are built here by hand and encrypted correctly, so the check under test is the only thing
that can refuse them.
"""

from __future__ import annotations

import gzip
import random
import time

import orjson
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kint.tenant_worker import epoch_format
from kint.tenant_worker.epoch_format import (
    BUCKETS,
    DEFAULT_EPOCH_MAX_BYTES,
    HEADER_SIZE,
    TAG_SIZE,
    EnvelopeError,
    Header,
    PlaintextMismatch,
    RowTooLarge,
    UnknownDataKey,
    associated_data,
    bucket_for,
    data_key_id,
    epoch_max_bytes,
    frame_payload,
    measured_size,
    open_envelope,
    seal,
    split_rows,
)

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
CHAIN = 31337
OWNER = "0x" + "ab" * 20
SPACE = "5a" * 32
NONCE = bytes(12)

# Field offsets in the 104-byte header.
FIELDS = {
    "magic": (0, 6), "version": (6, 7), "flags": (7, 8), "seq": (8, 16), "prev": (16, 48),
    "bucket": (48, 52), "rows_root": (52, 84), "key_id": (84, 92), "nonce": (92, 104),
}


_SYLLABLES = ["ka", "ri", "to", "me", "lan", "sor", "vel", "dim", "ex", "pra", "qu", "ho",
              "ni", "zet", "bor", "ul", "fa", "ge"]
_LEXICON_RNG = random.Random(1)
# 3,000 made-up words: text that gzips about as well as real notes do (not 10x).
LEXICON = ["".join(_LEXICON_RNG.choice(_SYLLABLES) for _ in range(_LEXICON_RNG.randint(1, 4)))
           for _ in range(3000)]


def entity_row(i: int, rng: random.Random) -> dict:
    """An entity row as push exports it; the body is ~200 characters of JSON text."""
    body = orjson.dumps({
        "title": f"note {i}: " + " ".join(rng.choice(LEXICON) for _ in range(3)),
        "tags": rng.sample(LEXICON, 3),
        "text": " ".join(rng.choice(LEXICON) for _ in range(16)),
        "ref": f"{rng.getrandbits(32):08x}",
        "n": rng.randint(0, 10**6),
    }).decode()
    return {"op": "put", "tier": "entity", "category": "notes", "key": f"n{i}",
            "fields": {"status": None, "body": body}}


def realistic_rows(count: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    return [entity_row(i, rng) for i in range(count)]


def plaintext(rows: list[dict] | None = None, *, seq: int = 3, snapshot: bool = False) -> dict:
    return {"v": 1, "space": SPACE, "seq": seq, "prev": "11" * 32, "snapshot": snapshot,
            "rows_root": "22" * 32, "rows": realistic_rows(5) if rows is None else rows}


def base(seq: int = 3) -> dict:
    pt = plaintext([], seq=seq)
    del pt["rows"]
    return pt


def sealed(pt: dict | None = None, **kw) -> bytes:
    return seal(plaintext() if pt is None else pt, data_key=KEY, chain_id=CHAIN, owner=OWNER,
                nonce=kw.pop("nonce", NONCE), **kw)


def opened(envelope: bytes, **kw):
    args = {"keys": {data_key_id(KEY): KEY}, "chain_id": CHAIN, "owner": OWNER,
            "space": SPACE}
    args.update(kw)
    return open_envelope(envelope, **args)


def forge(pt: dict, header: Header, *, space: str = SPACE) -> bytes:
    """An envelope whose header is chosen freely but which is encrypted correctly."""
    header_bytes = header.encode()
    aad = associated_data(CHAIN, OWNER, space, header_bytes)
    return header_bytes + AESGCM(KEY).encrypt(header.nonce, frame_payload(orjson.dumps(pt)),
                                              aad)


def header_for(pt: dict, **changes) -> Header:
    fields = {"seq": pt["seq"], "prev": bytes.fromhex(pt["prev"]), "snapshot": pt["snapshot"],
              "bucket": len(frame_payload(orjson.dumps(pt))),
              "rows_root": bytes.fromhex(pt["rows_root"]),
              "key_id": data_key_id(KEY), "nonce": NONCE}
    fields.update(changes)
    return Header(**fields)


# --- round trip and layout -----------------------------------------------------------


def test_round_trip():
    for snapshot in (False, True):
        pt = plaintext(snapshot=snapshot)
        header, back = opened(sealed(pt))
        assert back == pt
        assert (header.seq, header.prev.hex(), header.rows_root.hex(), header.snapshot) == (
            pt["seq"], pt["prev"], pt["rows_root"], snapshot)
        assert header.key_id == data_key_id(KEY) and header.nonce == NONCE


def test_layout_is_header_then_bucket_plus_tag():
    envelope = sealed()
    assert envelope[:6] == b"KINTEP" and envelope[6] == 1 and HEADER_SIZE == 104
    header = Header.decode(envelope[:HEADER_SIZE])
    assert len(envelope) == HEADER_SIZE + header.bucket + TAG_SIZE
    assert header.bucket in BUCKETS
    assert envelope[84:92] == data_key_id(KEY)


def test_header_encode_decode_round_trip():
    header = Header(seq=2**64 - 1, prev=b"\xab" * 32, snapshot=True, bucket=BUCKETS[5],
                    rows_root=b"\xcd" * 32, key_id=b"12345678", nonce=b"n" * 12)
    data = header.encode()
    assert len(data) == HEADER_SIZE and data[7] == 1
    assert Header.decode(data) == header


def test_data_key_id_is_keccak_prefix():
    from eth_hash.auto import keccak
    assert data_key_id(KEY) == keccak(KEY)[:8]
    with pytest.raises(ValueError):
        data_key_id(b"short")


def test_deterministic_with_the_same_nonce():
    pt = plaintext(realistic_rows(50))
    assert sealed(pt) == sealed(pt)
    random_a = seal(pt, data_key=KEY, chain_id=CHAIN, owner=OWNER)
    random_b = seal(pt, data_key=KEY, chain_id=CHAIN, owner=OWNER)
    assert random_a != random_b  # a fresh nonce each time
    assert opened(random_a)[1] == opened(random_b)[1] == pt


def test_gzip_is_standard_and_platform_independent():
    data = orjson.dumps(plaintext())
    gz = epoch_format.gzip_bytes(data)
    assert gzip.decompress(gz) == data
    assert gz[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # mtime 0, OS 255


# --- refusals ------------------------------------------------------------------------


def test_every_header_bit_flip_is_refused():
    envelope = sealed()
    for byte in range(HEADER_SIZE):
        field = next(name for name, (lo, hi) in FIELDS.items() if lo <= byte < hi)
        for bit in range(8):
            bad = bytearray(envelope)
            bad[byte] ^= 1 << bit
            if field == "key_id":
                # A key id this machine does not hold: a gap, not a decrypt attempt.
                with pytest.raises(UnknownDataKey):
                    opened(bytes(bad))
            else:
                with pytest.raises(EnvelopeError):
                    opened(bytes(bad))


def test_header_bit_flips_in_bound_fields_fail_authentication():
    envelope = sealed()
    for field in ("seq", "prev", "rows_root", "nonce"):
        lo, _ = FIELDS[field]
        bad = bytearray(envelope)
        bad[lo] ^= 0x01
        with pytest.raises(EnvelopeError, match="authentication failed"):
            opened(bytes(bad))
    bad = bytearray(envelope)
    bad[7] ^= 0x01  # the snapshot flag
    with pytest.raises(EnvelopeError, match="authentication failed"):
        opened(bytes(bad))


def test_key_id_swapped_to_another_held_key_fails_authentication():
    bad = bytearray(sealed())
    bad[84:92] = data_key_id(OTHER_KEY)
    keys = {data_key_id(KEY): KEY, data_key_id(OTHER_KEY): OTHER_KEY}
    with pytest.raises(EnvelopeError, match="authentication failed"):
        opened(bytes(bad), keys=keys)


def test_header_decode_names_what_is_wrong():
    good = sealed()[:HEADER_SIZE]
    with pytest.raises(EnvelopeError, match="header is 103 bytes"):
        Header.decode(good[:-1])
    with pytest.raises(EnvelopeError, match="not a kint epoch"):
        Header.decode(b"XINTEP" + good[6:])
    with pytest.raises(EnvelopeError, match="unsupported epoch version 2"):
        Header.decode(good[:6] + b"\x02" + good[7:])
    with pytest.raises(EnvelopeError, match="unknown header flag bits 0x80"):
        Header.decode(good[:7] + bytes([good[7] | 0x80]) + good[8:])
    with pytest.raises(EnvelopeError, match="not a bucket size"):
        Header.decode(good[:48] + (513).to_bytes(4, "big") + good[52:])


def test_flipped_ciphertext_byte_is_refused():
    envelope = sealed()
    for pos in (HEADER_SIZE, HEADER_SIZE + 7, len(envelope) - TAG_SIZE - 1, len(envelope) - 1):
        bad = bytearray(envelope)
        bad[pos] ^= 0x40
        with pytest.raises(EnvelopeError, match="authentication failed"):
            opened(bytes(bad))


def test_truncated_or_extended_envelope_is_refused():
    envelope = sealed()
    with pytest.raises(EnvelopeError, match="ciphertext is"):
        opened(envelope[:-1])
    with pytest.raises(EnvelopeError, match="ciphertext is"):
        opened(envelope + b"\x00")
    with pytest.raises(EnvelopeError, match="shorter than the 104-byte header"):
        opened(envelope[:50])


@pytest.mark.parametrize("change", [
    {"chain_id": 8453},
    {"owner": "0x" + "ac" * 20},
    {"space": "5b" * 32},
])
def test_other_chain_owner_or_space_is_refused(change):
    with pytest.raises(EnvelopeError, match="authentication failed"):
        opened(sealed(), **change)


def test_owner_case_does_not_matter():
    assert opened(sealed(), owner=OWNER.upper().replace("0X", "0x"))[1] == plaintext()


def test_unknown_key_id():
    envelope = sealed()
    with pytest.raises(UnknownDataKey) as caught:
        opened(envelope, keys={data_key_id(OTHER_KEY): OTHER_KEY})
    assert caught.value.key_id == data_key_id(KEY)
    assert data_key_id(KEY).hex() in str(caught.value)


@pytest.mark.parametrize("field,changes", [
    ("seq", {"seq": 4}),
    ("prev", {"prev": b"\x33" * 32}),
    ("rows_root", {"rows_root": b"\x44" * 32}),
    ("snapshot", {"snapshot": True}),
])
def test_plaintext_must_agree_with_header(field, changes):
    pt = plaintext()
    envelope = forge(pt, header_for(pt, **changes))
    with pytest.raises(PlaintextMismatch, match=f"disagree on {field}") as caught:
        opened(envelope)
    assert caught.value.field == field
    assert isinstance(caught.value, EnvelopeError)
    # The same construction with an agreeing header opens: only the agreement check refused.
    assert opened(forge(pt, header_for(pt)))[1] == pt


def test_plaintext_space_must_be_the_requested_space():
    pt = plaintext()
    other = "77" * 32
    envelope = forge(pt, header_for(pt), space=other)  # AAD says `other`, plaintext SPACE
    with pytest.raises(PlaintextMismatch, match="disagree on space") as caught:
        opened(envelope, space=other)
    assert caught.value.field == "space"


def test_gzip_bomb_is_refused():
    pt_bytes = b" " * (64 * 1024 * 1024 + 1)  # valid JSON whitespace, one byte past the cap
    import struct
    import zlib
    gz = zlib.compress(pt_bytes, 1, wbits=31)
    framed = struct.pack(">I", len(gz)) + gz
    payload = framed + bytes(bucket_for(len(framed)) - len(framed))
    pt = plaintext()
    header = header_for(pt, bucket=len(payload))
    header_bytes = header.encode()
    envelope = header_bytes + AESGCM(KEY).encrypt(
        NONCE, payload, associated_data(CHAIN, OWNER, SPACE, header_bytes))
    with pytest.raises(EnvelopeError, match="inflates past 67108864 bytes"):
        opened(envelope)


def test_bad_plaintexts_are_not_sealed():
    for bad in ({**plaintext(), "v": 2}, {**plaintext(), "seq": True},
                {**plaintext(), "prev": "AB" * 32}, {**plaintext(), "snapshot": 1},
                {**plaintext(), "rows": {}}, {**plaintext(), "space": "5a" * 31}):
        with pytest.raises(EnvelopeError):
            sealed(bad)


# --- buckets -------------------------------------------------------------------------


def test_buckets_grow_by_at_most_a_quarter():
    assert BUCKETS[0] == 512 and BUCKETS[-1] >= 1024 * 1024
    assert all(b % 16 == 0 for b in BUCKETS)
    for a, b in zip(BUCKETS, BUCKETS[1:]):
        assert a < b <= a * 1.25


def test_padding_overhead_under_a_quarter():
    worst = 0.0
    for n in range(1, 200_001):
        bucket = bucket_for(n)
        assert bucket >= n
        i = BUCKETS.index(bucket)
        assert i == 0 or BUCKETS[i - 1] < n  # the smallest bucket that fits
        if n > 512:
            worst = max(worst, (bucket - n) / n)
    assert worst < 0.25
    print(f"\nworst padding overhead for framed payloads 513..200000: {worst:.5f}")


def test_envelope_padding_under_a_quarter_of_the_framed_gzip():
    rng = random.Random(3)
    for count in (3, 20, 60, 200, 700):
        pt = plaintext([entity_row(i, rng) for i in range(count)])
        envelope = sealed(pt)
        framed = 4 + len(epoch_format.gzip_bytes(orjson.dumps(pt)))
        bucket = len(envelope) - HEADER_SIZE - TAG_SIZE
        assert bucket == bucket_for(framed)
        assert framed <= 512 or bucket < framed * 1.25


# --- sizing and splitting ------------------------------------------------------------


def test_epoch_max_bytes_from_environment(monkeypatch):
    monkeypatch.delenv("KINT_EPOCH_MAX_BYTES", raising=False)
    assert epoch_max_bytes() == DEFAULT_EPOCH_MAX_BYTES == 90_000
    monkeypatch.setenv("KINT_EPOCH_MAX_BYTES", "50000")
    assert epoch_max_bytes() == 50_000
    for bad in ("", "abc", "-5", "0", "1.5e4"):
        monkeypatch.setenv("KINT_EPOCH_MAX_BYTES", bad)
        assert epoch_max_bytes() == DEFAULT_EPOCH_MAX_BYTES


def test_measured_size_is_the_gzip_size_of_the_plaintext():
    rows = realistic_rows(30)
    pt = {**base(), "rows": rows}
    assert measured_size(rows, base=base()) == len(epoch_format.gzip_bytes(orjson.dumps(pt)))


def test_split_empty_and_small():
    assert split_rows([], max_bytes=90_000, base=base()) == []
    rows = realistic_rows(10)
    assert split_rows(rows, max_bytes=90_000, base=base()) == [rows]


def check_split(rows: list[dict], chunks: list[list[dict]], max_bytes: int) -> None:
    assert [row for chunk in chunks for row in chunk] == rows  # order kept, nothing lost
    assert all(chunk for chunk in chunks)
    for chunk in chunks:
        assert measured_size(chunk, base=base()) <= max_bytes
    # Greedy: a chunk short of nearly full is short because the next row would not fit.
    end = 0
    for chunk in chunks[:-1]:
        end += len(chunk)
        assert (measured_size(chunk, base=base()) >= max_bytes * 0.95
                or measured_size(chunk + [rows[end]], base=base()) > max_bytes)


def test_split_10000_rows_keeps_order_and_limit_without_quadratic_work(monkeypatch):
    rows = realistic_rows(10_000)
    measured_rows = []
    real = epoch_format.measured_size

    def counting(chunk, *, base):
        measured_rows.append(len(chunk))
        return real(chunk, base=base)

    monkeypatch.setattr(epoch_format, "measured_size", counting)
    started = time.perf_counter()
    chunks = split_rows(rows, max_bytes=90_000, base=base())
    elapsed = time.perf_counter() - started
    monkeypatch.undo()

    check_split(rows, chunks, 90_000)
    for chunk in chunks[:-1]:  # rows this even fill every chunk but the last
        assert measured_size(chunk, base=base()) > 90_000 * 0.9
    # Not quadratic: each row is compressed a small constant number of times.
    assert sum(measured_rows) <= 6 * len(rows)
    assert len(measured_rows) <= 6 * len(chunks) + 6
    # Wall-clock speed belongs in bench/ (DESIGN §11): printed, not asserted.
    print(f"\nsplit 10000 rows into {len(chunks)} chunks in {elapsed:.2f}s with "
          f"{len(measured_rows)} measurements covering {sum(measured_rows)} rows")


def test_split_uneven_rows_under_small_limit():
    rng = random.Random(11)
    rows = []
    for i in range(600):
        row = entity_row(i, rng)
        if i % 37 == 0:  # now and then a big, poorly compressible row
            row["fields"]["body"] = rng.randbytes(rng.randint(500, 3000)).hex()
        rows.append(row)
    for max_bytes in (7_000, 12_000, 30_000):
        check_split(rows, split_rows(rows, max_bytes=max_bytes, base=base()), max_bytes)


def test_row_too_large_is_named():
    import os
    rows = realistic_rows(20)
    big = {"op": "put", "tier": "entity", "category": "rules", "key": "big-rule",
           "fields": {"status": None, "body": os.urandom(150_000).hex()}}
    with pytest.raises(RowTooLarge) as caught:
        split_rows(rows[:10] + [big] + rows[10:], max_bytes=90_000, base=base())
    err = caught.value
    assert "entity rules/big-rule" in str(err)
    assert (err.tier, err.category, err.key) == ("entity", "rules", "big-rule")
    assert err.size > 90_000 and err.size == measured_size([big], base=base())


def test_row_too_large_without_category_names_just_the_key():
    import os
    big = {"op": "put", "tier": "state", "key": "focus",
           "fields": {"body": os.urandom(60_000).hex()}}
    with pytest.raises(RowTooLarge, match=r"^state focus is too large"):
        split_rows([big], max_bytes=20_000, base=base())


def test_compression_ratio_sanity():
    """Not an assertion on the ratio: how much the envelope costs over plain gzip -9."""
    pt = plaintext(realistic_rows(1_000))
    raw = orjson.dumps(pt)
    plain_gzip = len(gzip.compress(raw, compresslevel=9))
    envelope = len(sealed(pt))
    print(f"\n1000 rows: plaintext {len(raw)} B, gzip -9 {plain_gzip} B, envelope {envelope} B "
          f"(x{envelope / plain_gzip:.3f} of gzip, x{envelope / len(raw):.3f} of plaintext)")
    assert opened(sealed(pt))[1] == pt
