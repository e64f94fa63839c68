"""Pull (seed 001, "Restore: pull, through Sibyl's write methods"): bring the chain's epochs
into this machine's store, checking each before anything is written.

The checks, each before the next: freshness (the watermark is a floor; a cold start needs
two endpoints that agree, cold_start.py), fork (local rows the chain never saw are never
merged blindly), the walk (head back through each event's prevBlock, one exact-block log
query per epoch, stopping at the newest snapshot unless `full`), then per epoch: prev
continuity, the ciphertext's keccak against the event digest, the header, the data key,
the GCM tag, and the plaintext's agreement with chain and header (epoch_walk.py). Only
when every epoch to apply has passed are rows replayed through Sibyl's own write methods
(replay.py), re-read, and recorded one epoch at a time.

A store that lost this tenant's rows (it holds none of the anchored ones and forgot none
of them: it does not exist, or another tenant's pull remade a file they share) is
restored from seq 0, keeping the rows this tenant wrote into it since unless an epoch
would overwrite one (FORK).

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
from kint.rows.canon import Row, canonical_id
from kint.rows.merkle import merkle_root
from kint.tenant_worker import apply_journal, lost_restore
from kint.tenant_worker.changes import diff, store_lost
from kint.tenant_worker.cold_start import cold_start, stale
from kint.tenant_worker.connected import connected, sender_for
from kint.tenant_worker.custody_errors import as_protocol_error
from kint.tenant_worker.data_key import held_keys, renew
from kint.tenant_worker.discard import discard_local, refuse_to_move, sibyl_takes_writes
from kint.tenant_worker.epoch_walk import Fetched, backfill, check_continuity, epoch_meta, walk
from kint.tenant_worker.head_lock import head_op
from kint.tenant_worker.pending import resolve_pending
from kint.tenant_worker.replay import replay, rows_not_back
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import (
    EpochRejected,
    empty_mirror,
    record_epoch,
    unsaved_empty_mirror,
)
from kint.tenant_worker.store import archived_entities

log = logging.getLogger("kint.worker")


def pull(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    try:
        with head_op(ctx):
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

    # 2. Fork.
    mirror = state.mirror()
    backups: list[str] = []
    present: dict[str, Row] = {}  # what the store holds, carried epoch to epoch
    written: dict[str, int] = {}  # the rows this pull wrote or deleted, and the epoch that did
    rows = None if discard else ctx.store_rows()  # None: the store does not exist
    # Lost (changes.store_lost): restored from seq 0, as a discarding pull does, with
    # nothing to move aside (the file may hold other tenants' rows).
    lost = not discard and store_lost(
        mirror, rows, lambda: archived_entities(ctx.ro_connection(), cfg.tenant))
    restoring = None if discard or lost else lost_restore.kept(state)
    # A lost store's restore a killed pull began: the rows it kept, when this pull resumes it.
    resuming: dict[str, Row] = {}
    if discard:  # moved aside after the walk, below: nothing moves before it can refuse
        refuse_to_move(ctx)
        sibyl_takes_writes()
        mirror = unsaved_empty_mirror(state)  # what the emptied store will hold: seq 0
    elif lost:
        assert mirror is not None
        present = {r.canonical_id: r for r in rows or []}  # never anchored: kept as they are
        log.warning("pull: %s; restoring them from the first epoch",
                    _lost_words(cfg.db, cfg.tenant, len(mirror.rows), rows))
        mirror = unsaved_empty_mirror(state)
    else:
        rows = rows or []
        present = {r.canonical_id: r for r in rows}
        if mirror is None and rows:
            raise ProtocolError(ErrorCode.FORK, "the store already holds rows and this machine "
                                "has no mirror of what the chain last saw. Refusing to merge "
                                "blindly",  # v0.3.0's words (03-new-machine.md, "The fork check")
                                "`kint pull --discard-local` moves the store aside and restores "
                                "from the chain")
        local = diff(mirror, rows) if mirror is not None else []
        resumed = apply_journal.interrupted(state) if mirror is not None else None
        if resumed is not None and mirror is not None and resumed.seq <= mirror.head.seq:
            apply_journal.settle_recorded(state, mirror)
            resumed = None
        if resumed is not None and local:
            local = apply_journal.unexplained(local, resumed, mirror)
            if not local:
                log.info("pull: finishing epoch %d, which an interrupted pull had begun to "
                         "apply", resumed.seq)
        if restoring is not None and local and mirror is not None:
            kept, local = lost_restore.its_own(local, restoring)
            if kept and not local:
                log.info("pull: resuming a lost store's restore after epoch %d, keeping the "
                         "%d row(s) written since the loss", mirror.head.seq, len(kept))
                resuming = {r.canonical_id: r for r in kept}
        moved = mirror is None or (head.seq, head.digest) != (mirror.head.seq, mirror.head.digest)
        if local and moved:
            raise ProtocolError(
                ErrorCode.FORK,
                f"the chain moved to seq {head.seq} and this store has {len(local.rows)} "
                f"changed and {len(local.deleted)} deleted rows that were never anchored: a "
                f"fork. Pulling would lose them, and pushing is impossible because the head "
                f"moved",
                "save what you need out of the store, then `kint pull --discard-local` moves "
                "it aside (keeping a backup) and restores the anchored state")
    if mirror is None:
        mirror = empty_mirror(state)
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
    if lost and present:
        _refuse_overwriting(todo, present, cfg.db)
    if resuming:
        _refuse_overwriting(todo, resuming, cfg.db, resumed=True)
    if discard or lost:
        if discard:
            backups = discard_local(ctx)
        if lost and present:  # before the empty mirror: a pull killed after it resumes
            lost_restore.begin(state, present)
        else:
            lost_restore.end(state)
        apply_journal.end(state)  # the store it described is the one moved aside or gone
        mirror = empty_mirror(state)
    gap: list[int] = []
    applied: list[int] = []
    applied_epochs: list[dict[str, int]] = []  # what each carried, for join's lines
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


def _lost_words(db: str, tenant: str, anchored: int, rows: list[Row] | None) -> str:
    """How the log names a lost store: gone, or there without any of the tenant's rows."""
    where = (f"the store {db} does not exist" if rows is None else
             f"the store {db} holds none of tenant {tenant}'s rows anchored from it")
    return f"{where} ({anchored} on chain)"


def _refuse_overwriting(todo: list[Fetched], present: dict[str, Row], db: str, *,
                        resumed: bool = False) -> None:
    """A lost store's restore keeps the rows this tenant wrote into it since (never
    anchored), and refuses FORK, before anything is written, when an epoch to apply would
    overwrite or delete one of them: pull never merges blindly. `resumed`: the restore a
    killed pull began, its kept rows checked again against the epochs still to apply."""
    touched: set[str] = set()
    for f in todo:
        if f.opened is None:
            break
        touched.update(w.canonical_id for w in f.opened.plaintext.rows)
        touched.update(canonical_id(*d) for d in f.opened.plaintext.deleted)
    clash = sorted(cid for cid in present if cid in touched)
    if not clash:
        return
    named = ", ".join(present[cid].label() for cid in clash[:5])
    more = f" and {len(clash) - 5} more" if len(clash) > 5 else ""
    where = (f"the restore of the store {db} was interrupted; it keeps {len(present)} "
             f"row(s) written since the loss that were never anchored" if resumed else
             f"the store {db} holds none of this tenant's anchored rows, and {len(present)} "
             f"row(s) that were never anchored")
    raise ProtocolError(
        ErrorCode.FORK,
        f"{where}; restoring the anchored rows would overwrite or "
        f"delete {len(clash)} of them ({named}{more}). Refusing to merge blindly; nothing "
        f"was written",
        "save what you need out of the store (`kint export`), then `kint pull "
        "--discard-local` moves it aside and restores the anchored state (on a store "
        "other tenants share, remove those rows through Sibyl and `kint pull` again)")


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


