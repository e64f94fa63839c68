"""Push (docs/how-it-works.md, "Push, step by step"; v0.3.0's 06-epochs.md): anchor
what the store holds now, in encrypted epochs, one `push(owner, space, prev, ct)`
transaction each, sent from the machine's session key.

The steps, in order: the head lock; the refusals (not connected, recovery file gone, no data
key, wraps that do not hold it, a gap); export; diff against the mirror (nothing to push
stops here, with no RPC call); the chain head must be the mirror's (else CHAIN_MOVED); the
session key must be authorized (`canWrite`) (the refusals: push_refusals.py); split at
92,160 compressed bytes (a row too large is named before anything is sent); then per epoch:
build the plaintext, seal it under the data key with every current wrap in the header, sign
at the machine-wide nonce, record the signed transaction in `pending-<space16>.json`, send,
wait for confirmations, check the event's digest, record the epoch, drop the pending file.
The exit push looks at its bound and at the worker's stop before each epoch, and stops
between two (exit_bound.py), the rows of those not sent left in the store for the next push;
its receipt waits end at its bound, its settlement's re-send of a journal's included.

A kill at any step loses nothing and forks nothing: `pending.resolve_pending` settles the
pending file against the chain head the next time this space pushes or pulls, or when the
worker starts; a rekey's journal is settled right after it (`rekey_settle.py`), before an
epoch is sealed. A push that finds the chain moved past its journal (another machine pushed
meanwhile: overtaken.py) settles it, then refuses CHAIN_MOVED saying what it found; one
whose key may no longer write, dropped unsent, refuses NOT_CONNECTED naming the key
(unauthorized_journal.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kint.chain.anchor import Anchor, Head
from kint.chain.rpc import RpcUnavailable, WaitCut
from kint.custody import errors as custody_errors
from kint.epochs.envelope import seal
from kint.epochs.errors import EpochTooLarge
from kint.epochs.plaintext import make_plaintext, wire_rows
from kint.epochs.split import (Chunk, MerkleState, SnapshotTooLarge, plan_snapshot,
                               split_diff)
from kint.keccak import keccak
from kint.outcomes import NOTHING_DROPPED
from kint.paths import remove_file
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.errors import NOTICE_PREFIX, hint_with_notices
from kint.protocol.hints import SNAPSHOT_TOO_LARGE_HINT
from kint.tenant_worker.chain_refusal import chain_unavailable
from kint.tenant_worker.changes import Changes, diff, snapshot
from kint.tenant_worker.connected import connected, sender_for
from kint.tenant_worker.custody_errors import as_protocol_error
from kint.tenant_worker.data_key import renew
from kint.tenant_worker.epoch_send import PUSH_WORDS, send_epoch, sign_epoch
from kint.tenant_worker.exit_bound import WAIT_CUT, ExitBound, cut
from kint.tenant_worker.head_lock import TurnLeft, head_op
from kint.tenant_worker.landed_block import settle_head_block
from kint.tenant_worker.pending import SettleCut, record_landed
from kint.tenant_worker.pending_journal import PendingEpoch
from kint.tenant_worker.reanchor import REANCHOR_UNUSED, reanchor
from kint.tenant_worker.push_result import anchored, cut_short, head_after, settle_cut
from kint.tenant_worker.push_refusals import (head_is_the_mirrors, key_and_wraps,
                                              refuse_behind, refuse_gap,
                                              refuse_unauthorized, rows_to_push,
                                              unauthorized_notice)
from kint.tenant_worker import settled_notice
from kint.tenant_worker.rekey_settle import COMPLETED, settle_journals
from kint.tenant_worker.session_sender import SessionSender
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import Mirror
from kint.tenant_worker.unanchored import counting_from, note_count

NOTHING_TO_PUSH = "nothing to push: the store matches the last anchored epoch"
# What the watcher's log calls a successful push that was not its own, by hold reason.
PUSHED_BY = {None: "a push from the command line", "tool": "memory_push",
             "exit": "the exit push"}
# The pushes whose refusal reaches the one who asked: a command line's (None) and an
# agent's memory_push ("tool"). Only they say what a settlement found and use it up
# (settled_notice.py); the watcher's and the exit push's refusals are read by nobody.
TOLD = frozenset({None, "tool"})
LEFT_TO_WAITING = ("left to another exit push of the space, which waits its turn: it reads "
                   "the whole store when it runs, so this session's rows are in it")


def push(ctx: SpaceContext, args: dict[str, Any], bound: ExitBound | None = None,
         refuse_stopping: bool = False) -> dict[str, Any]:
    """A push; `bound` (the exit push's, sessions.exit_push: never from a request's args)
    waits for an op of the space this worker runs (the watcher's push, another session's,
    a pull) rather than be refused BUSY: its server is gone, so nobody tries it again, and
    the rows it wrote after that op read the store waited for the watcher's next push, if
    one came before the worker idled out. It waits up to half its bound (`turn_by`),
    then pushes what that op left, or says nothing is left, starting no epoch that might
    end past the bound (exit_bound.py). One waits at a time (head_lock._wait_turn, which
    logs the wait): of two, the one whose wait ends later waits, and the other leaves its
    rows to it (LEFT_TO_WAITING), each wait its own deadline. Every other push is refused at
    once, as its caller can try again: chosen by the caller (sessions.exit_push), not by
    the hold_reason a request sends. `refuse_stopping` (every push of the worker's own,
    sessions.server_push, likewise never from a request's args): refused TurnStopped
    once the worker's stop began (head_lock._take; an exit push's wait is refused so by
    head_lock._wait_turn, and a wait at its turn for another process's head lock by
    head_lock._flock_unless_stopped), where a request's push runs in the stop's grace."""
    try:
        with head_op(ctx, "push", wait_until=bound.turn_by if bound else None,
                     refuse_stopping=refuse_stopping):
            result = _push(ctx, bool(args.get("snapshot")), args.get("hold_reason"), bound=bound,
                           over_skipped=bool(args.get("over_skipped")),
                           dry_run=bool(args.get("dry_run")),
                           confirmations=args.get("confirmations"),
                           again=bool(args.get("reanchor")) and not args.get("hold_reason"))
    except TurnLeft:
        return {"pushed": 0, "message": LEFT_TO_WAITING, "epochs": []}
    except (RpcUnavailable, custody_errors.CustodyError) as err:
        raise failure_refusal(err) from None
    # An exit push cut before its first epoch anchored nothing: no push went through for
    # the watcher's backoff to end on.
    if not args.get("dry_run") and not (result.get("cut_short") and not result["epochs"]):
        went_through(ctx, PUSHED_BY.get(args.get("hold_reason")))
    return result


def went_through(ctx: SpaceContext, by: str | None) -> None:
    """A push of this space succeeded, the watcher's own included (`by` None: the log
    names no other pusher): the store watcher need not wait out an earlier failure of its
    own any longer (push_backoff.py). The one place that tells it."""
    if ctx.watcher is not None:
        ctx.watcher.backoff.went_through(by)


def failure_refusal(err: RpcUnavailable | custody_errors.CustodyError) -> ProtocolError:
    """What a push (and rekey, around its own) refuses an RPC or custody failure with."""
    if isinstance(err, RpcUnavailable):
        return chain_unavailable(err)
    return as_protocol_error(err)


@dataclass
class SettledSaid:
    """Whether a push put a settled notice that owes nothing (settled_notice.py) among the
    notices it says: it is used up only once they reach the caller, in the result or under
    the refusal's hint. Used up as the settlement read it, a failure the refusal does not
    carry them on (a corrupt state file, met after a rekey's snapshot was sent) lost it
    unsaid."""

    among: bool = False

    def used_up(self, ctx: SpaceContext) -> None:
        """The notices reached the caller: the settled one is not said again."""
        if self.among:
            settled_notice.said(ctx)


def _push(ctx: SpaceContext, as_snapshot: bool, hold_reason: str | None = None, *,
          over_skipped: bool = False, dry_run: bool = False,
          new_key: tuple[bytes, tuple[Any, ...]] | None = None,
          confirmations: int | None = None, again: bool = False,
          settled: SettledSaid | None = None,
          bound: ExitBound | None = None) -> dict[str, Any]:
    """The push itself. `hold_reason` (watcher, exit, tool) marks a server-side push: it
    passes the hold first. A push from a terminal has none and is never held.
    `over_skipped` (compact and rekey from a terminal only) chains a snapshot on the chain
    head past an epoch this machine could not apply. `new_key` (rekey) seals the snapshot
    under a new data key and its wraps, which nothing on this machine holds yet. `again`
    (`push --reanchor`, from a terminal only) first sends again the epochs a
    reorganisation dropped (reanchor.py).

    What the push has to say (`--over-skipped not used`) is in the result, or under the
    hint of the refusal met after it was said: a flag given is reported either way. A
    caller that builds its own result from this one (rekey, which may still fail after
    the snapshot landed) passes `settled` and uses it up itself once its result is built;
    a refusal here carries the notices to the caller, so it is used up then either way.
    `bound` (the exit push's): no epoch is started past it (exit_bound.cut)."""
    said: dict[str, Any] = {}  # the override line, in the result too (09-cli.md prints it)
    saying = settled if settled is not None else SettledSaid()
    try:
        result = _push_saying(ctx, as_snapshot, hold_reason, said, saying,
                              over_skipped=over_skipped, dry_run=dry_run, new_key=new_key,
                              confirmations=confirmations, again=again, bound=bound)
    except (RpcUnavailable, custody_errors.CustodyError, ProtocolError) as err:
        refused_with = err if isinstance(err, ProtocolError) else failure_refusal(err)
        refused_with.hint = hint_with_notices(refused_with.hint, said.get("notices", []))
        saying.used_up(ctx)
        raise refused_with from None
    if settled is None:
        saying.used_up(ctx)
    return result


def _push_saying(ctx: SpaceContext, as_snapshot: bool, hold_reason: str | None,
                 said: dict[str, Any], settled: SettledSaid, *, over_skipped: bool,
                 dry_run: bool,
                 new_key: tuple[bytes, tuple[Any, ...]] | None,
                 confirmations: int | None, again: bool = False,
                 bound: ExitBound | None = None) -> dict[str, Any]:
    """`_push`, filling `said` (the override line, the notices) as it goes. Every refusal
    comes before the first transaction is signed, in the order the module's docstring
    gives; then the epochs are sent one by one. A settled notice put among the notices
    marks `settled`, for `_push` (or its caller) to use it up once they are said."""
    cfg, state = ctx.config, ctx.state
    chain, enrolment = connected(ctx)
    key, wraps = key_and_wraps(ctx, enrolment.vault_created)
    if new_key is not None:
        key, wraps = new_key
    if confirmations is not None:
        chain = replace(chain, confirmations=confirmations)
    anchor = Anchor(chain, ctx.tracker)
    if dry_run:
        preview = _journal_preview(ctx, said)
        if preview is not None:
            return preview
    # A dry run signs nothing: the session key is not loaded (with no push journal to
    # settle, settle_journals reaches for none), and its refusal is a notice
    # (unauthorized_notice).
    sender = None if dry_run else sender_for(ctx, anchor)
    told = hold_reason in TOLD
    try:
        outcome, overtaken = settle_journals(ctx, anchor, enrolment.owner, sender=sender,
                                             rekey=new_key is None, told=told,
                                             until=bound.ends if bound is not None else None)
    except SettleCut as err:  # the exit push's bound came in a journal's re-send's wait
        return settle_cut(said, state.mirror(), err.seq)
    if outcome == COMPLETED:
        # A rekey killed after its snapshot landed: that snapshot's key is the one now.
        key, wraps = key_and_wraps(ctx, True)
    if overtaken is not None:  # settled: behind the chain, or the rows wait for a key
        if settled_notice.owes_nothing(overtaken):  # the store was pulled past it since
            said.setdefault("notices", []).append(overtaken.notice())
            settled.among = told
        else:
            if told:  # this refusal says it, the next push need not; else kept for it
                settled_notice.said(ctx)
            # A rekey's snapshot settles a plain push journal here, not in rekey's own
            # settlement (which settles one only beside a rekey journal): its refusal is
            # the rekey's, whose hint told it to run `kint push` again.
            raise overtaken.refusal("kint rekey" if new_key is not None else "kint push")
    mirror = state.mirror()
    refuse_gap(mirror, over_skipped and as_snapshot)
    if again:
        said["reanchored"] = reanchor(ctx, anchor, sender, enrolment.owner, key,
                                      anchor.head(enrolment.owner, cfg.space_id), mirror,
                                      dry_run)
        if dry_run and said["reanchored"]:
            seqs = [e["seq"] for e in said["reanchored"]]
            return {**said, "pushed": 0, "dry_run": True, "epochs": [],
                    "message": f"would anchor again epoch(s) {seqs}, which the chain lost; "
                               f"then what the store changed"}
        if not said["reanchored"]:
            said.setdefault("notices", []).append(REANCHOR_UNUSED)
        mirror = state.mirror()
    before = counting_from(cfg.db)
    rows = rows_to_push(ctx, mirror, hold_reason)  # None: the store is not created yet
    present = rows if rows is not None else []
    changes = snapshot(mirror, present) if as_snapshot else diff(mirror, present)
    if not changes and not as_snapshot:
        note_count(ctx, before, mirror, 0)
        return {**said, "pushed": 0, "message": _nothing_to_push(said), "epochs": [],
                "changed_rows": 0, "deleted_rows": 0, **head_after(mirror)}
    head = anchor.head(enrolment.owner, cfg.space_id)
    refuse_behind(anchor, head, mirror)
    head_is_the_mirrors(head, mirror, over_skipped and as_snapshot, said)
    if dry_run:  # it sends nothing: the key's refusal is said, not raised
        notice = unauthorized_notice(ctx, anchor, enrolment.owner)
        if notice is not None:
            said["notices"] = [*said.get("notices", []), notice]
    else:
        refuse_unauthorized(ctx, anchor, enrolment.owner)
    chunks = _split(changes, as_snapshot, mirror)
    if dry_run:
        return {**said, "pushed": 0, "dry_run": True, "epochs": [
            {"seq": head.seq + i, "rows": len(c.rows), "deleted": len(c.deleted),
             "bytes": c.measured} for i, c in enumerate(chunks, 1)],
            "message": f"would anchor {len(changes)} row change(s) in {len(chunks)} epoch(s)"}
    settle_head_block(ctx, anchor, enrolment.owner, head)  # put back in a later block
    current, pushed, why = _push_epochs(ctx, anchor, sender, enrolment.owner, key, wraps,
                                        head, mirror, chunks, as_snapshot, bound)
    if why is not None:  # the exit push's bound, or the worker's stop
        if pushed and new_key is None:
            # Its epochs went through as a whole push's do: the rows it leaves for the next
            # push need the key as much, so its deadline is renewed as theirs would be.
            renew(ctx, key)
        return cut_short(ctx, said, before, current, pushed, chunks, why, why == WAIT_CUT)
    # Everything read at `before` is anchored: the heartbeat says 0 until the store moves.
    note_count(ctx, before, current, 0)
    if new_key is None:
        renew(ctx, key)
    if ctx.drift.active and rows is not None:
        ctx.drift.reset(ctx.store_rows() or [])
    return anchored(said, pushed, current)


def _journal_preview(ctx: SpaceContext, said: dict[str, Any]) -> dict[str, Any] | None:
    """A dry run where an interrupted push left its journal: it sends nothing and releases
    no nonce, so it leaves the journal for the next push to settle (settling may send the
    journal's signed transaction again, or give its nonce back) and says so; what the store
    changed is counted against the mirror that settlement moves, so it stops there. None
    with no journal: the dry run goes on."""
    journal = PendingEpoch.load(ctx.state.files["pending"])
    if journal is None:
        return None
    notice = (f"{NOTICE_PREFIX}an interrupted push of epoch {journal.seq} is settled by the "
              f"next push (recorded, sent again or dropped against the chain head); this dry "
              f"run sent nothing")
    return {**said, "pushed": 0, "dry_run": True, "epochs": [],
            "interrupted_push": journal.seq,  # for a script: the preview stops at it
            "notices": [*said.get("notices", []), notice],
            "message": f"would first settle the interrupted push of epoch {journal.seq}, "
                       f"then anchor what the store changed after it"}


def _nothing_to_push(said: dict[str, Any]) -> str:
    """NOTHING_TO_PUSH, after the epochs `push --reanchor` sent again when it sent any."""
    again = [e["seq"] for e in said.get("reanchored") or []]
    if not again:
        return NOTHING_TO_PUSH
    return (f"anchored again epoch(s) {again}, which the chain had lost, head epoch "
            f"{again[-1]}; {NOTHING_TO_PUSH}")


def _split(changes: Changes, as_snapshot: bool, mirror: Mirror | None) -> list[Chunk]:
    """The epochs to send: one snapshot, or the diff split at the size limit. A row too
    large for any epoch is named (BAD_REQUEST) before anything is sent."""
    wires = wire_rows(changes.rows)
    try:
        return ([plan_snapshot(wires, changes.deleted)] if as_snapshot else
                split_diff(wires, changes.deleted, state_after=_state_after(mirror)))
    except EpochTooLarge as err:
        # TOO_LARGE, not BAD_REQUEST: a push's refusal (exit 5) for rekey too, whose own
        # refusals are BAD_REQUEST (exit 2); a snapshot that cannot fit is what its push met.
        raise ProtocolError(ErrorCode.TOO_LARGE, str(err),
                            SNAPSHOT_TOO_LARGE_HINT if isinstance(err, SnapshotTooLarge)
                            else NOTHING_DROPPED) from None


def _push_epochs(ctx: SpaceContext, anchor: Anchor, sender: SessionSender, owner: str,
                 key: bytes, wraps: Any, head: Head, mirror: Mirror | None,
                 chunks: list[Chunk], as_snapshot: bool,
                 bound: ExitBound | None = None,
                 ) -> tuple[Mirror | None, list[dict[str, Any]], str | None]:
    """Send the epochs in order, each chained on the one before (its seq, digest and
    bucket floor read back from what `_push_epoch` recorded), and say what each cost.
    Returns the mirror after the last sent (`mirror` when none was), the epochs' lines, and
    why the exit push (`bound`) stopped between two (exit_bound.cut; None: all were sent),
    the reason it broke on, not one read again after (a stop begun since), or in an epoch's
    receipt wait, cut at its bound (exit_bound.WAIT_CUT: that epoch's journal is kept)."""
    state = ctx.state
    pushed: list[dict[str, Any]] = []
    seq, prev, bucket = head.seq, head.digest, (mirror.head.bucket if mirror else None) or 0
    current = mirror
    # The receipt wait of an epoch begun inside the bound ends at it too: the room kept
    # for one (exit_bound.kept_room) is capped, and its count of the wait's calls is no
    # bound (an unstick makes its own, as many as the nonces it pushes through).
    until = bound.ends if bound is not None else None
    for number, chunk in enumerate(chunks, 1):
        why = cut(ctx, bound, anchor.config)
        if why is not None:
            return current, pushed, why
        ctx.progress = f"push: epoch {number} of {len(chunks)} ({len(chunk.rows)} rows)"
        try:
            current = _push_epoch(ctx, anchor, sender, owner, key, wraps,
                                  seq + 1, prev, bucket, chunk, as_snapshot, until)
        except WaitCut:
            return current, pushed, WAIT_CUT
        meta = state.meta(current.head.seq)
        seq, prev, bucket = meta.seq, meta.digest, meta.bucket
        cost = meta.cost or {}
        pushed.append({"seq": meta.seq, "block": meta.block, "tx": meta.tx,
                       "digest": meta.digest, "rows": len(chunk.rows),
                       "deleted": len(chunk.deleted), "snapshot": as_snapshot,
                       "bucket": meta.bucket, "bytes": cost.get("bytes"),
                       "gas_used": cost.get("gas"), "l1_fee": cost.get("l1_fee"),
                       "cost_wei": cost.get("cost_wei")})
    return current, pushed, None


def _state_after(mirror: Mirror | None) -> Any:
    leaves = {cid: m.leaf for cid, m in mirror.rows.items()} if mirror is not None else {}
    return MerkleState(leaves).apply


def save_journal(pending: PendingEpoch, path: Path, sender: SessionSender) -> None:
    """The push's journal, written before its transaction is sent. One that cannot be
    written (a full disk) leaves nothing to settle the transaction by, so its nonce is
    given back: the nonce book held the signed epoch from its signing, and another space's
    `unstick` would have broadcast it behind this machine, with no journal to record it."""
    try:
        pending.save(path)
    except BaseException:
        sender.book.give_back(pending.nonce)
        raise


def _push_epoch(ctx: SpaceContext, anchor: Anchor, sender: SessionSender, owner: str,
                key: bytes, wraps: Any, seq: int, prev: str, bucket_floor: int, chunk: Chunk,
                as_snapshot: bool, until: float | None = None) -> Mirror:
    """One epoch signed, journalled, sent and recorded; its receipt wait ends at `until`
    (the exit push's bound: WaitCut, the journal kept for the next push or pull)."""
    cfg, state = ctx.config, ctx.state
    plaintext = make_plaintext(tenant=cfg.label, space=cfg.space_id, seq=seq, prev=prev,
                               rows=chunk.rows, deleted=chunk.deleted,
                               rows_root=chunk.rows_root, n_rows=chunk.n_rows,
                               snapshot=as_snapshot)
    raw = plaintext.encode()
    blob, header = seal(raw, dek=key, owner=owner, space=cfg.space_id, seq=seq, prev=prev,
                        rows_root=chunk.rows_root, wraps=wraps, snapshot=as_snapshot,
                        bucket_floor=bucket_floor)
    calldata = anchor.encode_push(owner, cfg.space_id, prev, blob)
    signed = sign_epoch(sender, calldata)
    pending = PendingEpoch(seq=seq, prev=prev, digest=keccak(blob).hex(), nonce=signed.nonce,
                           raw_tx=signed.raw, bucket=header.bucket, plaintext=raw,
                           envelope=blob, sender=sender.account.address)
    save_journal(pending, state.files["pending"], sender)
    # A nonce counted as spent may be this epoch's own transaction: the journal decides.
    receipt = send_epoch(sender, signed, seq, PUSH_WORDS,
                         not_taken=lambda: remove_file(state.files["pending"]), until=until)
    return record_landed(ctx, anchor, pending, receipt)
