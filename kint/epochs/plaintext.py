"""The epoch plaintext: the JSON document that is gzipped, padded and sealed (06-epochs.md,
"The plaintext").

Byte-exactness is the point. The document is serialised with no spaces, non-ASCII kept as
UTF-8, and keys in one fixed order, so two kints build the same bytes from the same rows:
`v, tenant, space, seq, prev, rows, deleted, rows_root, n_rows, created_at`, then
`"snapshot": true` last on a snapshot and absent on every other epoch (so a diff epoch stays
byte-identical to the v1 format). Each wire row has the keys `tier, key, category, status,
body, meta, ts, evaluated, acted, forward, extra`; `body`, `meta` and the journal fields are
Sibyl's exact stored TEXT, carried as strings and never re-serialised, or every leaf would
change on the next machine.

A plaintext read back is validated field by field and refused with `PlaintextError` when it
is not this shape: a reader applies these rows to a store, so nothing half-understood gets
through. Keys this reader does not know are ignored (the format's version is `v`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Sequence

from kint.epochs import coerce
from kint.epochs.errors import PlaintextError
from kint.rows.canon import FIELDS, TIERS, Row, Tier, canonical_id, row_label

PLAINTEXT_VERSION = 1
PLAINTEXT_KEYS: tuple[str, ...] = ("v", "tenant", "space", "seq", "prev", "rows", "deleted",
                                   "rows_root", "n_rows", "created_at")
SNAPSHOT_KEY = "snapshot"
WIRE_ROW_KEYS: tuple[str, ...] = ("tier", "key", "category", "status", "body", "meta", "ts",
                                  "evaluated", "acted", "forward", "extra")
CREATED_AT_FORMAT = "%Y-%m-%dT%H:%M:%SZ"

# The wire fields each tier may carry besides tier and key; every other one must be null.
# `ts` on entity, state and reference rows is Sibyl's stored updated_at: carried on the
# wire, but not in the leaf (Sibyl regenerates it on replay).
_TEXT_FIELDS: tuple[str, ...] = WIRE_ROW_KEYS[2:]
TIER_WIRE_FIELDS: dict[str, frozenset[str]] = {
    "entity": frozenset({"category", "status", "body", "ts"}),
    "state": frozenset({"body", "ts"}),
    "reference": frozenset({"body", "meta", "ts"}),
    "journal": frozenset({"ts", "evaluated", "acted", "forward", "extra"}),
}

_HEX64 = re.compile(r"[0-9a-f]{64}")

Deletion = tuple[str, str | None, str]
"""`(tier, category or None, key)`: a row removed since the last anchored epoch."""


def encode_json(value: Any) -> bytes:
    """The one serialisation every epoch uses: `separators=(",", ":")`, `ensure_ascii=False`,
    UTF-8. Text that cannot be UTF-8 (a lone surrogate) is refused, not escaped."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as err:
        raise PlaintextError(f"text that is not valid UTF-8 cannot go in an epoch ({err})") \
            from None


def created_at_now(now: datetime | None = None) -> str:
    """The writer's clock as the plaintext writes it (`%Y-%m-%dT%H:%M:%SZ`, UTC)."""
    moment = now if now is not None else datetime.now(timezone.utc)
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc)
    return moment.strftime(CREATED_AT_FORMAT)


@dataclass(frozen=True, slots=True)
class WireRow:
    """One row as an epoch carries it. Fields a tier does not have are None, and the
    constructor refuses a value in one (it would change v0.3.0's leaf, not ours)."""

    tier: str
    key: str
    category: str | None = None
    status: str | None = None
    body: str | None = None
    meta: str | None = None
    ts: str | None = None
    evaluated: str | None = None
    acted: str | None = None
    forward: str | None = None
    extra: str | None = None

    def __post_init__(self) -> None:
        if self.tier not in TIERS:
            raise PlaintextError(f"row tier {self.tier!r} is not one of {', '.join(TIERS)}")
        if not isinstance(self.key, str):
            raise PlaintextError(f"{self.tier} row key {self.key!r} is not a string")
        allowed = TIER_WIRE_FIELDS[self.tier]
        for name in _TEXT_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, str):
                raise PlaintextError(f"{self.tier} row {self.key!r}: {name} is "
                                     f"{type(value).__name__}, not a string or null")
            if name not in allowed:
                raise PlaintextError(f"{self.tier} row {self.key!r}: a {self.tier} row "
                                     f"carries no {name}, but it is {value!r}")

    @property
    def canonical_id(self) -> str:
        return canonical_id(self.tier, self.category, self.key)

    def label(self) -> str:
        """`entity rules/release-gate`, `state focus`: how a message names the row."""
        return row_label(self.tier, self.category, self.key)

    def to_json(self) -> dict[str, str | None]:
        """The row as a JSON object, keys in wire order."""
        return {"tier": self.tier, "key": self.key, "category": self.category,
                "status": self.status, "body": self.body, "meta": self.meta, "ts": self.ts,
                "evaluated": self.evaluated, "acted": self.acted, "forward": self.forward,
                "extra": self.extra}

    def encode(self) -> bytes:
        """This row's bytes inside the plaintext's `rows` list (used to measure chunks)."""
        return encode_json(self.to_json())

    @classmethod
    def from_json(cls, value: Any, where: str = "row") -> WireRow:
        """A parsed JSON row; every one of the eleven keys must be present."""
        if not isinstance(value, dict):
            raise PlaintextError(f"{where} is not a JSON object")
        missing = [k for k in WIRE_ROW_KEYS if k not in value]
        if missing:
            raise PlaintextError(f"{where} lacks {', '.join(missing)}")
        try:
            return cls(**{k: value[k] for k in WIRE_ROW_KEYS})
        except PlaintextError as err:
            raise PlaintextError(f"{where}: {err}") from None

    @classmethod
    def from_row(cls, row: Row, *, ts: str | None = None) -> WireRow:
        """Our row model on the wire. `ts` is the stored `updated_at` of an entity, state or
        reference row (our export does not read it, so it is the caller's to pass); a
        journal row's `ts` is its content and comes from the row itself."""
        f = row.fields
        if row.tier == "entity":
            return cls("entity", row.key, row.category, status=f.get("status"),
                       body=f.get("body"), ts=ts)
        if row.tier == "state":
            return cls("state", row.key, body=f.get("body"), ts=ts)
        if row.tier == "reference":
            return cls("reference", row.key, body=f.get("body"), meta=f.get("metadata"), ts=ts)
        if row.tier == "journal":
            if ts is not None and ts != f.get("ts"):
                raise ValueError("a journal row's ts is its content; pass none")
            return cls("journal", row.key, **{name: f.get(name) for name in FIELDS["journal"]})
        raise ValueError(f"unknown tier {row.tier!r}")

    def to_row(self) -> Row:
        """The row in our model (fields shaped as kint.rows.export makes them), whose leaf is
        the one v0.3.0 computes. An entity/state/reference `ts` is dropped: it is not
        content."""
        tier: Tier = self.tier  # type: ignore[assignment]
        if tier == "entity":
            return Row("entity", self.category, self.key,
                       {"status": self.status, "body": self.body})
        if tier == "state":
            return Row("state", None, self.key, {"body": self.body})
        if tier == "reference":
            return Row("reference", None, self.key, {"body": self.body, "metadata": self.meta})
        return Row("journal", None, self.key,
                   {"ts": self.ts, "evaluated": self.evaluated, "acted": self.acted,
                    "forward": self.forward, "extra": self.extra})

    @property
    def leaf(self) -> bytes:
        return self.to_row().leaf


def deletion(tier: str, category: str | None, key: str) -> Deletion:
    """A checked `deleted` entry: the category is set on entities only."""
    if tier not in TIERS:
        raise PlaintextError(f"deleted tier {tier!r} is not one of {', '.join(TIERS)}")
    if not isinstance(key, str):
        raise PlaintextError(f"deleted {tier} key {key!r} is not a string")
    if category is not None and (tier != "entity" or not isinstance(category, str)):
        raise PlaintextError(f"deleted {tier} {key!r} has category {category!r}; only an "
                             "entity has one, as a string")
    return (tier, category, key)


def deletion_of(row: Row | WireRow) -> Deletion:
    return deletion(row.tier, row.category, row.key)


@dataclass(frozen=True)
class Plaintext:
    """One epoch's plaintext. Digests are 64 lowercase hex digits, as on the wire."""

    tenant: str
    space: str
    seq: int
    prev: str
    rows: tuple[WireRow, ...]
    deleted: tuple[Deletion, ...]
    rows_root: str
    n_rows: int
    created_at: str
    snapshot: bool = False
    v: int = field(default=PLAINTEXT_VERSION)

    def __post_init__(self) -> None:
        if type(self.v) is not int or self.v != PLAINTEXT_VERSION:
            raise PlaintextError(f"plaintext version {self.v!r} is not {PLAINTEXT_VERSION}")
        if not isinstance(self.tenant, str):
            raise PlaintextError(f"plaintext tenant {self.tenant!r} is not a string")
        for name in ("space", "prev", "rows_root"):
            value = getattr(self, name)
            if not isinstance(value, str) or not _HEX64.fullmatch(value):
                raise PlaintextError(f"plaintext {name} {value!r} is not 64 lowercase hex "
                                     "digits")
        if isinstance(self.seq, bool) or not isinstance(self.seq, int) \
                or not 1 <= self.seq <= coerce.U64_MAX:
            raise PlaintextError(f"plaintext seq {self.seq!r} is not an integer from 1 to "
                                 "2^64-1")
        if isinstance(self.n_rows, bool) or not isinstance(self.n_rows, int) \
                or self.n_rows < 0:
            raise PlaintextError(f"plaintext n_rows {self.n_rows!r} is not a count")
        if not isinstance(self.created_at, str):
            raise PlaintextError(f"plaintext created_at {self.created_at!r} is not a string")
        if not isinstance(self.snapshot, bool):
            raise PlaintextError(f"plaintext snapshot {self.snapshot!r} is not true")
        if not all(isinstance(row, WireRow) for row in self.rows):
            raise PlaintextError("plaintext rows must be WireRow values")
        seen: set[str] = set()
        for row in self.rows:
            cid = row.canonical_id
            if cid in seen:
                raise PlaintextError(f"plaintext carries {row.label()} twice")
            seen.add(cid)
        for entry in self.deleted:
            if not isinstance(entry, tuple) or len(entry) != 3:
                raise PlaintextError(f"deleted entry {entry!r} is not [tier, category, key]")
            deletion(*entry)

    def to_json(self) -> dict[str, Any]:
        """The document, keys in wire order; `snapshot` only when true, and last."""
        out: dict[str, Any] = {
            "v": self.v, "tenant": self.tenant, "space": self.space, "seq": self.seq,
            "prev": self.prev, "rows": [row.to_json() for row in self.rows],
            "deleted": [list(entry) for entry in self.deleted], "rows_root": self.rows_root,
            "n_rows": self.n_rows, "created_at": self.created_at,
        }
        if self.snapshot:
            out[SNAPSHOT_KEY] = True
        return out

    def encode(self) -> bytes:
        return encode_json(self.to_json())


def build_plaintext(*, tenant: str, space: bytes | str, seq: int, prev: bytes | str,
                    rows: Iterable[WireRow], deleted: Iterable[Deletion] = (),
                    rows_root: bytes | str, n_rows: int, created_at: str | None = None,
                    snapshot: bool = False) -> bytes:
    """The exact plaintext bytes of one epoch. `created_at` defaults to now (UTC)."""
    return make_plaintext(tenant=tenant, space=space, seq=seq, prev=prev, rows=rows,
                          deleted=deleted, rows_root=rows_root, n_rows=n_rows,
                          created_at=created_at, snapshot=snapshot).encode()


def make_plaintext(*, tenant: str, space: bytes | str, seq: int, prev: bytes | str,
                   rows: Iterable[WireRow], deleted: Iterable[Deletion] = (),
                   rows_root: bytes | str, n_rows: int, created_at: str | None = None,
                   snapshot: bool = False) -> Plaintext:
    """`build_plaintext` before encoding, for a caller that also wants the parsed form."""
    return Plaintext(
        tenant=tenant, space=coerce.hex32(space, "space"), seq=seq,
        prev=coerce.hex32(prev, "prev"), rows=tuple(rows),
        deleted=tuple(deletion(*entry) for entry in deleted),
        rows_root=coerce.hex32(rows_root, "rows_root"), n_rows=n_rows,
        created_at=created_at if created_at is not None else created_at_now(),
        snapshot=snapshot)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        names = [k for k, _ in pairs]
        dupes = sorted({k for k in names if names.count(k) > 1})
        raise PlaintextError(f"plaintext repeats the key(s) {', '.join(map(repr, dupes))}")
    return out


def parse_plaintext(raw: bytes) -> Plaintext:
    """Read and validate decrypted plaintext bytes; `PlaintextError` says what is wrong."""
    try:
        text = bytes(raw).decode("utf-8")
    except UnicodeDecodeError as err:
        raise PlaintextError(f"plaintext is not UTF-8 ({err})") from None
    try:
        doc = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as err:
        raise PlaintextError(f"plaintext is not JSON ({err})") from None
    return plaintext_from_json(doc)


def plaintext_from_json(doc: Any) -> Plaintext:
    """Validate an already-parsed plaintext document (say, one read from the epoch cache)."""
    if not isinstance(doc, Mapping):
        raise PlaintextError("plaintext is not a JSON object")
    missing = [k for k in PLAINTEXT_KEYS if k not in doc]
    if missing:
        raise PlaintextError(f"plaintext lacks {', '.join(missing)}")
    snapshot = doc.get(SNAPSHOT_KEY, False)
    if snapshot is not True and snapshot is not False:
        raise PlaintextError(f"plaintext snapshot {snapshot!r} is not true")
    rows_value, deleted_value = doc["rows"], doc["deleted"]
    if not isinstance(rows_value, list):
        raise PlaintextError("plaintext rows is not a list")
    if not isinstance(deleted_value, list):
        raise PlaintextError("plaintext deleted is not a list")
    rows = tuple(WireRow.from_json(row, f"rows[{i}]") for i, row in enumerate(rows_value))
    deleted: list[Deletion] = []
    for i, entry in enumerate(deleted_value):
        if not isinstance(entry, list) or len(entry) != 3:
            raise PlaintextError(f"deleted[{i}] is not [tier, category, key]")
        try:
            deleted.append(deletion(*entry))
        except PlaintextError as err:
            raise PlaintextError(f"deleted[{i}]: {err}") from None
    return Plaintext(tenant=doc["tenant"], space=doc["space"], seq=doc["seq"],
                     prev=doc["prev"], rows=rows, deleted=tuple(deleted),
                     rows_root=doc["rows_root"], n_rows=doc["n_rows"],
                     created_at=doc["created_at"], snapshot=snapshot, v=doc["v"])


def wire_rows(rows: Sequence[Row], updated_at: Mapping[str, str | None] | None = None
              ) -> list[WireRow]:
    """Rows in wire form; `updated_at` maps canonical id to the stored updated_at of an
    entity, state or reference row (absent ids travel with `ts` null)."""
    stamps = updated_at or {}
    return [WireRow.from_row(row, ts=None if row.tier == "journal"
                             else stamps.get(row.canonical_id)) for row in rows]
