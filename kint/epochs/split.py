"""Cutting a change set into epochs that fit (06-epochs.md, "Splitting a large diff").

One epoch carries at most 92,160 bytes (90 KB) of compressed rows, measured, never estimated:
the candidate chunk's rows and deletions are gzipped as they would be sealed and 512 bytes of
headroom are added for the rest of the plaintext. The largest bucket holds 98,300 bytes of
gzip, so a chunk that measures within the limit always seals. Rows go in order; when the next
row would cross the limit the chunk closes. Deletions travel in the first epoch. Each chunk
carries the rows_root of the state after it, which the caller computes (`state_after`, for
which `MerkleState.apply` serves).

A snapshot is always one epoch: the full state either fits or is refused.

Measuring without going quadratic: each chunk is compressed incrementally. A zlib compressor
holds the chunk so far; a candidate end is measured on a copy of it (`Compress.copy()`), so a
row is compressed about once per chunk rather than once per candidate, and the end is found by
interpolating on the compressed-per-raw-byte ratio seen so far, with bisection when that
stalls. `measure` is the one-shot equivalent, and gives the same number.
"""

from __future__ import annotations

import bisect
import itertools
import zlib
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from kint.epochs.buckets import GZIP_HEADER, GZIP_LEVEL, gzip_bytes
from kint.epochs.errors import EpochTooLarge
from kint.epochs.plaintext import Deletion, WireRow, deletion, encode_json
from kint.rows.canon import Row, canonical_id
from kint.rows.merkle import MerkleTree, rehash

EPOCH_LIMIT = 92_160
HEADROOM = 512
_GZIP_TRAILER = 8

StateAfter = Callable[[Sequence[WireRow], Sequence[Deletion]], tuple[bytes, int]]
"""Called once per chunk, in order, with that chunk's rows and deletions: returns the
rows_root and row count of the full state after it (everything passed so far applied)."""


def _limit_text(limit: int) -> str:
    return f"{limit // 1024} KB" if limit % 1024 == 0 else f"{limit} bytes"


class RowTooLarge(EpochTooLarge):
    """One row alone measures over the limit: no split can carry it. Push refuses (and
    nothing else is blocked) until it is shrunk or split in Sibyl."""

    def __init__(self, row: WireRow, measured: int, limit: int = EPOCH_LIMIT) -> None:
        super().__init__(f"row {row.label()} compresses to more than {_limit_text(limit)} on "
                         "its own and cannot fit one epoch; shrink or split it in Sibyl (push "
                         "refuses until then, nothing else is blocked)")
        self.row = row
        self.measured = measured
        self.limit = limit


class SnapshotTooLarge(EpochTooLarge):
    """The full state does not fit one epoch, and a snapshot cannot be split."""

    def __init__(self, n_rows: int, measured: int, limit: int = EPOCH_LIMIT) -> None:
        super().__init__(f"the full state ({n_rows} rows) compresses to {measured} bytes, more "
                         f"than the {limit} bytes one epoch can carry, and snapshots are "
                         "single-epoch")
        self.n_rows = n_rows
        self.measured = measured
        self.limit = limit


class DeletionsTooLarge(EpochTooLarge):
    """The deletions alone do not fit the first epoch, where they must travel."""

    def __init__(self, n_deleted: int, measured: int, limit: int = EPOCH_LIMIT) -> None:
        super().__init__(f"the {n_deleted} deletions compress to {measured} bytes, more than "
                         f"the {limit} bytes one epoch can carry, and deletions travel in "
                         "the first epoch")
        self.n_deleted = n_deleted
        self.measured = measured
        self.limit = limit


@dataclass(frozen=True)
class Chunk:
    """One epoch's worth of a change set. `measured` is gzip + headroom, `rows_root` and
    `n_rows` describe the full state after this chunk."""

    rows: tuple[WireRow, ...]
    deleted: tuple[Deletion, ...]
    measured: int
    rows_root: bytes
    n_rows: int


# --- measuring -----------------------------------------------------------------------


def _head(deleted: Sequence[Deletion]) -> bytes:
    """The measured document is `{"deleted":[...],"rows":[...]}`: deletions first, so each
    chunk's compressor starts from a fixed prefix and rows are only ever appended."""
    return b'{"deleted":' + encode_json([list(d) for d in deleted]) + b',"rows":['


_TAIL = b"]}"


def measure(rows: Sequence[WireRow], deleted: Sequence[Deletion] = ()) -> int:
    """What the limit applies to: gzip of the chunk's rows and deletions, plus headroom."""
    doc = _head(deleted) + b",".join(row.encode() for row in rows) + _TAIL
    return len(gzip_bytes(doc)) + HEADROOM


class _Stream:
    """A compressor fed a chunk's prefix, and how many bytes it has emitted so far."""

    __slots__ = ("deflate", "emitted")

    def __init__(self, deflate: "zlib._Compress", emitted: int) -> None:
        self.deflate = deflate
        self.emitted = emitted

    @classmethod
    def start(cls, head: bytes) -> _Stream:
        deflate = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, 8,
                                   zlib.Z_DEFAULT_STRATEGY)
        return cls(deflate, len(deflate.compress(head)))

    def extended(self, data: bytes) -> _Stream:
        deflate = self.deflate.copy()
        return _Stream(deflate, self.emitted + len(deflate.compress(data)))

    def measure(self) -> int:
        """gzip size of everything fed plus the closing brackets, plus headroom."""
        final = self.deflate.copy()
        rest = len(final.compress(_TAIL)) + len(final.flush())
        return len(GZIP_HEADER) + self.emitted + rest + _GZIP_TRAILER + HEADROOM


class _Splitter:
    """Finds, for each chunk start, the longest run of rows that measures within the limit."""

    # Compressed bytes per raw byte, before anything is measured; aiming a little low when
    # no over-limit end is known yet costs nothing (the next probe extends the same stream).
    _INITIAL_RATIO = 0.4
    _AIM_LOW = 1.05

    def __init__(self, rows: Sequence[WireRow], limit: int) -> None:
        self.rows = rows
        self.encoded = [row.encode() for row in rows]
        # raw bytes of rows[0:i], each row with the comma that precedes it
        self.prefix = list(itertools.accumulate((len(e) + 1 for e in self.encoded), initial=0))
        self.limit = limit
        self.ratio = self._INITIAL_RATIO

    def _feed(self, stream: _Stream, start: int, lo: int, end: int) -> _Stream:
        data = b",".join(self.encoded[lo:end])
        return stream.extended(b"," + data if lo > start else data)

    def _guess(self, start: int, lo: int, lo_size: int, hi: int | None) -> int:
        top = len(self.rows) if hi is None else hi - 1
        ratio = self.ratio * (self._AIM_LOW if hi is None else 1.0)
        budget = (self.limit - lo_size) / max(ratio, 1e-3)
        guess = bisect.bisect_right(self.prefix, self.prefix[lo] + budget) - 1
        return min(max(guess, lo + 1), top)

    def longest_fit(self, start: int, deleted: Sequence[Deletion]
                    ) -> tuple[int, int, int | None]:
        """(end, measured, first_row_alone): rows[start:end] with `deleted` is the longest
        run within the limit (end == start when not even one row fits); `first_row_alone`
        is the measure of rows[start:start+1] when that one was over the limit."""
        n = len(self.rows)
        stream = _Stream.start(_head(deleted))
        lo, lo_size = start, stream.measure()
        if lo_size > self.limit:
            raise DeletionsTooLarge(len(deleted), lo_size, self.limit)
        empty_size = lo_size
        hi: int | None = None
        hi_size = 0
        same_side = 0
        last_fit: bool | None = None
        while lo < n and (hi is None or hi > lo + 1):
            guess = self._guess(start, lo, lo_size, hi)
            if hi is not None and same_side >= 2:
                guess = (lo + hi) // 2
            candidate = self._feed(stream, start, lo, guess)
            size = candidate.measure()
            raw = self.prefix[guess] - self.prefix[start]
            if size > empty_size and raw > 0:
                self.ratio = (size - empty_size) / raw
            fits = size <= self.limit
            same_side = same_side + 1 if fits == last_fit else 1
            last_fit = fits
            if fits:
                stream, lo, lo_size = candidate, guess, size
            else:
                hi, hi_size = guess, size
        alone = hi_size if lo == start and hi == start + 1 and not deleted else None
        return lo, lo_size, alone


# --- planning epochs -----------------------------------------------------------------


def _check_limit(limit: int) -> None:
    """A lower limit is for tests; a higher one could build a chunk no bucket holds."""
    if isinstance(limit, bool) or not isinstance(limit, int) \
            or not HEADROOM < limit <= EPOCH_LIMIT:
        raise ValueError(f"epoch limit {limit!r} is not in ({HEADROOM}, {EPOCH_LIMIT}]")


def split_diff(rows: Sequence[WireRow], deleted: Iterable[Deletion] = (), *,
               state_after: StateAfter, limit: int = EPOCH_LIMIT) -> list[Chunk]:
    """Cut a diff (changed rows in order, deletions) into consecutive epochs.

    Greedy and in order: each chunk takes rows until the next would cross `limit`; the
    deletions go in the first chunk (alone, if the first row does not fit beside them).
    Raises `RowTooLarge` for the first row that cannot fit an epoch on its own, before
    anything is returned, and `DeletionsTooLarge` when the deletions alone do not fit. An
    empty diff is no epochs.
    """
    _check_limit(limit)
    rows = list(rows)
    pending = tuple(deletion(*d) for d in deleted)
    if not rows and not pending:
        return []
    splitter = _Splitter(rows, limit)
    bounds: list[tuple[int, int, tuple[Deletion, ...], int]] = []
    start = 0
    while start < len(rows) or pending:
        end, size, alone = splitter.longest_fit(start, pending)
        if end == start and start < len(rows):
            if pending:  # the first row does not fit beside the deletions: they go alone
                bounds.append((start, start, pending, size))
                pending = ()
                continue
            raise RowTooLarge(rows[start], alone if alone is not None
                              else measure(rows[start:start + 1]), limit)
        bounds.append((start, end, pending, size))
        pending = ()
        start = end
    chunks = []
    for lo, hi, dels, size in bounds:
        chunk_rows = tuple(rows[lo:hi])
        root, n_rows = state_after(chunk_rows, dels)
        chunks.append(Chunk(chunk_rows, dels, size, root, n_rows))
    return chunks


def plan_snapshot(rows: Sequence[WireRow], deleted: Iterable[Deletion] = (), *,
                  limit: int = EPOCH_LIMIT) -> Chunk:
    """The one epoch of a snapshot: every row of the state, the deletions since the last
    epoch (history only), and the root of exactly its own rows. Raises `SnapshotTooLarge`."""
    _check_limit(limit)
    rows = tuple(rows)
    dels = tuple(deletion(*d) for d in deleted)
    size = measure(rows, dels)
    if size > limit:
        raise SnapshotTooLarge(len(rows), size, limit)
    state = MerkleState.of_rows(rows)
    return Chunk(rows, dels, size, state.root, state.n_rows)


class MerkleState:
    """The full state of a space as canonical id -> leaf, moved forward one chunk at a time.
    `apply` is a `StateAfter`: push builds one from its mirror and hands it to `split_diff`,
    and the epoch cache's check (history, provenance) replays each epoch through one.

    The tree is kept between chunks (the ids in order and every level), and `apply` hashes
    again only what its rows and deletions reach: a row put or removed changes every pair
    after it, a row changed in place only its own path. The whole root rebuilt per chunk cost
    ~60 ms of CPU a chunk at 10,000 rows; a chunk of edits now costs ~24, mostly its own
    rows' leaves (bench/bench_merkle_state.py). New rows whose ids fall early in the order
    still move nearly every pair: a first push hashes what it did. `leaves` is read
    only: change the state through `apply`."""

    def __init__(self, leaves: Mapping[str, bytes] | None = None) -> None:
        self.leaves: dict[str, bytes] = dict(leaves or {})
        self._ids: list[str] = sorted(self.leaves)
        self._tree: MerkleTree | None = None  # built at the first root asked for

    @classmethod
    def of_rows(cls, rows: Iterable[Row | WireRow]) -> MerkleState:
        return cls({row.canonical_id: row.leaf for row in rows})

    @property
    def n_rows(self) -> int:
        return len(self.leaves)

    @property
    def root(self) -> bytes:
        if self._tree is None:
            self._tree = MerkleTree([self.leaves[cid] for cid in self._ids])
        return self._tree.root

    def apply(self, rows: Sequence[WireRow], deleted: Sequence[Deletion]) -> tuple[bytes, int]:
        """Remove the deletions, then put the rows; the new root and row count."""
        before: dict[str, bytes | None] = {}
        for tier, category, key in deleted:
            cid = canonical_id(tier, category, key)
            before.setdefault(cid, self.leaves.get(cid))
            self.leaves.pop(cid, None)
        for row in rows:
            cid = row.canonical_id
            before.setdefault(cid, self.leaves.get(cid))
            self.leaves[cid] = row.leaf
        self._move(before)
        return self.root, self.n_rows

    def _move(self, before: dict[str, bytes | None]) -> None:
        """Bring the ordered ids and the kept tree in step with `leaves`, given each touched
        id's leaf before the change (None: it was absent)."""
        gone = {cid for cid, old in before.items() if old is not None
                and cid not in self.leaves}
        new = [cid for cid, old in before.items() if old is None and cid in self.leaves]
        ids = self._ids
        first = min((bisect.bisect_left(ids, cid) for cid in itertools.chain(gone, new)),
                    default=len(ids))
        if gone or new:
            ids[first:] = sorted([cid for cid in ids[first:] if cid not in gone] + new)
        if self._tree is None:
            return
        leaves = self._tree.levels[0]
        leaves[first:] = [self.leaves[cid] for cid in ids[first:]]
        changed = []
        for cid, old in before.items():
            leaf = self.leaves.get(cid)
            if old is not None and leaf is not None and leaf != old:
                at = bisect.bisect_left(ids, cid)
                if at < first:
                    leaves[at] = leaf
                    changed.append(at)
        rehash(self._tree, first, changed)
