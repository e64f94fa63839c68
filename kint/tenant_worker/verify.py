"""Verify before acting (docs/how-it-works.md, "Verify: four statuses, seven checks"):
Sibyl finds the row, kint re-reads its exact stored text, hashes it into a leaf, and checks
the leaf against what this machine last saw anchored. The answer is `proceed` or `refuse`,
with the evidence.

The decision walks the seven checks that page lists, in order, and stops at the first that
applies. Reasons are v0.3.0's words (07-verify.md). A refusal over a drifted or missing row
is written back into the store through Sibyl's own `set_entity`, so the next session finds
it with Sibyl's tools.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from kint.rows.canon import Row, canonical_id, row_label
from kint.rows.export import read_row
from kint.tenant_worker.chain_head import HeadReading
from kint.tenant_worker.statefiles import CorruptStateFile, EpochMeta, Mirror, SpaceState
from kint.tx_text import tx_0x

REFUSAL_CATEGORY = "kint_refusal"
REFUSAL_NAME_MAX = 200

REASON_VERIFIED = "stored text matches the leaf anchored on Base"
REASON_UNANCHORED = ("this row was written after the last anchored epoch; nothing on the "
                     "chain vouches for it yet (push first)")
REASON_MISSING = "the row the search returned is no longer in the store"
REASON_PROOF_FAILED = "leaf matches but the inclusion proof against the anchored rows_root failed"
REASON_NEVER = "this machine has never pulled or pushed: nothing on the chain has been checked"
REASON_ALL_UNANCHORED = ("every candidate is unanchored: nothing on the chain vouches for it "
                         "yet; push, then verify")


def _short(hexstr: str | None) -> str | None:
    return hexstr[:16] if hexstr else None


def verdict_copy(verdict: Any) -> dict[str, Any]:
    """kint's own copy of Sibyl's verdict: code, returned, recovery, tokens, gate (only
    when set), explain."""
    out: dict[str, Any] = {"code": verdict.code.value, "returned": int(verdict.returned),
                           "recovery": verdict.recovery, "tokens": list(verdict.tokens)}
    if verdict.gate is not None:
        out["gate"] = verdict.gate.value
    out["explain"] = verdict.explain()
    return out


def _hit_json(hit: dict[str, Any]) -> dict[str, Any]:
    return {k: hit.get(k) for k in ("tier", "key", "category", "snippet", "rank", "ts")}


@dataclass
class Check:
    tier: str
    key: str
    category: str | None
    status: str
    reason: str
    local_leaf: str | None = None
    anchored_leaf: str | None = None
    anchored_seq: int | None = None
    anchored_block: int | None = None
    anchored_tx: str | None = None
    head_seq: int | None = None
    head_block: int | None = None
    rows_root: str | None = None
    proof: list[list[str | bool]] | None = None
    proof_ok: bool | None = None

    @property
    def label(self) -> str:
        return row_label(self.tier, self.category, self.key)

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in (
            "tier", "key", "category", "status", "local_leaf", "anchored_leaf", "anchored_seq",
            "anchored_block", "anchored_tx", "head_seq", "head_block", "rows_root", "proof",
            "proof_ok", "reason")}


def check_hit(meta_of: Callable[[int], EpochMeta], mirror: Mirror, stored: Row | None,
              hit: dict[str, Any]) -> Check:
    """One hit's status: verified, drifted, unanchored or missing (the table in
    docs/how-it-works.md). `meta_of(seq)` is the anchored epoch's metadata (`_metas`)."""
    head = mirror.head
    base = dict(tier=hit["tier"], key=hit["key"], category=hit.get("category"),
                head_seq=head.seq, head_block=head.block, rows_root=mirror.anchored_root)
    if stored is None:
        return Check(status="missing", reason=REASON_MISSING, **base)
    base["key"] = stored.key  # a journal event is known by its content key, not its uuid
    local = stored.leaf.hex()
    anchored = mirror.rows.get(stored.canonical_id)
    if anchored is None:
        return Check(status="unanchored", reason=REASON_UNANCHORED, local_leaf=local, **base)
    meta = meta_of(anchored.seq)
    evidence = dict(local_leaf=local, anchored_leaf=anchored.leaf.hex(),
                    anchored_seq=anchored.seq, anchored_block=meta.block, anchored_tx=meta.tx)
    if anchored.leaf != stored.leaf:
        reason = (f"the stored text of this row no longer matches what was anchored: the chain "
                  f"vouches for {_short(anchored.leaf.hex())} (epoch {anchored.seq}, no later "
                  f"than block {meta.block}), the store now holds {_short(local)} (unanchored, "
                  f"head epoch {head.seq} at block {head.block})")
        return Check(status="drifted", reason=reason, **evidence, **base)
    # The stored leaf equals the mirror's here, so the mirror's checked proof is this row's.
    proof, ok = mirror.checked_proof(stored.canonical_id)
    return Check(status="verified" if ok else "drifted",
                 reason=REASON_VERIFIED if ok else REASON_PROOF_FAILED,
                 proof=proof, proof_ok=ok, **evidence, **base)


def _metas(state: SpaceState) -> Callable[[int], EpochMeta]:
    """Each epoch's metadata read once per verify: its hits mostly sit in the same few
    epochs, and each read of the file is a stat of it (SpaceState's cache checks the file
    is unchanged), which costs a worker several microseconds in place, five times a call
    at limit 5 for nothing. Within one verify the epoch cache is as of that call."""
    seen: dict[int, EpochMeta] = {}

    def meta_of(seq: int) -> EpochMeta:
        meta = seen.get(seq)
        if meta is None:
            meta = seen[seq] = state.meta(seq)
        return meta

    return meta_of


def refusal_name(check: Check, unix_seconds: int | None = None) -> str:
    """The refusal entity's name as kint v0.3.0 gives it (07-verify.md, "The refusal is
    written back"): tier, category (`none` without one), key and the unix seconds of the
    write, cut to 200 characters. The name is a label for people and Sibyl's tools only:
    the hold finds the refused value by the body's `local_leaf` (`refused_values`), and a
    value refused again while its refusal is still in the store is named, not written
    again (`refusal_on_record`)."""
    seconds = int(time.time()) if unix_seconds is None else unix_seconds
    return f"{check.tier}-{check.category or 'none'}-{check.key}-{seconds}"[:REFUSAL_NAME_MAX]


def refused_values(rows: list[Row]) -> set[tuple[str, str]]:
    """(canonical id, leaf) of every value a `kint_refusal` entity among `rows` refused,
    read from its body's `tier`, `category`, `key` and `local_leaf`. The body, not the name,
    so a refusal written under this kint's former name (`TIER-CATEGORY-KEY-LEAF16`) in a
    store that predates v0.3.0's names still holds the value it refused. A body that does
    not parse, or names no leaf (a row that was missing), refuses no stored value."""
    refused: set[tuple[str, str]] = set()
    for row in rows:
        if row.tier != "entity" or row.category != REFUSAL_CATEGORY:
            continue
        try:
            body = json.loads(row.fields.get("body") or "")
        except ValueError:
            continue
        if not isinstance(body, dict):
            continue
        tier, category, key, leaf = (body.get(f) for f in ("tier", "category", "key",
                                                            "local_leaf"))
        if not (isinstance(tier, str) and isinstance(key, str) and isinstance(leaf, str)
                and (category is None or isinstance(category, str))):
            continue
        # The leaf as this kint writes it (64 hex, no 0x), whichever kint wrote the body.
        refused.add((canonical_id(tier, category, key), leaf.lower().removeprefix("0x")))
    return refused


def _leaf_text(leaf: Any) -> Any:
    """A body's leaf as this kint writes it (64 hex, no 0x), whichever kint wrote it."""
    return leaf.lower().removeprefix("0x") if isinstance(leaf, str) else leaf


def refusal_on_record(conn: sqlite3.Connection, tenant: str, check: Check) -> str | None:
    """The name of a live refusal entity that already refused exactly what `check` refuses
    (the same row, the same stored value against the same anchored one), else None.

    v0.3.0 names each refusal by the second it was written (07-verify.md, "The refusal is
    written back"), so an agent that verifies the same drifted row in a loop wrote one
    entity per second, each an unanchored change counted against Sibyl's cap. A refusal
    records a fact about a value; while the store still holds that fact's entity, verify
    names it rather than write the same fact again. A value that changed again, a refusal
    archived with memory_forget, or a new anchored value is a new fact, written anew."""
    prefix = f"{check.tier}-{check.category or 'none'}-{check.key}-"[:REFUSAL_NAME_MAX]
    found = conn.execute(
        "SELECT name, body FROM entities WHERE tenant_id = ? AND category = ? "
        "AND substr(name, 1, ?) = ? ORDER BY rowid DESC",
        (tenant, REFUSAL_CATEGORY, len(prefix), prefix))
    wanted = (check.tier, check.category, check.key, _leaf_text(check.local_leaf),
              _leaf_text(check.anchored_leaf))
    for name, text in found:
        try:
            body = json.loads(text or "")
        except ValueError:
            continue
        if not isinstance(body, dict):
            continue
        if (body.get("tier"), body.get("category"), body.get("key"),
                _leaf_text(body.get("local_leaf")), _leaf_text(body.get("anchored_leaf"))) \
                == wanted:
            return str(name)
    return None


def refusal_body(check: Check, query: str, reason: str) -> dict[str, Any]:
    """The refusal entity's body (07-verify.md, "The refusal is written back"). Its
    `anchored_tx` is the hash the refusing check gives (07-verify.md lists that one field in
    the body and in each check), `0x` and its 64 digits (kint.tx_text): the worker's bare
    digits there made memory_recall give the hash one way and memory_verify, `kint verify
    --json` and the rest of the tools the other."""
    return {
        "refused": True, "query": query, "tier": check.tier, "category": check.category,
        "key": check.key, "reason": reason, "local_leaf": check.local_leaf,
        "anchored_leaf": check.anchored_leaf, "anchored_seq": check.anchored_seq,
        "anchored_block": check.anchored_block, "anchored_tx": tx_0x(check.anchored_tx),
        "head_seq": check.head_seq, "head_block": check.head_block,
        "at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }


def _mirror_incomplete_why(mirror: Mirror) -> str | None:
    if mirror.head.seq == 0:
        return None
    if mirror.skipped:
        listed = ", ".join(str(s) for s in mirror.skipped)
        return f"epochs {listed} could not be applied on the last pull"
    if not mirror.root_matches:
        return "the local mirror's root does not equal the rows_root anchored on the chain"
    return None


def search(client: Any, query: str, limit: int) -> Any:
    """Sibyl's own two-stage search, every precision gate armed (never `client.search`)."""
    from sibyl_memory_client.multi_record import multi_record_search

    return multi_record_search(client, query, limit=limit)


def verify(*, client: Any, conn: sqlite3.Connection, tenant: str, state: SpaceState,
           query: str, limit: int, head: HeadReading, write_refusal: bool) -> dict[str, Any]:
    """The whole of `memory_verify` / `kint verify` for one space."""
    return decide(search(client, query, limit), client=client, conn=conn, tenant=tenant,
                  state=state, query=query, head=head, write_refusal=write_refusal)


def _refusal(query: str, verdict: Any, hits: list[dict[str, Any]], reason: str,
             head_unavailable: str | None) -> dict[str, Any]:
    """A verify answer that refuses until a check says otherwise (08-tools.md's fields)."""
    return {"query": query, "verdict": verdict_copy(verdict), "decision": "refuse",
            "reason": reason, "hits": [_hit_json(h) for h in hits], "checks": [],
            "refusal_entity": None, "chain_head": None, "head_unavailable": head_unavailable}


def _no_candidate(code: str) -> str:
    """Decision step 1's reason, in v0.3.0's words (07-verify.md)."""
    return f"no ranked candidate to act on: Sibyl's verdict is {code}"


def store_absent(query: str, why: str) -> dict[str, Any]:
    """The answer for a store that does not exist: it holds no row, so Sibyl's own
    `empty_store` verdict, and refuse. kint v0.3.0 opened Sibyl's client on it (which
    creates the file) and searched, getting that verdict; kint creates no store, whose
    absence a pull and a push read as meaning something, so it answers the same without
    the search: a refusal (exit 1, 0 with --json) a script reads as v0.3.0's."""
    from sibyl_memory_client.verdicts import empty_store_verdict

    verdict = empty_store_verdict()
    return _refusal(query, verdict, [], f"{_no_candidate(verdict.code.value)}: {why}", None)


def decide(results: Any, *, client: Any, conn: sqlite3.Connection, tenant: str,
           state: SpaceState, query: str, head: HeadReading, write_refusal: bool
           ) -> dict[str, Any]:
    """The seven checks (docs/how-it-works.md) over what the search returned. Each hit is
    re-read from the store now, so a row deleted since the search ran comes back
    `missing`."""
    verdict = results.verdict
    hits = list(results)
    out = _refusal(query, verdict, hits, "", head.unavailable)

    # 1. Nothing ranked to act on.
    if verdict.code.value != "ok" or not hits:
        out["reason"] = _no_candidate(verdict.code.value)
        return out
    try:
        mirror = state.mirror()
        # 2. Never pulled or pushed.
        if mirror is None:
            out["reason"] = REASON_NEVER
            return out
        state.watermark()  # a garbled freshness floor is refused like a garbled mirror
        # 3. An incomplete picture.
        why = _mirror_incomplete_why(mirror)
        if why is not None:
            out["reason"] = (f"this machine's picture of the memory is not the one the chain "
                             f"vouches for: {why}; pull again")
            return out
        # 4. The chain moved past what this machine saw, or the endpoint answers a head
        # older than it (a pull would refuse it as NOT_FRESH: "pull first" would mislead).
        if head.head is not None:
            out["chain_head"] = head.head.to_json()
            if head.head.seq < mirror.head.seq:
                out["reason"] = (
                    f"the chain endpoint answered seq {head.head.seq} at block "
                    f"{head.head.block}, older than seq {mirror.head.seq} this machine saw "
                    f"anchored: a stale or lying RPC, so the chain cannot vouch for the row "
                    f"now; check KINT_RPC_URL and KINT_RPC_URL_2")
                return out
            if (head.head.seq, head.head.digest) != (mirror.head.seq, mirror.head.digest):
                out["reason"] = (
                    f"chain moved to seq {head.head.seq} at block {head.head.block}, pull "
                    f"first: this machine last saw seq {mirror.head.seq} "
                    f"({mirror.head.digest[:12]}), so the row it would check may be superseded")
                return out
        meta_of = _metas(state)
        checks = [check_hit(meta_of, mirror,
                            read_row(conn, tenant, h["tier"], h.get("category"), h["key"]), h)
                  for h in hits]
    except CorruptStateFile as err:
        out["reason"] = (f"kint's state file {err.path} {err.why}: refusing to check against "
                         f"it; nothing was rewritten")
        out["corrupt_file"] = str(err.path)
        return out
    out["checks"] = [c.to_json() for c in checks]

    # 5. A drifted or missing row refuses, and the refusal is written back.
    bad = next((c for c in checks if c.status in ("drifted", "missing")), None)
    if bad is not None:
        out["reason"] = f"{bad.label}: {bad.reason}"
        if write_refusal:
            name = refusal_on_record(conn, tenant, bad)
            out["refusal_written"] = name is None
            if name is None:
                name = refusal_name(bad)
                client.set_entity(REFUSAL_CATEGORY, name,
                                  refusal_body(bad, query, out["reason"]), status="refused")
            out["refusal_entity"] = f"{REFUSAL_CATEGORY}/{name}"
        return out
    verified = [i for i, c in enumerate(checks) if c.status == "verified"]
    # 6. Nothing verified.
    if not verified:
        out["reason"] = REASON_ALL_UNANCHORED
        return out
    # 7. Proceed on the highest-ranked verified hit.
    top = checks[verified[0]]
    reason = (f"{top.label} verified against rows_root {_short(mirror.anchored_root)} "
              f"anchored at epoch {mirror.head.seq}, block {mirror.head.block}")
    above = [c for c in checks[: verified[0]] if c.status == "unanchored"]
    if above:
        names = ", ".join(c.label for c in above)
        reason += (f"; NOTE {len(above)} higher-ranked hit(s) are UNANCHORED and not vouched "
                   f"for by the chain ({names}): act on the verified row, push before relying "
                   f"on the others")
    out["decision"] = "proceed"
    out["reason"] = reason
    return out
