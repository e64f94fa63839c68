"""The leaf byte layout, journal identity and canonical ids (docs/how-it-works.md, "The
leaf and the rows root").

Every field is written as a 4-byte big-endian length and its UTF-8 bytes; a null field is
the length 0xFFFFFFFF and no bytes. The text is hashed exactly as Sibyl stored it:
re-serialising (say, with sorted keys) would change the hash, and every row would refuse
on a second machine.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Iterable, Literal, get_args

from kint.keccak import keccak

Tier = Literal["entity", "state", "reference", "journal"]
TIERS: tuple[Tier, ...] = ("entity", "state", "reference", "journal")
# The tiers whose rows are rewritten in place, and so have versions to list: a journal
# event is appended once and never changes.
VersionedTier = Literal["entity", "state", "reference"]
VERSIONED_TIERS: tuple[VersionedTier, ...] = get_args(VersionedTier)

LEAF_PREFIX = b"kint-leaf-v1"
JOURNAL_KEY_PREFIX = b"kint-journal-key-v1"
NULL_LENGTH = 0xFFFFFFFF

# The stored columns of each tier that are content (and so go into the leaf and an epoch).
FIELDS: dict[Tier, tuple[str, ...]] = {
    "entity": ("status", "body"),
    "state": ("body",),
    "reference": ("body", "metadata"),
    "journal": ("ts", "evaluated", "acted", "forward", "extra"),
}


def encode_fields(values: Iterable[str | None]) -> bytes:
    out = bytearray()
    for value in values:
        if value is None:
            out += struct.pack(">I", NULL_LENGTH)
        else:
            data = value.encode("utf-8")
            out += struct.pack(">I", len(data))
            out += data
    return bytes(out)


def journal_content_key(ts: str | None, evaluated: str | None, acted: str | None,
                        forward: str | None, extra: str | None) -> str:
    """A journal event's identity is its content (its uuid is new on every replay)."""
    return keccak(JOURNAL_KEY_PREFIX + encode_fields([ts, evaluated, acted, forward, extra])).hex()


def numbered_journal_key(content_key: str, occurrence: int) -> str:
    """The first event with this content keeps the bare key; the second gets `:1`, ..."""
    return content_key if occurrence == 0 else f"{content_key}:{occurrence}"


@dataclass(frozen=True)
class Row:
    """One row of a space: its identity and the exact stored text of its content columns."""

    tier: Tier
    category: str | None
    key: str
    fields: dict[str, str | None]

    @property
    def canonical_id(self) -> str:
        return canonical_id(self.tier, self.category, self.key)

    @functools.cached_property
    def leaf(self) -> bytes:
        """Computed once per row object (a row's fields never change after it is made)."""
        return leaf(self.tier, self.category, self.key, self.fields)

    def label(self) -> str:
        """`entity rules/release-gate`, `state focus`: how a reason names a row."""
        return row_label(self.tier, self.category, self.key)


def row_label(tier: str, category: str | None, key: str) -> str:
    return f"{tier} {category}/{key}" if category is not None else f"{tier} {key}"


def canonical_id(tier: str, category: str | None, key: str) -> str:
    """Orders leaves in the tree: tier, category and key joined by NUL (never rowid)."""
    return "\x00".join((tier, category or "", key))


def leaf(tier: str, category: str | None, key: str, fields: dict[str, str | None]) -> bytes:
    if tier == "journal":
        values = ["journal", None, key, None, *(fields.get(f) for f in FIELDS["journal"])]
    elif tier == "entity":
        values = ["entity", category, key, fields.get("status"), fields.get("body"), None]
    elif tier == "state":
        values = ["state", None, key, None, fields.get("body"), None]
    elif tier == "reference":
        values = ["reference", None, key, None, fields.get("body"), fields.get("metadata")]
    else:
        raise ValueError(f"unknown tier {tier!r}")
    return keccak(LEAF_PREFIX + encode_fields(values))
