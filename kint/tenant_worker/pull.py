"""Pull (seed 001, "Restore: pull, through Sibyl's write methods"): bring the chain's epochs
into this machine's store, checking each before anything is written.

The checks, each before the next: freshness (the watermark is a floor; a cold start needs
two endpoints that agree), fork (local rows the chain never saw are never merged blindly),
the walk (head back through each event's prevBlock, one exact-block log query per epoch,
stopping at the newest snapshot unless `full`), then per epoch: prev continuity, the
ciphertext's keccak against the event digest, the header, the data key, the GCM tag, and
the plaintext's agreement with chain and header. Only when every epoch to apply has passed
are rows replayed through Sibyl's own write methods, re-read, and recorded one epoch at a
time.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eth_hash.auto import keccak

from kint.chain.anchor import Anchor, EpochLog
from kint.chain.rpc import RpcUnavailable
from kint.protocol import ErrorCode, ProtocolError
from kint.rows.canon import Row, canonical_id
from kint.rows.export import export_rows
from kint.rows.merkle import merkle_root
from kint.tenant_worker import epoch_format, keys
from kint.tenant_worker.changes import diff
from kint.tenant_worker.head_lock import head_op
from kint.tenant_worker.push import connected, data_key, resolve_pending
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import (
    EpochMeta,
    EpochRejected,
    Mirror,
    ZERO_DIGEST,
    empty_mirror,
    parse_plaintext,
    record_epoch,
)

log = logging.getLogger("kint.worker")


@dataclass
class Fetched:
    log: EpochLog
    envelope: bytes
    header: Any
    plaintext: dict[str, Any] | None  # None: sealed under a key this machine lacks


def pull(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    try:
        with head_op(ctx):
            return _pull(ctx, bool(args.get("full")), bool(args.get("discard_local")))
    except RpcUnavailable as err:
        raise ProtocolError(ErrorCode.RPC_UNAVAILABLE, str(err)) from None


def _stale(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.STALE_RPC, f"{message}; nothing was applied")


def _store_rows(ctx: SpaceContext) -> list[Row]:
    if not os.path.exists(ctx.config.db):
        return []
    return export_rows(ctx.ro_connection(), ctx.config.tenant)


def discard_local(ctx: SpaceContext) -> list[str]:
    """Move the store and its -wal and -shm aside to timestamped `.kint-backup-` copies.
    Refused (BUSY, nothing moved) while another process has the store open: see
    store_holders for why that would lose the restored rows."""
    from kint.tenant_worker.store_holders import describe, other_holders

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    ctx.reset_client()
    holders = other_holders(ctx.config.db)
    if holders:
        raise ProtocolError(
            ErrorCode.BUSY,
            f"the store is open in {len(holders)} other process(es), pid "
            f"{describe(holders)}: moving it aside now would let them keep writing into the "
            f"backup and, when they close it, delete the restored store's journal; nothing "
            f"was moved",
            "stop what holds it (an agent's MCP server, Hermes, a script), or from a kint-server "
            "agent call memory_pull with discard_local, then try again")
    moved = []
    for suffix in ("", "-wal", "-shm"):
        src = Path(ctx.config.db + suffix)
        if src.exists():
            dst = Path(f"{ctx.config.db}.kint-backup-{stamp}{suffix}")
            shutil.move(src, dst)
            moved.append(str(dst))
    return moved


def _pull(ctx: SpaceContext, full: bool, discard: bool) -> dict[str, Any]:
    cfg, state = ctx.config, ctx.state
    chain, enrolment = connected(ctx)
    key = data_key(ctx)
    held = {keys.data_key_id(key): key}
    owner = enrolment.owner
    anchor = Anchor(chain, ctx.tracker)
    resolve_pending(ctx, anchor, owner)
    head = anchor.head(owner, cfg.space_id)

    # 1. Freshness.
    mark = state.watermark()
    if mark is not None:
        if head.seq < mark.seq:
            raise _stale(f"the endpoint's head (seq {head.seq}) is older than the newest this "
                         f"machine saw (seq {mark.seq}): a stale or lying RPC")
        if head.seq == mark.seq and head.digest != mark.digest:
            raise _stale(f"the endpoint's head at seq {head.seq} has digest {head.digest[:12]}, "
                         f"not the {mark.digest[:12]} this machine saw: a stale or lying RPC")
    elif not chain.single_rpc_ok:
        if len(chain.rpc_urls) < 2:
            raise ProtocolError(ErrorCode.STALE_RPC,
                                "a cold-start pull needs two different RPC endpoints that agree "
                                "on the head", "list two in KINT_RPC_URLS, or set "
                                "KINT_ALLOW_SINGLE_RPC=1")
        other = Anchor(chain, ctx.tracker, 1).head(owner, cfg.space_id)
        if (other.seq, other.digest) != (head.seq, head.digest):
            raise _stale(f"the two RPC endpoints disagree on the head (seq {head.seq} vs "
                         f"{other.seq})")

    # 2. Fork.
    mirror = state.mirror()
    backups: list[str] = []
    present: dict[str, Row] = {}  # what the store holds, carried epoch to epoch
    written: set[str] = set()  # the rows this pull wrote or deleted
    if discard:
        backups = discard_local(ctx)
        mirror = empty_mirror(state)
    else:
        rows = _store_rows(ctx)
        present = {r.canonical_id: r for r in rows}
        if mirror is None and rows:
            raise ProtocolError(ErrorCode.FORK, "the store already holds rows and this machine "
                                "has no mirror: pull never merges them blindly",
                                "`kint pull --discard-local` moves the store aside and restores "
                                "from the chain")
        local = diff(mirror, rows) if mirror is not None else []
        moved = mirror is None or (head.seq, head.digest) != (mirror.head.seq, mirror.head.digest)
        if local and moved:
            raise ProtocolError(
                ErrorCode.FORK,
                f"the store has {len(local)} unanchored change(s) and the chain moved to seq "
                f"{head.seq}: pulling would lose them, so this pull refuses (a fork)",
                "`kint pull --discard-local` moves the store aside (keeping a backup) and "
                "restores the anchored state")
    if mirror is None:
        mirror = empty_mirror(state)
    base = mirror.head.seq

    # 3. Walk, and 4. check every epoch before anything is written.
    fetched = _walk(ctx, anchor, owner, head, base, full, held, chain.chain_id)
    fetched.reverse()  # oldest first
    start = 0
    for i, f in enumerate(fetched):  # resume at the newest snapshot that opens past a gap
        if f.plaintext is None:
            later = [j for j in range(i + 1, len(fetched))
                     if fetched[j].plaintext is not None and fetched[j].header.snapshot]
            if later:
                start = later[-1]
    gap: list[int] = []
    applied: list[int] = []
    warnings: list[str] = []
    prev_digest = mirror.head.digest
    todo = fetched[start:]
    for number, f in enumerate(todo, 1):
        ctx.progress = f"pull: applying epoch {f.log.seq} ({number} of {len(todo)})"
        if f.plaintext is None:
            gap = [x.log.seq for x in fetched if x.log.seq >= f.log.seq]
            break
        if not f.header.snapshot and f.log.prev != prev_digest:
            raise _stale(f"epoch {f.log.seq} does not follow the last applied epoch "
                         f"({prev_digest[:12]})")
        warnings += _replay(ctx, mirror, f.plaintext, present, written)
        meta = EpochMeta(seq=f.log.seq, digest=f.log.digest, prev=f.log.prev, block=f.log.block,
                         tx=f.log.tx, bucket=f.header.bucket, rows_root=f.plaintext["rows_root"],
                         writer=f.log.writer)
        try:
            mirror = record_epoch(state, f.plaintext, f.envelope, meta)
        except EpochRejected as err:
            raise _stale(str(err)) from None
        applied.append(f.log.seq)
        prev_digest = f.log.digest
    # The root is checked once, for the newest epoch applied: building the tree after every
    # epoch of a long restore cost more than the replay's own reads, and what verify trusts
    # is the head's root. Each epoch's content is already authenticated (AES-GCM under the
    # data key, its digest chained on chain).
    if applied and not mirror.root_matches:
        warnings.append(f"epoch {applied[-1]}: the replayed rows do not reproduce its rows root")
    if mirror.skipped != gap:
        mirror.skipped = gap
        state.save_mirror(mirror)
    backfilled = _backfill(ctx, anchor, owner, head, held, chain.chain_id) if full else []
    rows = _store_rows(ctx)
    warnings += _not_back(mirror, rows, written)
    if ctx.drift.active:
        ctx.drift.reset(rows)
    ordered = sorted(rows, key=lambda r: r.canonical_id.encode("utf-8"))
    store_root = merkle_root([r.leaf for r in ordered]).hex()
    matches = store_root == mirror.anchored_root
    report = ("store root matches the anchored root" if matches else
              "store root does not match the anchored root (the store holds unanchored changes)")
    result = {"applied": applied, "head": {"seq": mirror.head.seq, "block": mirror.head.block},
              "gap": gap, "warnings": warnings, "backups": backups, "backfilled": backfilled,
              "store_root_matches": matches, "report": report}
    if gap:
        result["message"] = (f"epochs {', '.join(map(str, gap))} could not be applied (sealed "
                             f"under a data key this machine does not hold); the mirror stays "
                             f"at epoch {mirror.head.seq}")
    elif not applied:
        result["message"] = f"already at the chain head (epoch {mirror.head.seq})"
    else:
        result["message"] = (f"applied {len(applied)} epoch(s), head epoch {mirror.head.seq} at "
                             f"block {mirror.head.block}; {report}")
    return result


def _fetch(ctx: SpaceContext, anchor: Anchor, owner: str, ev: EpochLog,
           held: dict[bytes, bytes], chain_id: int) -> Fetched:
    state = ctx.state
    cached = state.epoch_path(ev.seq, ".bin")
    envelope = None
    try:
        data = cached.read_bytes()
        if keccak(data).hex() == ev.digest:
            envelope = data
    except FileNotFoundError:
        pass
    if envelope is None:
        envelope = anchor.push_calldata(ev.tx, owner, ctx.config.space_id, ev.seq, ev.prev)
        if envelope is None:
            raise _stale(f"epoch {ev.seq}: transaction {ev.tx[:12]} is not a push of this "
                         f"epoch")
        if keccak(envelope).hex() != ev.digest:
            raise _stale(f"epoch {ev.seq}: its calldata does not hash to the event digest")
    try:
        header = epoch_format.Header.decode(envelope[: epoch_format.HEADER_SIZE])
        if header.seq != ev.seq or header.prev.hex() != ev.prev:
            raise _stale(f"epoch {ev.seq}: its header does not agree with the chain")
        _, plaintext = epoch_format.open_envelope(envelope, keys=held, chain_id=chain_id,
                                                  owner=owner, space=ctx.config.space_id)
    except epoch_format.UnknownDataKey:
        return Fetched(ev, envelope, header, None)
    except epoch_format.EnvelopeError as err:
        raise _stale(f"epoch {ev.seq}: {err}") from None
    parse_plaintext(state.epoch_path(ev.seq, ".json"), plaintext, ctx.config.space_id)
    return Fetched(ev, envelope, header, plaintext)


def _walk(ctx: SpaceContext, anchor: Anchor, owner: str, head: Any, base: int, full: bool,
          held: dict[bytes, bytes], chain_id: int) -> list[Fetched]:
    """Newest first, from the head down to the epoch after `base` (or the newest snapshot)."""
    out: list[Fetched] = []
    seq, block, expect = head.seq, head.block, head.digest
    while seq > base:
        ctx.progress = f"pull: checking epoch {seq} (walking back from {head.seq})"
        ev = anchor.epoch_log(owner, ctx.config.space_id, seq, block)
        if ev is None:
            raise _stale(f"no Epoch event for seq {seq} at block {block}")
        if ev.digest != expect:
            raise _stale(f"epoch {seq}: its event digest is not the one the next epoch chains on")
        f = _fetch(ctx, anchor, owner, ev, held, chain_id)
        out.append(f)
        if f.header.snapshot and f.plaintext is not None and not full:
            break
        seq, block, expect = seq - 1, ev.prev_block, ev.prev
    return out


def _backfill(ctx: SpaceContext, anchor: Anchor, owner: str, head: Any,
              held: dict[bytes, bytes], chain_id: int) -> list[int]:
    """`--full`: walk from the head to epoch 1 and cache, for history, every epoch this
    machine has not decrypted (those a snapshot let an earlier pull skip). Returns the seqs
    cached; epochs under a key this machine lacks stay closed."""
    cached = set(ctx.state.cached_seqs())
    added: list[int] = []
    seq, block, expect = head.seq, head.block, head.digest
    while seq >= 1:
        ev = anchor.epoch_log(owner, ctx.config.space_id, seq, block)
        if ev is None or ev.digest != expect:
            raise _stale(f"epoch {seq}: no matching Epoch event at block {block}")
        if seq not in cached:
            f = _fetch(ctx, anchor, owner, ev, held, chain_id)
            if f.plaintext is not None:
                _cache_only(ctx, f)
                added.append(seq)
        seq, block, expect = seq - 1, ev.prev_block, ev.prev
    return sorted(added)


def _cache_only(ctx: SpaceContext, f: Fetched) -> None:
    import orjson

    from kint.paths import atomic_write

    state = ctx.state
    meta = EpochMeta(seq=f.log.seq, digest=f.log.digest, prev=f.log.prev, block=f.log.block,
                     tx=f.log.tx, bucket=f.header.bucket, rows_root=f.plaintext["rows_root"],
                     writer=f.log.writer)
    atomic_write(state.epoch_path(f.log.seq, ".bin"), f.envelope)
    atomic_write(state.epoch_path(f.log.seq, ".json"), orjson.dumps(f.plaintext))
    atomic_write(state.epoch_path(f.log.seq, ".meta.json"), orjson.dumps(meta.to_json()))


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _replay(ctx: SpaceContext, mirror: Mirror, plaintext: dict[str, Any],
            present: dict[str, Row], written: set[str]) -> list[str]:
    """Write one epoch's rows through Sibyl's own write methods. Rows the store already
    holds byte for byte are not written again.

    `present` is what the store holds, by canonical id (a row's leaf is worked out only
    when an epoch carries a row of the same id); it is brought up to date here for the
    next epoch. The ids written go into `written`: the pull reads the store back once, when it
    ends (one export, which the store root needs anyway), and names any written row that
    did not come back byte for byte. Reading each row back after each epoch cost more than
    Sibyl's own writes on a long restore."""
    client = ctx.client()
    warnings: list[str] = []
    items = list(plaintext["rows"])
    if plaintext["snapshot"]:
        carried = {canonical_id(r["tier"], r.get("category"), r["key"]) for r in items}
        items += [{"op": "del", "tier": m.row.tier, "category": m.row.category, "key": m.row.key}
                  for cid, m in mirror.rows.items() if cid not in carried]
    for item in items:
        tier, category, key = item["tier"], item.get("category"), item["key"]
        cid = canonical_id(tier, category, key)
        held = present.get(cid)
        if item["op"] == "del":
            if held is None:
                continue
            if tier == "entity":
                client.delete_entity(category, key)
                present.pop(cid, None)
                written.add(cid)
            else:
                warnings.append(f"{tier} {key}: deleted on chain; Sibyl has no delete for this "
                                f"tier, so it stays in the store")
            continue
        row = Row(tier, category, key, item["fields"])
        if held is not None and held.leaf == row.leaf:
            continue
        f = item["fields"]
        if tier == "entity":
            client.set_entity(category, key, _loads(f.get("body")), status=f.get("status"))
        elif tier == "state":
            client.set_state(key, _loads(f.get("body")))
        elif tier == "reference":
            client.set_reference(key, f.get("body"), metadata=_loads(f.get("metadata")))
        elif tier == "journal":
            client.write_event(ts=f.get("ts"), evaluated=_loads(f.get("evaluated")),
                               acted=_loads(f.get("acted")), forward=_loads(f.get("forward")),
                               extra=_loads(f.get("extra")))
        present[cid] = row
        written.add(cid)
    return warnings


def _not_back(mirror: Mirror, rows: list[Row], written: set[str]) -> list[str]:
    """The rows this pull wrote that the store does not hold as anchored."""
    stored = {r.canonical_id: r for r in rows if r.canonical_id in written}
    out = []
    for cid in sorted(written):
        anchored = mirror.rows.get(cid)
        back = stored.get(cid)
        if anchored is None:
            if back is not None and back.tier == "entity":
                out.append(f"{back.label()}: deleted on chain but still in the store")
        elif back is None or back.leaf != anchored.leaf:
            out.append(f"{anchored.row.label()}: did not come back byte-exact after replay")
    return out
