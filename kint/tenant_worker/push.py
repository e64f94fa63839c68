"""Push (seed 001, "Anchor: push, after the write returned"; v0.3.0's 06-epochs.md): anchor
what the store holds now, in encrypted epochs, one `push(owner, space, prev, ct)`
transaction each, sent from the machine's session key.

The steps, in order: the head lock; the refusals (not connected, recovery file gone, no data
key, wraps that do not hold it, a gap); export; diff against the mirror (nothing to push
stops here, with no RPC call); the chain head must be the mirror's (else CHAIN_MOVED); the
session key must be authorized (`canWrite`); split at 92,160 compressed bytes (a row too
large is named before anything is sent); then per epoch: build the plaintext, seal it under
the data key with every current wrap in the header, sign at the machine-wide nonce, record
the signed transaction in `pending-<space16>.json`, send, wait for confirmations, check the
event's digest, record the epoch, drop the pending file.

A kill at any step loses nothing and forks nothing: `pending.resolve_pending` settles the
pending file against the chain head the next time this space pushes or pulls, or when the
worker starts.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import replace
from typing import Any

from eth_hash.auto import keccak

from kint.chain.anchor import Anchor
from kint.chain.calls import ChainRefused
from kint.chain.rpc import RpcUnavailable
from kint.custody import errors as custody_errors
from kint.custody.data_key import dek_id
from kint.custody.recovery_code import recovery_file_present
from kint.custody.wraps import read_wraps
from kint.epochs.envelope import seal
from kint.epochs.errors import EpochTooLarge
from kint.epochs.plaintext import make_plaintext, wire_rows
from kint.epochs.split import (Chunk, MerkleState, SnapshotTooLarge, plan_snapshot,
                               split_diff)
from kint.paths import remove_file
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.errors import hint_with_notices
from kint.rows.canon import Row
from kint.tenant_worker.changes import diff, snapshot
from kint.tenant_worker.connected import connected, sender_for
from kint.tenant_worker.custody_errors import as_protocol_error
from kint.tenant_worker.data_key import current_data_key, renew
from kint.tenant_worker.head_lock import head_op
from kint.tenant_worker.pending import PendingEpoch, record_landed, resolve_pending
from kint.tenant_worker.session_sender import SessionSender
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import Mirror
from kint.tenant_worker.store import is_locked
from kint.tenant_worker.unanchored import counting_from, note_count

log = logging.getLogger("kint.worker")

NOTHING_TO_PUSH = "nothing to push: the store matches the last anchored epoch"
SNAPSHOT_TOO_LARGE_HINT = ("a snapshot (compact, rekey) is one epoch and cannot be split; "
                           "`kint push` splits the changes across epochs")
# `--over-skipped` where the last pull skipped nothing (09-cli.md: honoured only then).
OVER_SKIPPED_UNUSED = ("kint: --over-skipped not used: this machine's last pull applied every "
                       "epoch, so the snapshot chains on the epoch it last saw, as without it")
# The next step for a session key the chain will not take epochs from (not NOT_CONNECTED's
# default, `kint connect`: this machine is connected, its key cannot write).
UNAUTHORIZED_HINT = ("the owner authorizes this machine's session key with `kint authorize` "
                     "(direct, page, or payload then submit) and it needs a little ETH; "
                     "`kint session-key show` says which is missing")
NOTHING_DROPPED = "nothing was dropped, the changes stay in the store until the next push"


# What the watcher's log calls a successful push that was not its own, by hold reason.
PUSHED_BY = {None: "a push from the command line", "tool": "memory_push",
             "exit": "the exit push"}


def push(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    try:
        with head_op(ctx, "push"):
            result = _push(ctx, bool(args.get("snapshot")), args.get("hold_reason"),
                           over_skipped=bool(args.get("over_skipped")),
                           dry_run=bool(args.get("dry_run")),
                           confirmations=args.get("confirmations"))
    except (RpcUnavailable, custody_errors.CustodyError) as err:
        raise failure_refusal(err) from None
    if not args.get("dry_run"):
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
        return ProtocolError(ErrorCode.RPC_UNAVAILABLE, str(err))
    return as_protocol_error(err)


def _push(ctx: SpaceContext, as_snapshot: bool, hold_reason: str | None = None, *,
          over_skipped: bool = False, dry_run: bool = False,
          new_key: tuple[bytes, tuple[Any, ...]] | None = None,
          confirmations: int | None = None) -> dict[str, Any]:
    """The push itself. `hold_reason` (watcher, exit, tool) marks a server-side push: it
    passes the hold first. A push from a terminal has none and is never held.
    `over_skipped` (compact and rekey from a terminal only) chains a snapshot on the chain
    head past an epoch this machine could not apply. `new_key` (rekey) seals the snapshot
    under a new data key and its wraps, which nothing on this machine holds yet.

    What the push has to say (`--over-skipped not used`) is in the result, or under the
    hint of the refusal met after it was said: a flag given is reported either way."""
    said: dict[str, Any] = {}  # the override line, in the result too (09-cli.md prints it)
    try:
        return _push_saying(ctx, as_snapshot, hold_reason, said, over_skipped=over_skipped,
                            dry_run=dry_run, new_key=new_key, confirmations=confirmations)
    except (RpcUnavailable, custody_errors.CustodyError, ProtocolError) as err:
        refused_with = err if isinstance(err, ProtocolError) else failure_refusal(err)
        refused_with.hint = hint_with_notices(refused_with.hint, said.get("notices", []))
        raise refused_with from None


def _push_saying(ctx: SpaceContext, as_snapshot: bool, hold_reason: str | None,
                 said: dict[str, Any], *, over_skipped: bool, dry_run: bool,
                 new_key: tuple[bytes, tuple[Any, ...]] | None,
                 confirmations: int | None) -> dict[str, Any]:
    """`_push`, filling `said` (the override line, the notices) as it goes."""
    cfg, state = ctx.config, ctx.state
    chain, enrolment = connected(ctx)
    if enrolment.vault_created and not recovery_file_present(cfg.home, cfg.space_id):
        raise ProtocolError(
            ErrorCode.NOT_CONNECTED,
            f"this machine created the vault but its recovery code file "
            f"{state.files['recovery']} is missing or empty; {NOTHING_DROPPED}",
            "run `kint recovery-code` to write it again and copy it off the machine")
    key = current_data_key(ctx)
    local = read_wraps(cfg.home, cfg.space_id)
    if local is None or local.dek_id != dek_id(key):
        raise ProtocolError(ErrorCode.NO_DATA_KEY,
                            "this machine's key wraps do not hold the cached data key (the "
                            f"key was rotated on another machine); {NOTHING_DROPPED}",
                            "run `kint connect` again")
    wraps = local.wraps
    if new_key is not None:
        key, wraps = new_key
    if confirmations is not None:
        chain = replace(chain, confirmations=confirmations)
    anchor = Anchor(chain, ctx.tracker)
    sender = sender_for(ctx, anchor)
    resolve_pending(ctx, anchor, sender, enrolment.owner)
    mirror = state.mirror()
    if mirror is not None and mirror.skipped and not (over_skipped and as_snapshot):
        raise ProtocolError(ErrorCode.GAP, f"this machine could not apply epoch(s) "
                            f"{sorted(mirror.skipped)} on its last pull, so its picture of the "
                            f"memory is incomplete; {NOTHING_DROPPED}",  # v0.3.0's words
                            "run `kint pull` to apply it; for an epoch that will never open, "
                            "`kint compact --over-skipped` anchors this machine's store over it")
    before = counting_from(cfg.db)
    rows = _store_rows(ctx, hold_reason)
    missing = rows is None
    if missing:  # not created yet: no rows, unless that forgets anchored ones
        _refuse_forgetting_anchored_rows(cfg.db, mirror)
        rows = []
    elif hold_reason is not None:
        from kint.tenant_worker.drift import hold_error

        hold = ctx.drift.evaluate(ctx.ro_connection(), cfg.tenant, mirror, hold_reason)
        if hold is not None:
            raise hold_error(hold)
    changes = snapshot(mirror, rows) if as_snapshot else diff(mirror, rows)
    if not changes and not as_snapshot:
        note_count(ctx, before, mirror, 0)
        return {"pushed": 0, "message": NOTHING_TO_PUSH, "epochs": [], "changed_rows": 0,
                "deleted_rows": 0, **_head_after(mirror)}
    head = anchor.head(enrolment.owner, cfg.space_id)
    seen = mirror.head if mirror is not None else None
    base = mirror
    if over_skipped and as_snapshot and mirror is not None and mirror.skipped:
        said["override"] = (f"push: OVERRIDE, anchoring a snapshot on top of chain head seq "
                            f"{head.seq} ({head.digest[:12]}) although this machine stopped "
                            f"at seq {mirror.head.seq} and could not apply epoch(s) "
                            f"{mirror.skipped}")
        log.warning("%s", said["override"])
    elif seen is None or (head.seq, head.digest) != (seen.seq, seen.digest):
        raise ProtocolError(
            ErrorCode.CHAIN_MOVED,
            f"the chain head is at seq {head.seq} but this machine last saw seq "
            f"{seen.seq if seen else 0}: another machine pushed; {NOTHING_DROPPED}",
            "run `kint pull` first, or `kint pull --discard-local` when unanchored local "
            "changes make that pull a fork")
    if over_skipped and as_snapshot and "override" not in said:
        said["notices"] = [OVER_SKIPPED_UNUSED]  # honoured only past a skipped epoch
    session = ctx.session_account()
    if not anchor.can_write(enrolment.owner, session.address):
        raise ProtocolError(ErrorCode.NOT_CONNECTED,
                            f"session key {session.address} is not authorized for owner "
                            f"{enrolment.owner}: authorize it (kint authorize) and fund it",
                            UNAUTHORIZED_HINT)
    wires = wire_rows(changes.rows)
    try:
        chunks = ([plan_snapshot(wires, changes.deleted)] if as_snapshot else
                  split_diff(wires, changes.deleted, state_after=_state_after(mirror)))
    except EpochTooLarge as err:
        # TOO_LARGE, not BAD_REQUEST: a push's refusal (exit 5) for rekey too, whose own
        # refusals are BAD_REQUEST (exit 2); a snapshot that cannot fit is what its push met.
        raise ProtocolError(ErrorCode.TOO_LARGE, str(err),
                            SNAPSHOT_TOO_LARGE_HINT if isinstance(err, SnapshotTooLarge)
                            else NOTHING_DROPPED) from None
    if dry_run:
        return {**said, "pushed": 0, "dry_run": True, "epochs": [
            {"seq": head.seq + i, "rows": len(c.rows), "deleted": len(c.deleted),
             "bytes": c.measured} for i, c in enumerate(chunks, 1)],
            "message": f"would anchor {len(changes)} row change(s) in {len(chunks)} epoch(s)"}
    pushed: list[dict[str, Any]] = []
    seq, prev, bucket = head.seq, head.digest, (base.head.bucket if base else None) or 0
    current = mirror
    for number, chunk in enumerate(chunks, 1):
        ctx.progress = f"push: epoch {number} of {len(chunks)} ({len(chunk.rows)} rows)"
        current = _push_epoch(ctx, anchor, sender, enrolment.owner, key, wraps,
                              seq + 1, prev, bucket, chunk, as_snapshot)
        meta = state.meta(current.head.seq)
        seq, prev, bucket = meta.seq, meta.digest, meta.bucket
        cost = meta.cost or {}
        pushed.append({"seq": meta.seq, "block": meta.block, "tx": meta.tx,
                       "digest": meta.digest, "rows": len(chunk.rows),
                       "deleted": len(chunk.deleted), "snapshot": as_snapshot,
                       "bucket": meta.bucket, "bytes": cost.get("bytes"),
                       "gas": cost.get("gas"), "l1_fee": cost.get("l1_fee"),
                       "cost_wei": cost.get("cost_wei")})
    # Everything read at `before` is anchored: the heartbeat says 0 until the store moves.
    note_count(ctx, before, current, 0)
    if new_key is None:
        renew(ctx, key)
    if ctx.drift.active and not missing:
        ctx.drift.reset(ctx.store_rows() or [])
    changed_rows = sum(p["rows"] for p in pushed)
    deleted_rows = sum(p["deleted"] for p in pushed)
    total = changed_rows + deleted_rows
    return {**said, "pushed": total, "epochs": pushed, "changed_rows": changed_rows,
            "deleted_rows": deleted_rows, **_head_after(current),
            "message": f"anchored {total} row change(s) in {len(pushed)} epoch(s), head "
                       f"epoch {current.head.seq} at block {current.head.block}"}


def _store_rows(ctx: SpaceContext, hold_reason: str | None) -> list[Row] | None:
    """The store's rows (None: not created yet). A store kint cannot read is refused: a
    server-side push is held over it (seed 001: an unchecked push is what the hold stops),
    and a push from a terminal says which file, with nothing anchored."""
    try:
        return ctx.store_rows()
    except sqlite3.DatabaseError as err:
        if is_locked(err):
            # Another process holds the store's lock past the read's busy wait: the store
            # is fine and the push can run once it lets go. Not a hold, which waits for a
            # human, and not "cannot be read", which sends one to `--discard-local`.
            raise ProtocolError(ErrorCode.BUSY, f"the store {ctx.config.db} is locked by "
                                f"another process ({err}); nothing was anchored",
                                "run the push again once the other writer lets go of the "
                                "store") from None
        if hold_reason is not None:
            from kint.tenant_worker.drift import UNREADABLE_HOLD_HINT, hold_error

            hold = ctx.drift.unreadable(ctx.config.db, str(err), hold_reason)
            raise hold_error(hold, UNREADABLE_HOLD_HINT) from None
        raise ProtocolError(ErrorCode.INTERNAL, f"the store {ctx.config.db} cannot be read "
                            f"({err}); nothing was anchored",
                            "check the store file (kint only reads it); `kint pull "
                            "--discard-local` moves it aside and restores the anchored "
                            "values") from None


def _refuse_forgetting_anchored_rows(db: str, mirror: Mirror | None) -> None:
    """A store not created yet (Sibyl creates it on the first write) holds no rows: on a
    fresh vault, nothing to push. Over rows this machine anchored, it is refused: its diff
    would anchor the deletion of every one of them, and a store that moved or a mistyped
    `--db` is not a wish to forget them."""
    if mirror is not None and mirror.rows:
        raise ProtocolError(
            ErrorCode.BAD_REQUEST,
            f"the store {db} does not exist, and {len(mirror.rows)} row(s) anchored from this "
            f"space's store are on chain: a push would anchor the deletion of every one; "
            f"nothing was anchored",
            "check --db or SIBYL_MEMORY_DB; `kint pull` restores the anchored rows into a new "
            "store")


def _head_after(mirror: Mirror | None) -> dict[str, Any]:
    """The head this machine holds after the push (v0.3.0's memory_push names it)."""
    head = mirror.head if mirror is not None else None
    return {"head_seq": head.seq if head else 0,
            "head_digest": head.digest if head else "0" * 64}


def _state_after(mirror: Mirror | None) -> Any:
    leaves = {cid: m.leaf for cid, m in mirror.rows.items()} if mirror is not None else {}
    return MerkleState(leaves).apply


def _push_epoch(ctx: SpaceContext, anchor: Anchor, sender: SessionSender, owner: str,
                key: bytes, wraps: Any, seq: int, prev: str, bucket_floor: int, chunk: Chunk,
                as_snapshot: bool) -> Mirror:
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
    try:
        signed = sender.sign(calldata, NOTHING_DROPPED)
    except ChainRefused as err:
        raise refused(err) from None
    pending = PendingEpoch(seq=seq, prev=prev, digest=keccak(blob).hex(), nonce=signed.nonce,
                           raw_tx=signed.raw, bucket=header.bucket, plaintext=raw,
                           envelope=blob, sender=sender.account.address)
    pending.save(state.files["pending"])
    try:
        tx = sender.send(signed)
        receipt = sender.wait(tx, signed)
    except ChainRefused as err:
        remove_file(state.files["pending"])
        raise refused(err) from None
    return record_landed(ctx, anchor, pending, receipt)


def refused(err: ChainRefused) -> ProtocolError:
    if err.error == "StaleHead":
        return ProtocolError(ErrorCode.CHAIN_MOVED,
                             f"the chain refused the epoch ({err}): another machine pushed "
                             f"first; {NOTHING_DROPPED}", "run `kint pull` first")
    if err.error == "NotAuthorized":
        return ProtocolError(ErrorCode.NOT_CONNECTED,
                             f"the chain refused the epoch: this machine's session key is not "
                             f"authorized for the owner; {NOTHING_DROPPED}",
                             UNAUTHORIZED_HINT)
    return ProtocolError(ErrorCode.INTERNAL, f"transaction would revert: {err}",
                         NOTHING_DROPPED)
