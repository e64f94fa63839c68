"""The drift baseline and the hold (docs/how-it-works.md, "When the watcher pushes, and
when a push is held").

Every kint-server over a store reports each write its tool path made (`note_write`); the
baseline is the whole store's leaves at the last attach, pull or push, moved row by row by
those notes. Before a server-side push (the watcher's, the exit's, `memory_push`), a row
whose stored leaf differs from the mirror's holds the push when a `kint_refusal` entity
names exactly the value it holds now, or when it changed (or an anchored row vanished)
with no note from any session to explain it (a store that lost every anchored row,
changes.store_lost, is named as such: a plain pull restores them). A row that was never
anchored is not drift.
A store kint cannot read holds a server-side push too (`unreadable`): which rows changed
cannot be told. A held push anchors nothing and drops nothing. `kint push` from a terminal
is never held.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from kint.outcomes import NOTHING_ANCHORED_OR_DROPPED
from kint.protocol.hints import DRIFT_HOLD_HINT, STORE_LOST_HOLD_HINT
from kint.rows.canon import Row
from kint.rows.export import export_rows
from kint.tenant_worker.changes import store_lost
from kint.tenant_worker.statefiles import Mirror
from kint.tenant_worker.store import archived_entities
from kint.tenant_worker.store_errors import (StoreDenied, StoreLocked, StoreUnreadable,
                                            is_damaged)
from kint.tenant_worker.verify import refused_values

log = logging.getLogger("kint.worker")

# The hint of a hold over a value memory_verify refused (a kint_refusal entity names
# exactly it); the other holds' are kint.protocol.hints' (DRIFT_HOLD_HINT, STORE_LOST_HOLD_HINT),
# which kint-server knows them by.
HOLD_HINT = f"{NOTHING_ANCHORED_OR_DROPPED}; memory_verify still refuses the row"


@dataclass
class Hold:
    message: str
    reason: str  # what tried to push: watcher, exit, tool, or status
    at: str
    # The push's refusal's hint (hold_error). Not handed over (session_handoff): a taken-over
    # hold is found again by the next push, with its own (`_record` keeps the new one's).
    hint: str = NOTHING_ANCHORED_OR_DROPPED

    def to_json(self) -> dict[str, str]:
        return {"message": self.message, "reason": self.reason, "at": self.at}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class DriftBaseline:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._leaves: dict[str, str | None] | None = None
        self._logged: set[str] = set()
        self.held: Hold | None = None

    @property
    def active(self) -> bool:
        with self._lock:
            return self._leaves is not None

    def reset(self, rows: list[Row]) -> None:
        """The whole store becomes the baseline (attach, and after a pull or push)."""
        with self._lock:
            self._leaves = {r.canonical_id: r.leaf.hex() for r in rows}

    def handed(self) -> dict[str, Any]:
        """The baseline and the hold as a successor worker takes them over
        (session_handoff.py): the notes of the sessions still attached live on in it."""
        with self._lock:
            return {"leaves": dict(self._leaves) if self._leaves is not None else None,
                    "held": self.held.to_json() if self.held is not None else None}

    def take_over(self, leaves: dict[str, str | None] | None, held: Hold | None) -> None:
        """Go on from a recycled worker's baseline and hold (`handed`)."""
        with self._lock:
            self._leaves = dict(leaves) if leaves is not None else None
            self.held = held
            if held is not None:
                self._logged.add(held.message)  # logged once already, by the worker before

    def note(self, canonical: str, leaf: str | None) -> None:
        """A session's tool path wrote this row (leaf None: it deleted it)."""
        with self._lock:
            if self._leaves is not None:
                self._leaves[canonical] = leaf

    def evaluate(self, conn: sqlite3.Connection, tenant: str, mirror: Mirror | None,
                 reason: str, *, db: str) -> Hold | None:
        """The hold for a server-side push now, or None. Records it for `memory_status`.
        `db`, the store `conn` reads, names it when its archive cannot be read: StoreLocked
        or StoreUnreadable (store.archived_entities), never a hold over a "lost" store. A
        push answers that failure as its read of the rows answers the same SQLite error
        (push_refusals.read_refusal: a damaged archive is held as a damaged store, by
        `unreadable`); `status` shows that hold too (`damaged_archive`), and refuses the
        rest as its own count of the rows does (state_health.store_refusal)."""
        rows = export_rows(conn, tenant)
        current = {r.canonical_id: r for r in rows}
        anchored = mirror.rows if mirror is not None else {}
        refusals = refused_values(rows)
        with self._lock:
            baseline = dict(self._leaves) if self._leaves is not None else None
        refused: list[str] = []
        behind: list[str] = []
        for cid, old in anchored.items():
            row = current.get(cid)
            leaf = row.leaf.hex() if row is not None else None
            if leaf == old.leaf.hex():
                continue
            label = old.label()
            if row is not None and (cid, leaf) in refusals:
                refused.append(label)
                continue
            if baseline is not None and baseline.get(cid, old.leaf.hex()) != leaf:
                behind.append(label)
        hold = None
        if behind and store_lost(mirror, rows, lambda: archived_entities(conn, tenant, db)):
            hold = Hold(
                f"refusing to anchor: the store holds none of the {len(anchored)} row(s) "
                f"anchored from it (deleted, moved or replaced: another tenant's pull may "
                f"have remade a store they share), and anchoring would make the chain record "
                f"the deletion of every one. `kint pull` restores them (or `kint push` from "
                f"your own terminal anchors the deletions, if they are meant).", reason, _now(),
                STORE_LOST_HOLD_HINT)
        elif behind:
            hold = Hold(
                f"refusing to anchor: {len(behind)} row(s) changed behind Sibyl's tools while "
                f"this server was running ({', '.join(behind)}). Anchoring would make the chain "
                f"vouch for a value kint cannot account for. Check the store, then `kint push` "
                f"from your own terminal (or `kint pull --discard-local` to restore the "
                f"anchored value).", reason, _now(), DRIFT_HOLD_HINT)
        elif refused:
            hold = Hold(
                f"refusing to anchor: {len(refused)} row(s) hold a value memory_verify refused "
                f"({', '.join(refused)}). Anchoring would make the chain vouch for it. Check "
                f"the store, then `kint push` from your own terminal (or `kint pull "
                f"--discard-local` to restore the anchored value).", reason, _now(), HOLD_HINT)
        return self._record(hold, reason)

    def unreadable(self, db: str, why: str, reason: str) -> Hold:
        """The hold over a store kint cannot read: which rows changed behind Sibyl's tools
        cannot be told, and an unchecked push is what the hold exists to stop."""
        hold = Hold(
            f"refusing to anchor: kint cannot read the store {db} ({why}), so it cannot tell "
            f"which rows changed behind Sibyl's tools. Check the store file (kint only reads "
            f"it); `kint pull --discard-local` moves it aside and restores the anchored "
            f"values.", reason, _now(), NOTHING_ANCHORED_OR_DROPPED)
        return self._record(hold, reason) or hold

    def damaged_archive(self, err: StoreUnreadable, db: str, reason: str) -> Hold | None:
        """The hold `unreadable` over a store whose archive's read (store.archived_entities)
        failed as a damaged file fails (store_errors.is_damaged), or None for any other
        failure: a lock, this user's permission, a read that failed outside the file. So
        `status` shows the hold a server-side push meets over that store
        (push_refusals.read_refusal), where it failed INTERNAL itself.

        Only the hold is shared. Status refuses the other failures as its own count of the
        store's rows refuses the same SQLite error (state_health.store_refusal, as pull and
        export do), so one status never words one store two ways; the push's words for
        them (read_refusal) are about the push: "nothing was anchored", run the push again,
        nothing held. A hold is the push's state, which status exists to show."""
        if isinstance(err, (StoreLocked, StoreDenied)) or err.error is None \
                or not is_damaged(err.error):
            return None
        return self.unreadable(db, str(err.error), reason)

    def _record(self, hold: Hold | None, reason: str) -> Hold | None:
        """Keep `hold` for `memory_status` (None: nothing is held now), and log each
        distinct hold once."""
        with self._lock:
            if hold is not None and self.held is not None and self.held.message == hold.message:
                # the same hold: keep who found it first, and when; its hint is this one's
                hold = replace(self.held, hint=hold.hint)
            self.held = hold
            first = hold is not None and hold.message not in self._logged
            if first:
                self._logged.add(hold.message)
        if first and hold is not None:
            log.warning("push HELD (%s): %s", reason, hold.message)
        return hold


def hold_error(hold: Hold) -> Any:
    """A held push's refusal: the hold's words, and its own hint."""
    from kint.protocol import ErrorCode, ProtocolError

    return ProtocolError(ErrorCode.HELD, hold.message, hold.hint)
