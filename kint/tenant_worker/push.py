"""Push (seed 001, "Anchor: push, after the write returned"): anchor what the store holds
now, in encrypted epochs, one transaction each.

The steps, in the seed's order: the head lock; the refusals (not connected, recovery file
gone, no data key, no wraps, a gap); export; diff against the mirror (nothing to push
stops here, with no RPC call); the chain head must be the mirror's (else CHAIN_MOVED);
this machine's writer must hold the right; split under KINT_EPOCH_MAX_BYTES (a row too
large is named before anything is sent); then per epoch: seal, record the signed
transaction in `pending-<space>.json`, send, wait for confirmations, check the event's
digest, record the epoch, drop the pending file.

A kill at any step loses nothing and forks nothing: the pending file is resolved against
the chain head the next time this space pushes or pulls (`resolve_pending`).
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from eth_hash.auto import keccak

from kint.chain.anchor import INSUFFICIENT_FUNDS, Anchor, ChainRefused
from kint.chain.rpc import RpcUnavailable
from kint.paths import atomic_write
from kint.protocol import ErrorCode, ProtocolError
from kint.rows.export import export_rows
from kint.tenant_worker import epoch_format, keys
from kint.tenant_worker.changes import diff, snapshot
from kint.tenant_worker.funding import ensure_writer_funds
from kint.tenant_worker.head_lock import HeadLockBusy, head_lock, head_op
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import (
    EpochMeta,
    EpochRejected,
    Mirror,
    ZERO_DIGEST,
    apply_rows,
    record_epoch,
)

log = logging.getLogger("kint.worker")

NOTHING_TO_PUSH = "nothing to push: the store matches the last anchored epoch"
NOTHING_DROPPED = "nothing was dropped, the changes stay in the store until the next push"


def data_key(ctx: SpaceContext) -> bytes:
    """The cached data key, or the seed's refusal."""
    try:
        secret = keys.machine_secret(ctx.config.home)
        return keys.open_vault(ctx.config.home, ctx.config.space_id, secret.secret)
    except keys.VaultMissing:
        raise ProtocolError(ErrorCode.NO_DATA_KEY,
                            f"no data key is cached for this space: {NOTHING_DROPPED}",
                            "run `kint connect --recovery-code CODE --owner ADDRESS`") from None
    except keys.VaultExpired as err:
        raise ProtocolError(ErrorCode.NO_DATA_KEY, str(err),
                            "run `kint connect --recovery-code CODE --owner ADDRESS` to "
                            "unlock it again") from None
    except keys.KeysError as err:
        raise ProtocolError(ErrorCode.NO_DATA_KEY, f"{err}; {NOTHING_DROPPED}") from None


def push(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    try:
        with head_op(ctx):
            return _push(ctx, bool(args.get("snapshot")), args.get("hold_reason"))
    except RpcUnavailable as err:
        raise ProtocolError(ErrorCode.RPC_UNAVAILABLE, str(err)) from None


def connected(ctx: SpaceContext) -> tuple[Any, Any]:
    chain = ctx.chain()
    enrolment = ctx.enrolment()
    if chain is None or enrolment is None:
        raise ProtocolError(ErrorCode.NOT_CONNECTED, "this machine is not connected for this "
                            "space", "run `kint connect` first")
    return chain, enrolment


def _push(ctx: SpaceContext, as_snapshot: bool, hold_reason: str | None = None
          ) -> dict[str, Any]:
    """The push itself. `hold_reason` (watcher, exit, tool) marks a server-side push: it
    passes the hold first. A push from a terminal has none and is never held."""
    cfg, state = ctx.config, ctx.state
    chain, enrolment = connected(ctx)
    if enrolment.vault_created and not state.files["recovery"].exists():
        raise ProtocolError(
            ErrorCode.NOT_CONNECTED,
            f"this machine created the vault but its recovery code file "
            f"{state.files['recovery']} is gone; {NOTHING_DROPPED}",
            "run `kint recovery-code` to write it again and keep it safe, then push")
    key = data_key(ctx)
    if not state.files["wraps"].exists():
        raise ProtocolError(ErrorCode.NOT_CONNECTED, "no key wraps are recorded for this space",
                            "run `kint connect` again")
    anchor = Anchor(chain, ctx.tracker)
    resolve_pending(ctx, anchor, enrolment.owner)
    mirror = state.mirror()
    if mirror is not None and mirror.skipped:
        raise ProtocolError(ErrorCode.GAP, "the last pull left a gap at epoch(s) "
                            + ", ".join(map(str, mirror.skipped)) + f"; {NOTHING_DROPPED}",
                            "run `kint pull` to apply it first")
    if hold_reason is not None:
        from kint.tenant_worker.drift import hold_error

        hold = ctx.drift.evaluate(ctx.ro_connection(), cfg.tenant, mirror, hold_reason)
        if hold is not None:
            raise hold_error(hold)
    rows = export_rows(ctx.ro_connection(), cfg.tenant)
    changes = snapshot(rows) if as_snapshot else diff(mirror, rows)
    if not changes:
        return {"pushed": 0, "message": NOTHING_TO_PUSH, "epochs": []}
    head = anchor.head(enrolment.owner, cfg.space_id)
    seen = mirror.head if mirror is not None else None
    if seen is None or (head.seq, head.digest) != (seen.seq, seen.digest):
        raise ProtocolError(
            ErrorCode.CHAIN_MOVED,
            f"the chain head is at seq {head.seq} but this machine last saw seq "
            f"{seen.seq if seen else 0}: another machine pushed; {NOTHING_DROPPED}",
            "run `kint pull` first, or `kint pull --discard-local` when unanchored local "
            "changes make that pull a fork")
    writer = keys.writer_account(bytes(ctx.session_account().key), cfg.space_id)
    if not anchor.can_write(enrolment.owner, writer.address):
        raise ProtocolError(ErrorCode.NOT_CONNECTED,
                            f"this machine's writer {writer.address} may not write for owner "
                            f"{enrolment.owner}", "run `kint connect` again")
    base = {"v": 1, "space": cfg.space_id, "seq": head.seq + 1, "prev": ZERO_DIGEST,
            "snapshot": as_snapshot, "rows_root": ZERO_DIGEST}
    try:
        chunks = ([changes] if as_snapshot else
                  epoch_format.split_rows(changes, max_bytes=epoch_format.epoch_max_bytes(),
                                          base={**base, "rows": []}))
    except epoch_format.RowTooLarge as err:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"{err}; {NOTHING_DROPPED}") from None
    pushed: list[dict[str, Any]] = []
    current: Mirror | None = mirror
    for number, chunk in enumerate(chunks, 1):
        ctx.progress = f"push: epoch {number} of {len(chunks)} ({len(chunk)} rows)"
        current = _push_epoch(ctx, anchor, enrolment.owner, chain.chain_id, key, writer,
                              current, chunk, as_snapshot)
        meta = state.meta(current.head.seq)
        pushed.append({"seq": meta.seq, "block": meta.block, "tx": meta.tx,
                       "rows": len(chunk), "bytes": meta.cost["bytes"] if meta.cost else None,
                       "gas": meta.cost["gas"] if meta.cost else None})
    if ctx.drift.active:
        ctx.drift.reset(export_rows(ctx.ro_connection(), cfg.tenant))
    return {"pushed": sum(p["rows"] for p in pushed), "epochs": pushed,
            "message": f"anchored {sum(p['rows'] for p in pushed)} row change(s) in "
                       f"{len(pushed)} epoch(s), head epoch {current.head.seq} at block "
                       f"{current.head.block}"}


def _push_epoch(ctx: SpaceContext, anchor: Anchor, owner: str, chain_id: int, key: bytes,
                writer: Any, mirror: Mirror | None, rows: list[dict[str, Any]],
                as_snapshot: bool) -> Mirror:
    cfg, state = ctx.config, ctx.state
    seq = (mirror.head.seq if mirror else 0) + 1
    prev = mirror.head.digest if mirror else ZERO_DIGEST
    draft = {"v": 1, "space": cfg.space_id, "seq": seq, "prev": prev,
             "snapshot": as_snapshot, "rows_root": ZERO_DIGEST, "rows": rows}
    draft["rows_root"] = apply_rows(mirror, cfg.space_id, draft).root.hex()
    envelope = epoch_format.seal(draft, data_key=key, chain_id=chain_id, owner=owner)
    digest = keccak(envelope).hex()
    header = epoch_format.Header.decode(envelope[: epoch_format.HEADER_SIZE])
    call = anchor.contract.functions.push(owner, bytes.fromhex(cfg.space_id), seq,
                                          bytes.fromhex(prev), envelope)
    try:
        raw = anchor.build(writer, call)
        ensure_writer_funds(anchor, ctx.session_account(), writer.address,
                            anchor.max_cost(raw), NOTHING_DROPPED)
    except ChainRefused as err:
        raise _refused(err) from None
    pending = {"v": 1, "seq": seq, "prev": prev, "digest": digest, "raw": raw.hex(),
               "bucket": header.bucket, "plaintext": draft, "envelope": envelope.hex(),
               "writer": writer.address}
    atomic_write(state.files["pending"], orjson.dumps(pending))
    try:
        tx = anchor.send_raw(raw)
        receipt = anchor.wait(tx)
    except ChainRefused as err:
        state.files["pending"].unlink(missing_ok=True)
        raise _refused(err) from None
    return _record_landed(ctx, anchor, pending, receipt)


def _refused(err: ChainRefused) -> ProtocolError:
    if err.error in ("BadPrev", "BadSeq"):
        return ProtocolError(ErrorCode.CHAIN_MOVED,
                             f"the chain refused the epoch ({err.error}): another machine "
                             f"pushed first; {NOTHING_DROPPED}", "run `kint pull` first")
    if err.error == "NotAuthorized":
        return ProtocolError(ErrorCode.NOT_CONNECTED,
                             f"the chain refused the epoch: this machine may not write for "
                             f"the owner; {NOTHING_DROPPED}", "run `kint connect` again")
    if err.error == INSUFFICIENT_FUNDS:
        return ProtocolError(ErrorCode.NOT_CONNECTED,
                             f"the chain refused the epoch: this space's writer cannot pay "
                             f"for the gas; {NOTHING_DROPPED}",
                             "send ETH to this machine's session key (`kint status` shows "
                             "it on its `keys:` line), then push again")
    return ProtocolError(ErrorCode.INTERNAL, f"the chain refused the epoch: {err}")


def _record_landed(ctx: SpaceContext, anchor: Anchor, pending: dict[str, Any],
                   receipt: Any) -> Mirror:
    state = ctx.state
    event = anchor.epoch_from_receipt(receipt)
    envelope = bytes.fromhex(pending["envelope"])
    if event is None or event.digest != keccak(envelope).hex() or event.seq != pending["seq"]:
        raise ProtocolError(ErrorCode.INTERNAL,
                            f"epoch {pending['seq']} landed but its Epoch event does not carry "
                            f"the digest of what was sent", "run `kint pull` to re-read it")
    gas = int(receipt["gasUsed"])
    meta = EpochMeta(seq=pending["seq"], digest=event.digest, prev=pending["prev"],
                     block=event.block, tx=event.tx, bucket=pending["bucket"],
                     rows_root=pending["plaintext"]["rows_root"], writer=event.writer,
                     cost={"gas": gas, "bytes": len(envelope),
                           "effective_gas_price": int(receipt.get("effectiveGasPrice", 0))})
    try:
        mirror = record_epoch(state, pending["plaintext"], envelope, meta)
    except EpochRejected as err:
        raise ProtocolError(ErrorCode.INTERNAL, f"could not record epoch: {err}") from None
    state.files["pending"].unlink(missing_ok=True)
    log.info("space %s: epoch %d anchored at block %d (%d bytes, %d gas)",
             ctx.config.space16, meta.seq, meta.block, len(envelope), gas)
    return mirror


def resolve_pending_at_start(ctx: SpaceContext) -> None:
    """A worker that starts with a pending file looks at the head at once (DESIGN §9),
    under the head lock; when the chain cannot be read, the next push or pull does it."""
    if not ctx.state.files["pending"].exists():
        return
    try:
        chain, enrolment = connected(ctx)
        with ctx.head_ops, head_lock(ctx.state.files["head_lock"]):
            resolve_pending(ctx, Anchor(chain, ctx.tracker), enrolment.owner)
    except (ProtocolError, RpcUnavailable, HeadLockBusy) as err:
        log.warning("space %s: an interrupted push is left for the next push or pull: %s",
                    ctx.config.space16, err)


def resolve_pending(ctx: SpaceContext, anchor: Anchor, owner: str) -> None:
    """Finish what a killed push left: its epoch landed (record it), or it did not (re-send
    the same signed transaction, or drop it), or the chain moved past it (CHAIN_MOVED)."""
    path = ctx.state.files["pending"]
    try:
        pending = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return
    except orjson.JSONDecodeError:
        raise ProtocolError(ErrorCode.INTERNAL, f"{path} is corrupt; it was left as it is",
                            "move it aside and run `kint pull`") from None
    head = anchor.head(owner, ctx.config.space_id)
    mirror = ctx.state.mirror()
    if mirror is not None and (mirror.head.seq, mirror.head.digest) == (pending["seq"],
                                                                         pending["digest"]):
        # Killed after the mirror was saved: finish the last two steps.
        from kint.tenant_worker.statefiles import Watermark

        mark = ctx.state.watermark()
        if mark is None or mark.seq < pending["seq"]:
            ctx.state.save_watermark(Watermark(pending["seq"], pending["digest"],
                                               mirror.head.block))
        path.unlink(missing_ok=True)
        log.info("space %s: finished recording epoch %d after an interrupted push",
                 ctx.config.space16, pending["seq"])
        return
    if head.seq == pending["seq"] and head.digest == pending["digest"]:
        log_ = anchor.epoch_log(owner, ctx.config.space_id, head.seq, head.block)
        if log_ is None:
            raise ProtocolError(ErrorCode.RPC_UNAVAILABLE, "the head's Epoch log is missing")
        receipt = anchor.w3.eth.get_transaction_receipt("0x" + log_.tx)
        _record_landed(ctx, anchor, pending, receipt)
        log.info("space %s: a push killed mid-way had landed; recorded epoch %d",
                 ctx.config.space16, head.seq)
        return
    if head.seq == pending["seq"] - 1 and head.digest == pending["prev"]:
        try:
            tx = anchor.send_raw(bytes.fromhex(pending["raw"]))
            receipt = anchor.wait(tx)
        except ChainRefused:
            path.unlink(missing_ok=True)  # its nonce or prev is spent: nothing was anchored
            log.info("space %s: dropped a pending epoch that can no longer land",
                     ctx.config.space16)
            return
        _record_landed(ctx, anchor, pending, receipt)
        log.info("space %s: re-sent and recorded pending epoch %d", ctx.config.space16,
                 pending["seq"])
        return
    raise ProtocolError(ErrorCode.CHAIN_MOVED,
                        f"a push of epoch {pending['seq']} was interrupted and the chain has "
                        f"since moved to seq {head.seq}", "run `kint pull`")
