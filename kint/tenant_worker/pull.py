"""Pull (docs/how-it-works.md, "Pull, check by check"; docs/new-machine.md, "Restore"):
bring the chain's epochs into this machine's store, checking each before anything is
written.

A push journal a killed push left is settled first (pending.py), one the chain has since
passed included (overtaken.py: recorded, or dropped with its rows left to the fork step).

The checks, each before the next: freshness (the watermark is a floor; a cold start needs
two endpoints that agree, cold_start.py), fork (local rows the chain never saw are never
merged blindly, local_state.py), the walk (head back through each event's prevBlock, one
exact-block log query per epoch, stopping at the newest snapshot unless `full`), then per
epoch: prev continuity (pull_plan.py, which also says where the pull resumes past an epoch
it cannot open), the ciphertext's keccak against the event digest, the header, the data
key, the GCM tag, and the plaintext's agreement with chain and header (epoch_walk.py).
Only when every epoch to apply has passed are rows replayed through Sibyl's own write
methods (replay.py), re-read, and recorded one epoch at a time. An epoch that does not
pass (one this machine cannot open, whose calldata the RPC would not serve or served
altered, that opened and contradicts the chain, or whose prev does not chain on the epoch
before it) is a gap: the epochs before it are applied, the pull stops there and says so,
and exits as done, as kint v0.3.0's does (03-new-machine.md, "What every epoch must pass"
and "Gaps"); push and verify refuse until a later pull applies it. `full` then (after a
pull with no gap) caches the epochs before the snapshot for history; an epoch it cannot
read (or whose link breaks) stops that walk, named in `backfill_stopped`, and the pull
still stands. After a snapshot or a backfill, each row's provenance moves back to the
epoch in the cache that wrote its value (provenance.py). The wraps an applied epoch's header
carries under this machine's data key and its wraps file lacks (a key another machine
added) join that file, so this machine's pushes carry them too (header_wraps.py).

A store that lost this tenant's rows (it holds none of the anchored ones and forgot none
of them: it does not exist, or another tenant's pull remade a file they share) is
restored from seq 0, keeping the rows this tenant wrote into it since unless an epoch
would overwrite one (FORK); a pull killed during that restore is resumed by the next
(lost_restore.py).

`discard_local` moves the store aside only after all of that could refuse (and never while
it holds another tenant's rows, or another process holds it open): the walk from
seq 0 has fetched and checked every epoch the restore needs (one it could not read, one
that contradicts the chain or one whose prev breaks refuses the pull whole, before the
move), and Sibyl's account gate has
said it takes writes. A chain that does not answer, or a Sibyl without an account, leaves
the store where it was rather than leaving the agent with no memory until a later pull.

A plain pull asks Sibyl's account gate too, once the checks have passed and before its
first write: without an account Sibyl refuses the first row it is asked to write, which
would leave an epoch's apply journal begun, and `status` and `doctor` naming a pull
stopped half-way that the next pull finishes, when no pull can until there is an account.
A pull whose first epoch to apply is a gap writes nothing, and does not ask.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

from kint.chain.anchor import Anchor, Head
from kint.chain.config import ChainConfig
from kint.chain.rpc import RpcUnavailable
from kint.custody import errors as custody_errors
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import ROTATED_DISCARD_HINT, ROTATED_GAP_STEP
from kint.rows.canon import Row
from kint.rows.merkle import merkle_root
from kint.tenant_worker import apply_journal, lost_restore, settled_notice
from kint.tenant_worker.behind_head import behind_refusal
from kint.tenant_worker.chain_refusal import chain_unavailable
from kint.tenant_worker.cold_start import cold_start, stale
from kint.tenant_worker.connected import connected
from kint.tenant_worker.custody_errors import as_protocol_error
from kint.tenant_worker.data_key import held_keys, renew
from kint.tenant_worker.discard import discard_released, sibyl_takes_writes
from kint.tenant_worker.epoch_walk import Fetched, backfill, epoch_meta, walk
from kint.tenant_worker.head_lock import head_op
from kint.tenant_worker.header_wraps import take_in_header_wraps
from kint.tenant_worker.landed_block import settle_block, settle_head_block
from kint.tenant_worker.local_state import LocalState, local_state
from kint.tenant_worker.provenance import refine_from_cache
from kint.tenant_worker.pull_plan import epochs_to_apply, split_rotated
from kint.tenant_worker.rekey_settle import COMPLETED, settle_journals
from kint.tenant_worker.replay import replay, rows_not_back
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.state_health import disk_full
from kint.tenant_worker.statefiles import EpochRejected, Mirror, empty_mirror, record_epoch

log = logging.getLogger("kint.worker")

PROVENANCE_HINT = ("free some space: the next pull saves it (after a backfill, the next "
                   "`kint pull --full`); nothing else is missing, the epochs are applied and "
                   "recorded, and verify is right meanwhile but for the block a drift names")


def pull(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    try:
        with head_op(ctx, "pull"):
            return _pull(ctx, bool(args.get("full")), bool(args.get("discard_local")),
                         told=not args.get("unread"))
    except RpcUnavailable as err:
        raise chain_unavailable(err) from None
    except custody_errors.CustodyError as err:
        raise as_protocol_error(err) from None


def _pull(ctx: SpaceContext, full: bool, discard: bool, told: bool = True) -> dict[str, Any]:
    """The steps, each refusing before the next can write: freshness, fork, walk and the
    checks of every epoch, then the writes (moving a store aside, each epoch in turn), then
    what the store holds afterwards. `told` false (kint-server's start-up pull, whose
    answer only its log reads): what a settlement found is kept for the next command that
    tells its user, as the watcher's push keeps it (rekey_settle.settle_journals)."""
    cfg = ctx.config
    chain, enrolment = connected(ctx)
    held = held_keys(ctx)
    owner = enrolment.owner
    anchor = Anchor(chain, ctx.tracker)
    # A push journal the chain passed is settled here too (overtaken.py), and the pull goes
    # on from what it left: a recorded epoch, or the rows it carried, unanchored; so does
    # one whose key may not write, dropped unsent (unauthorized_journal.py).
    outcome, overtaken = settle_journals(ctx, anchor, owner, told=told)
    if outcome == COMPLETED:  # a killed rekey's snapshot: its key opens it
        held = held_keys(ctx)
    ctx.progress = "pull: reading the chain head"  # a joining machine's first wait
    head = anchor.head(owner, cfg.space_id)
    agreed, single = _check_freshness(ctx, chain, owner, head)  # 1. freshness
    # This machine's newest epoch, the chain's head, put back in a later block than the
    # one recorded (a dropped block's transaction mined again): recorded where it is.
    settle_head_block(ctx, anchor, owner, head)
    try:  # 2. fork: what the store holds, what is kept
        local = local_state(ctx, head, discard)
    except ProtocolError as err:
        if overtaken is not None:  # why the store holds changes the chain never saw
            err.message = f"{overtaken.describe()}; {err.message}"
            if told:
                settled_notice.said(ctx)
        raise
    # 3. Walk, and 4. check every epoch before anything is written.
    fetched = walk(ctx, anchor, owner, head, local.mirror.head.seq, full, held)
    fetched.reverse()  # oldest first
    todo, skipped = epochs_to_apply(fetched, local.mirror.head.digest)
    skipped, closed_here = split_rotated(fetched, skipped)
    if discard:
        _refuse_gap(todo)
    local.refuse_overwriting(todo, cfg.db)
    if not discard and todo and todo[0].opened is not None:  # it writes: it applies todo[0]
        sibyl_takes_writes()  # before the apply journal: see the docstring's last paragraph
    # Its rows go aside with the store: the kept notice names the copy before the rename
    # and after it (settled_notice.moving_aside), a kill between them no matter.
    naming = None if overtaken is None else partial(settled_notice.moving_aside, ctx,
                                                    overtaken)
    mirror, backups = _start_from(ctx, local, discard, naming)
    if overtaken is not None and backups:
        settled_notice.moved_aside(ctx, overtaken, backups[0])
    done = _apply_epochs(ctx, mirror, todo, fetched, local.present, skipped)
    if overtaken is not None:
        # With what to do about its rows, and where they are: the store moved aside
        # (its backups are the store first) holds them, not the restored one.
        done.warnings.insert(0, overtaken.notice(backups[0] if backups else None))
    _settle_mirror(ctx, done, head)
    # The newest epoch this machine held before the walk, put back in a later block and
    # since buried under newer epochs (another machine's): the oldest epoch walked names
    # where it is (its prevBlock), which the head's block cannot.
    if fetched:
        settle_block(ctx, anchor, owner, fetched[0].log.seq - 1, fetched[0].log.prev_block)
    take_in_header_wraps(ctx, (f.opened.header for f in todo
                               if f.opened is not None and f.log.seq in done.applied))
    # v0.3.0 backfills only after a pull that ended without a gap (03-new-machine.md,
    # "Snapshots and --full"): the gap's epoch, walked again, would be CLOSED as if sealed
    # under a retired key, or (one the RPC would not serve) turn the gap, exit 0, into a
    # refusal of the whole pull.
    # What it could not cache stops it and is reported, not raised: the pull's epochs are
    # applied by then, and the next `pull --full` tries again.
    reported = frozenset(e["seq"] for e in skipped + closed_here)
    backfilled, closed, stopped = (backfill(ctx, anchor, owner, head, held, reported)
                                   if full and not done.gap else ([], [], None))
    closed = sorted(closed_here + closed, key=lambda e: e["seq"])
    _provenance_from_cache(ctx, done, todo, full, owner, held)
    rows, matches, report = _check_store(ctx, done)
    if not done.gap:
        renew(ctx, next(iter(held.values())))
    result = {"applied": done.applied, "applied_epochs": done.applied_epochs,
              "head": {"seq": done.mirror.head.seq, "block": done.mirror.head.block,
                       "digest": done.mirror.head.digest},
              "chain_head": {"seq": head.seq, "block": head.block, "digest": head.digest},
              "gap": done.gap, "skipped": skipped, "closed": closed, "warnings": done.warnings,
              "backups": backups, "backfilled": backfilled, "backfill_stopped": stopped,
              "rows_total": len(rows),
              "store_root_matches": matches, "rpcs_agreed": agreed, "single_rpc": single,
              "report": report}
    if done.provenance_unsaved:
        result["provenance_unsaved"] = {"message": done.provenance_unsaved,
                                        "hint": PROVENANCE_HINT}
    result["message"] = _summary(done, skipped, len(rows), report, backfilled, closed)
    if overtaken is not None and told:  # among the warnings returned: said, not again
        settled_notice.said(ctx)
    return result


@dataclass
class _Applied:
    """What applying the epochs did, carried to the checks and the result after it."""

    mirror: Mirror  # the mirror after the newest epoch applied
    gap: list[int] = field(default_factory=list)  # from the first epoch that would not open
    unread_gap: str | None = None  # why, when that epoch could not be read (Mirror's field)
    rotated_gap: bool = False  # that epoch is sealed under a data key rotated elsewhere
    applied: list[int] = field(default_factory=list)
    applied_epochs: list[dict[str, int]] = field(default_factory=list)  # for join's lines
    written: dict[str, int] = field(default_factory=dict)  # rows written or deleted, by epoch
    warnings: list[str] = field(default_factory=list)
    provenance_unsaved: str | None = None  # why the provenance stayed as applied


def _check_freshness(ctx: SpaceContext, chain: ChainConfig, owner: str,
                     head: Head) -> tuple[bool | None, str | None]:
    """Step 1. The watermark (the newest head this machine saw) is a floor: an endpoint
    that answers an older head, or another digest at the same seq, is stale or lying, and
    the pull refuses before it reads anything else from it. With no watermark (a cold
    start) a second endpoint must agree (cold_start.py); returns what it said."""
    mark = ctx.state.watermark()
    if mark is None:
        return cold_start(ctx, chain, owner, head)
    if head.seq < mark.seq:  # lagging, or the chain lost the block (behind_head.py)
        raise behind_refusal(Anchor(chain, ctx.tracker), head, mark.seq, mark.block,
                             f"the endpoint's head (seq {head.seq}) is older than the newest "
                             f"this machine saw (seq {mark.seq}): a stale or lying RPC, "
                             f"refusing", "nothing was applied")
    if head.seq == mark.seq and head.digest != mark.digest:
        raise stale(f"the endpoint's head at seq {head.seq} has digest {head.digest[:12]}, "
                    f"not the {mark.digest[:12]} this machine saw: a stale or lying RPC, "
                    f"refusing")
    return None, None


def _refuse_gap(todo: list[Fetched]) -> None:
    """A discarding pull whose walk would stop at an epoch it could not read, one that
    contradicts the chain or one whose prev breaks refuses whole, as that epoch's refusal:
    it would move the store aside for a part of the memory, and the chain that did not
    answer, or answered that, leaves the store where it was instead (the next pull, or this
    one again, reads the epoch and restores all of it).

    So does one whose walk would stop at an epoch sealed under a data key this machine does
    not hold: a `kint rekey` on another machine, or a vault two machines each started
    before the first push (v0.3.0's 16-limits.md, "Writers": the second opens nothing
    until it connects again, which adopts the vault in the head epoch). The store moved
    aside would be replaced by none of the chain's rows; connecting again first lets the
    discard restore them. Only when the epoch's header carries a wrap under one of this
    machine's keys (`Fetched.rekeyed`), though: one none of them opens (a leaked session
    key's, 06-epochs.md) no connect opens either, and the discard goes on as v0.3.0's does,
    restoring up to it and recording it skipped, after which `kint compact --over-skipped`
    anchors this machine's store over it."""
    gap = next((f for f in todo if f.opened is None), None)
    if gap is not None and gap.refusal is not None:
        raise gap.refusal
    if gap is not None and gap.rekeyed:
        raise ProtocolError(
            ErrorCode.GAP, f"epoch {gap.log.seq} is sealed under a data key this machine does "
            f"not hold, so the restore would stop there, before the chain's rows from it on; "
            f"nothing was moved",
            ROTATED_DISCARD_HINT)


def _start_from(ctx: SpaceContext, local: LocalState, discard: bool,
                naming: Callable[[str], None] | None = None) -> tuple[Mirror, list[str]]:
    """The first writes, once every check has passed: a restore from the first epoch moves
    a discarded store aside (its backups returned), records the rows a lost store's restore
    keeps before the empty mirror is saved (so a pull killed after it resumes the restore),
    and ends the apply journal of the store that is gone. Otherwise the local mirror."""
    if not local.from_first:
        return local.mirror, []
    state = ctx.state
    backups = discard_released(ctx, naming) if discard else []
    if local.kept:  # before the empty mirror: a pull killed after it resumes
        lost_restore.begin(state, local.kept)
    else:
        lost_restore.end(state)
    apply_journal.end(state)  # the store it described is the one moved aside or gone
    return empty_mirror(state), backups


def _apply_epochs(ctx: SpaceContext, mirror: Mirror, todo: list[Fetched],
                  fetched: list[Fetched], present: dict[str, Row],
                  skipped: list[dict[str, Any]]) -> _Applied:
    """Replay each epoch through Sibyl's write methods, then record it, one at a time and
    oldest first, stopping at the first that does not open (the gap; `skipped` names it).
    The apply journal brackets each epoch, so a pull killed mid-epoch is finished, not
    taken for a fork, by the next (apply_journal.py). `present` is carried epoch to epoch."""
    state = ctx.state
    done = _Applied(mirror)
    for number, f in enumerate(todo, 1):
        ctx.progress = f"pull: applying epoch {f.log.seq} ({number} of {len(todo)})"
        if f.opened is None:
            done.gap = [x.log.seq for x in fetched if x.log.seq >= f.log.seq]
            done.unread_gap = f.reason if f.unread else None
            done.rotated_gap = f.rekeyed
            skipped.append(f.entry())
            break
        plaintext = f.opened.plaintext
        apply_journal.begin(state, f.opened.payload)
        done.warnings += replay(ctx, done.mirror, plaintext, present, done.written)
        try:
            done.mirror = record_epoch(state, f.opened.raw, plaintext, f.envelope,
                                       epoch_meta(f), payload=f.opened.payload)
        except EpochRejected as err:
            raise stale(str(err)) from None
        apply_journal.end(state)
        done.applied.append(f.log.seq)
        done.applied_epochs.append({"seq": f.log.seq, "block": f.log.block,
                                    "rows": len(plaintext.rows),
                                    "deletions": len(plaintext.deleted)})
    return done


def _settle_mirror(ctx: SpaceContext, done: _Applied, head: Head) -> None:
    """After the epochs: the newest one's root checked, the gap saved in the mirror (push
    and verify refuse while it stands), and a lost store's restore ended once the mirror
    reached the chain head.

    The root is checked once, for the newest epoch applied: building the tree after every
    epoch of a long restore cost more than the replay's own reads, and what verify trusts
    is the head's root. Each epoch's content is already authenticated (AES-GCM under the
    data key, its digest chained on chain)."""
    mirror = done.mirror
    if done.applied and not mirror.root_matches:
        done.warnings.append(f"epoch {done.applied[-1]}: the replayed rows do not reproduce "
                             f"its rows root")
    gap = (done.gap, done.unread_gap, done.rotated_gap)
    if (mirror.skipped, mirror.unread_gap, mirror.rotated_gap) != gap:
        mirror.skipped, mirror.unread_gap, mirror.rotated_gap = gap
        ctx.state.save_mirror(mirror)
    if (mirror.head.seq, mirror.head.digest) == (head.seq, head.digest):
        lost_restore.end(ctx.state)  # a lost store's restore, if one ran, is done


def _provenance_from_cache(ctx: SpaceContext, done: _Applied, todo: list[Fetched],
                           full: bool, owner: str, held: dict[bytes, bytes]) -> None:
    """A snapshot applied here made itself the provenance of every row it carried; the
    epochs before it that the cache holds (kept from earlier, or backfilled by `--full`)
    name where each value was written: a drift's anchoring block is that epoch's.

    The refinement is not the pull's work: its epochs are applied and recorded already (the
    rows in Sibyl's store, the mirror at the chain head). A full disk that stops it costs
    the finer provenance, said in the result (`provenance_unsaved`), never the pull: the
    mirror on disk stays the one the last epoch recorded, which still owes the refinement
    (`Mirror.provenance_owed`, written with the snapshot), so the next pull does it, at the
    head or not. `--full` refines every time, whether it backfilled anything or not: the
    epochs a backfill cached are the ones an owed mark does not cover."""
    if not (full or done.mirror.provenance_owed
            or any(f.snapshot for f in todo if f.log.seq in done.applied)):
        return
    try:
        done.mirror = refine_from_cache(ctx.state, done.mirror, owner, held)
    except OSError as err:
        if not disk_full(err):
            raise
        log.warning("provenance: kept as applied: the disk is full (%s: %s)",
                    err.filename or "the mirror", err.strerror)
        done.provenance_unsaved = (
            f"the rows' provenance could not be saved ({err.filename or 'the mirror'}: "
            f"{err.strerror}): a drift names the snapshot epoch's block rather than the "
            f"older epoch that wrote the value")


def _check_store(ctx: SpaceContext, done: _Applied) -> tuple[list[Row], bool, str]:
    """Re-read the store: rows the replay wrote that did not come back are warned about,
    drift starts again from what is there, and the store's root is compared with the
    anchored one (a store with unanchored changes does not match). Returns the rows, the
    comparison and its words."""
    rows = ctx.store_rows() or []
    done.warnings += rows_not_back(done.mirror, rows, done.written)
    if ctx.drift.active:
        ctx.drift.reset(rows)
    ordered = sorted(rows, key=lambda r: r.canonical_id.encode("utf-8"))
    store_root = merkle_root([r.leaf for r in ordered]).hex()
    matches = store_root == done.mirror.anchored_root
    report = ("store root matches the anchored root" if matches else
              "store root does not match the anchored root (the store holds unanchored changes)")
    return rows, matches, report


def _summary(done: _Applied, skipped: list[dict[str, Any]], rows_total: int, report: str,
             backfilled: list[int], closed: list[dict[str, Any]]) -> str:
    """The pull's one line: where a gap stopped it, that nothing was new, or what it
    restored."""
    mirror = done.mirror
    if done.gap:
        todo = f"; {ROTATED_GAP_STEP}" if done.rotated_gap else ""
        return (f"stopped at epoch {done.gap[0]}: {skipped[-1]['reason']}; the mirror "
                f"stays at epoch {mirror.head.seq}, and push and verify refuse "
                f"until it applies{todo}")
    if not done.applied:
        return (f"already at the chain head (epoch {mirror.head.seq})"
                + _older_epochs(backfilled, closed))
    # kint v0.3.0's summary line (03-new-machine.md, "What it prints"), word for word.
    return (f"restored {len(done.applied)} epoch(s), {rows_total} rows; head seq "
            f"{mirror.head.seq} at block {mirror.head.block}; {report}"
            + _older_epochs(backfilled, closed))


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


