"""Pull (seed 001, "Restore: pull, through Sibyl's write methods"): bring the chain's epochs
into this machine's store, checking each before anything is written.

The checks, each before the next: freshness (the watermark is a floor; a cold start needs
two endpoints that agree, cold_start.py), fork (local rows the chain never saw are never
merged blindly, local_state.py), the walk (head back through each event's prevBlock, one
exact-block log query per epoch, stopping at the newest snapshot unless `full`), then per
epoch: prev continuity, the ciphertext's keccak against the event digest, the header, the
data key, the GCM tag, and the plaintext's agreement with chain and header (epoch_walk.py).
Only when every epoch to apply has passed are rows replayed through Sibyl's own write
methods (replay.py), re-read, and recorded one epoch at a time. `full` then caches the
epochs before the snapshot for history. After a snapshot or a backfill, each row's
provenance moves back to the epoch in the cache that wrote its value (provenance.py).

A store that lost this tenant's rows (it holds none of the anchored ones and forgot none
of them: it does not exist, or another tenant's pull remade a file they share) is
restored from seq 0, keeping the rows this tenant wrote into it since unless an epoch
would overwrite one (FORK); a pull killed during that restore is resumed by the next
(lost_restore.py).

`discard_local` moves the store aside only after all of that could refuse (and never while
it holds another tenant's rows, or another process holds it open): the walk from
seq 0 has fetched and checked every epoch the restore needs, and Sibyl's account gate has
said it takes writes. A chain that does not answer, or a Sibyl without an account, leaves
the store where it was rather than leaving the agent with no memory until a later pull.
"""

from __future__ import annotations

import logging
from typing import Any

from kint.chain.anchor import Anchor
from kint.chain.rpc import RpcUnavailable
from kint.custody import errors as custody_errors
from kint.protocol import ErrorCode, ProtocolError
from kint.rows.merkle import merkle_root
from kint.tenant_worker import apply_journal, lost_restore
from kint.tenant_worker.cold_start import cold_start, stale
from kint.tenant_worker.connected import connected, sender_for
from kint.tenant_worker.custody_errors import as_protocol_error
from kint.tenant_worker.data_key import held_keys, renew
from kint.tenant_worker.discard import discard_local
from kint.tenant_worker.epoch_walk import backfill, check_continuity, epoch_meta, walk
from kint.tenant_worker.head_lock import head_op
from kint.tenant_worker.local_state import local_state
from kint.tenant_worker.pending import resolve_pending
from kint.tenant_worker.provenance import refine_from_cache
from kint.tenant_worker.replay import replay, rows_not_back
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import EpochRejected, empty_mirror, record_epoch

log = logging.getLogger("kint.worker")


def pull(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    try:
        with head_op(ctx, "pull"):
            return _pull(ctx, bool(args.get("full")), bool(args.get("discard_local")))
    except RpcUnavailable as err:
        raise ProtocolError(ErrorCode.RPC_UNAVAILABLE, str(err)) from None
    except custody_errors.CustodyError as err:
        raise as_protocol_error(err) from None


def _pull(ctx: SpaceContext, full: bool, discard: bool) -> dict[str, Any]:
    cfg, state = ctx.config, ctx.state
    chain, enrolment = connected(ctx)
    held = held_keys(ctx)
    owner = enrolment.owner
    anchor = Anchor(chain, ctx.tracker)
    if state.files["pending"].exists():  # the session key's unlock (a scrypt) only then
        resolve_pending(ctx, anchor, sender_for(ctx, anchor), owner)
    head = anchor.head(owner, cfg.space_id)

    # 1. Freshness.
    mark = state.watermark()
    agreed, single = None, None
    if mark is not None:
        if head.seq < mark.seq:
            raise stale(f"the endpoint's head (seq {head.seq}) is older than the newest this "
                         f"machine saw (seq {mark.seq}): a stale or lying RPC, refusing")
        if head.seq == mark.seq and head.digest != mark.digest:
            raise stale(f"the endpoint's head at seq {head.seq} has digest {head.digest[:12]}, "
                         f"not the {mark.digest[:12]} this machine saw: a stale or lying RPC, "
                         f"refusing")
    else:
        agreed, single = cold_start(ctx, chain, owner, head)

    # 2. Fork: what the store holds, and what the pull keeps of it (local_state.py).
    local = local_state(ctx, head, discard)
    mirror, present = local.mirror, local.present  # present: carried epoch to epoch
    base = mirror.head.seq

    # 3. Walk, and 4. check every epoch before anything is written.
    fetched = walk(ctx, anchor, owner, head, base, full, held)
    fetched.reverse()  # oldest first
    start = 0
    for i, f in enumerate(fetched):  # resume at the newest snapshot that opens past a gap
        if f.opened is None and not f.final:
            later = [j for j in range(i + 1, len(fetched)) if fetched[j].snapshot]
            if later:
                start = later[-1]
    skipped = [f.entry(superseded_by=fetched[start].log.seq)
               for f in fetched[:start] if f.opened is None]
    todo = fetched[start:]
    check_continuity(todo, mirror.head.digest)
    local.refuse_overwriting(todo, cfg.db)
    backups: list[str] = []
    if local.from_first:
        if discard:
            backups = discard_local(ctx)
        if local.kept:  # before the empty mirror: a pull killed after it resumes
            lost_restore.begin(state, local.kept)
        else:
            lost_restore.end(state)
        apply_journal.end(state)  # the store it described is the one moved aside or gone
        mirror = empty_mirror(state)
    gap: list[int] = []
    applied: list[int] = []
    applied_epochs: list[dict[str, int]] = []  # what each carried, for join's lines
    written: dict[str, int] = {}  # the rows this pull wrote or deleted, and the epoch that did
    warnings: list[str] = []
    for number, f in enumerate(todo, 1):
        ctx.progress = f"pull: applying epoch {f.log.seq} ({number} of {len(todo)})"
        if f.opened is None:
            gap = [x.log.seq for x in fetched if x.log.seq >= f.log.seq]
            skipped.append(f.entry())
            break
        plaintext = f.opened.plaintext
        apply_journal.begin(state, f.opened.payload)
        warnings += replay(ctx, mirror, plaintext, present, written)
        try:
            mirror = record_epoch(state, f.opened.raw, plaintext, f.envelope, epoch_meta(f),
                                  payload=f.opened.payload)
        except EpochRejected as err:
            raise stale(str(err)) from None
        apply_journal.end(state)
        applied.append(f.log.seq)
        applied_epochs.append({"seq": f.log.seq, "block": f.log.block,
                               "rows": len(plaintext.rows), "deletions": len(plaintext.deleted)})
    # The root is checked once, for the newest epoch applied: building the tree after every
    # epoch of a long restore cost more than the replay's own reads, and what verify trusts
    # is the head's root. Each epoch's content is already authenticated (AES-GCM under the
    # data key, its digest chained on chain).
    if applied and not mirror.root_matches:
        warnings.append(f"epoch {applied[-1]}: the replayed rows do not reproduce its rows root")
    if mirror.skipped != gap:
        mirror.skipped = gap
        state.save_mirror(mirror)
    if (mirror.head.seq, mirror.head.digest) == (head.seq, head.digest):
        lost_restore.end(state)  # a lost store's restore, if one ran, is done
    backfilled, closed = backfill(ctx, anchor, owner, head, held) if full else ([], [])
    if backfilled or any(f.snapshot for f in todo if f.log.seq in applied):
        # A snapshot applied here made itself the provenance of every row it carried; the
        # epochs before it that the cache holds (kept from earlier, or just backfilled)
        # name where each value was written: a drift's anchoring block is that epoch's.
        mirror = refine_from_cache(state, mirror, owner, held)
    rows = ctx.store_rows() or []
    warnings += rows_not_back(mirror, rows, written)
    if ctx.drift.active:
        ctx.drift.reset(rows)
    ordered = sorted(rows, key=lambda r: r.canonical_id.encode("utf-8"))
    store_root = merkle_root([r.leaf for r in ordered]).hex()
    matches = store_root == mirror.anchored_root
    report = ("store root matches the anchored root" if matches else
              "store root does not match the anchored root (the store holds unanchored changes)")
    if not gap:
        renew(ctx, next(iter(held.values())))
    result = {"applied": applied, "applied_epochs": applied_epochs,
              "head": {"seq": mirror.head.seq, "block": mirror.head.block,
                       "digest": mirror.head.digest},
              "chain_head": {"seq": head.seq, "block": head.block, "digest": head.digest},
              "gap": gap, "skipped": skipped, "closed": closed, "warnings": warnings,
              "backups": backups, "backfilled": backfilled, "rows_total": len(rows),
              "store_root_matches": matches, "rpcs_agreed": agreed, "single_rpc": single,
              "report": report}
    if gap:
        result["message"] = (f"stopped at epoch {gap[0]}: {skipped[-1]['reason']}; the mirror "
                             f"stays at epoch {mirror.head.seq}, and push and verify refuse "
                             f"until it applies")
    elif not applied:
        result["message"] = (f"already at the chain head (epoch {mirror.head.seq})"
                             + _older_epochs(backfilled, closed))
    else:
        # kint v0.3.0's summary line (03-new-machine.md, "What it prints"), word for word.
        result["message"] = (f"restored {len(applied)} epoch(s), {len(rows)} rows; head seq "
                             f"{mirror.head.seq} at block {mirror.head.block}; {report}"
                             + _older_epochs(backfilled, closed))
    return result


def _older_epochs(backfilled: list[int], closed: list[dict[str, Any]]) -> str:
    """What `--full` did beyond the restore, in v0.3.0's words: the epochs it cached for
    history, and those sealed under a retired data key that stay closed."""
    tail = ""
    if backfilled:
        tail += f"; {len(backfilled)} older epoch(s) cached for history"
    if closed:
        tail += (f"; {len(closed)} older epoch(s) sealed under a retired key stay closed on "
                 f"this machine")
    return tail


