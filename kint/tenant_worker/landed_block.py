"""Where an epoch this machine holds really landed: its block and transaction, kept in step
with the chain when they move without its seq or digest moving.

A chain that drops a block may put the block's transactions back in a later one (a node
that reorganised keeps them in its mempool). The epoch is then the same (seq, digest,
prev), so nothing refuses, but this machine's records name the dropped block: the epoch
cache's metadata (what `kint history` bounds `--block` by), the mirror's head and the
watermark when the epoch is theirs. The worker learns the real block when it reads the
head (the head's block, read by pull and push) and when an Epoch event names the block of
the one before it (its prevBlock: the oldest epoch a pull walked names the block of the
newest one this machine held, which another machine's newer epochs may have buried under
the head; `push --reanchor`'s re-sent epochs name theirs; and each epoch recorded anew
names the block of the one below it, so epochs put back together are recorded together).
Each is checked before it is taken: the Epoch event of that seq must be in that block with
the digest this machine recorded, so an endpoint can only move an epoch where the chain
holds it.

Why a failed check changes nothing and is not raised: the correction is a refinement of
records that are right in seq and digest; the pull or push that asked for it does not
depend on it. An endpoint that cannot answer the Epoch event read (a timeout, an error
object, a refused eth_getLogs) costs one log line, and the next pull or push asks again.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import orjson

from kint.chain.anchor import Anchor, EpochLog, Head
from kint.chain.rpc import RpcUnavailable
from kint.paths import atomic_write
from kint.tenant_worker.epoch_cache import META_SUFFIX, EpochMeta
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import CorruptStateFile, SpaceState, Watermark

log = logging.getLogger("kint.worker")


def cache_epoch_meta(state: SpaceState, meta: EpochMeta) -> None:
    """Rewrite one cached epoch's metadata; its gzip member and clear header do not
    change."""
    atomic_write(state.epoch_path(meta.seq, META_SUFFIX), orjson.dumps(meta.to_json()))


def record_landing(ctx: SpaceContext, meta: EpochMeta) -> None:
    """`meta` (an epoch this machine holds, at a new block and transaction) in the epoch
    cache, and in the mirror's head and the watermark when the epoch is theirs (their seq
    and digest do not change)."""
    state = ctx.state
    cache_epoch_meta(state, meta)
    mirror = state.mirror()
    if mirror is not None and (mirror.head.seq, mirror.head.digest) == (meta.seq, meta.digest):
        mirror.head = replace(mirror.head, block=meta.block, tx=meta.tx)
        state.save_mirror(mirror)
    mark = state.watermark()
    if mark is not None and (mark.seq, mark.digest) == (meta.seq, meta.digest):
        state.save_watermark(Watermark(meta.seq, meta.digest, meta.block))


def settle_head_block(ctx: SpaceContext, anchor: Anchor, owner: str, head: Head) -> bool:
    """The chain's head is this machine's newest epoch (same seq and digest): record the
    block the head names when it is not the one recorded. True when it moved."""
    mirror = ctx.state.mirror()
    if mirror is None or (mirror.head.seq, mirror.head.digest) != (head.seq, head.digest):
        return False
    return settle_block(ctx, anchor, owner, head.seq, head.block)


def settle_block(ctx: SpaceContext, anchor: Anchor, owner: str, seq: int,
                 block: int) -> bool:
    """Epoch `seq`, which this machine holds, is in `block` by the chain's word: record it
    there, with the transaction and writer its Epoch event names, when the cache says
    another block and the event is there with the recorded digest; then the epoch below
    it likewise, at the block that event names as its prevBlock, and so on down while
    each one moved (a reorganisation that dropped several blocks put back several
    epochs; one found where it was recorded was recorded after the reorganisation, as was
    everything under it that this machine saw move). True when `seq` moved; an epoch not
    cached, an event not found, or an endpoint that fails the read changes nothing and
    ends the walk down."""
    moved = False
    while True:
        event = _settle_one(ctx, anchor, owner, seq, block)
        if event is None:
            return moved
        moved = True
        seq, block = seq - 1, event.prev_block


def _settle_one(ctx: SpaceContext, anchor: Anchor, owner: str, seq: int,
                block: int) -> EpochLog | None:
    """`settle_block` for one epoch: its Epoch event, when its record moved; else None."""
    if not block or seq < 1:
        return None
    state = ctx.state
    try:
        meta = state.meta(seq)
    except CorruptStateFile:
        return None
    if meta.block == block:
        return None
    try:
        event = anchor.epoch_log(owner, ctx.config.space_id, seq, block)
    except RpcUnavailable as err:
        log.warning("space %s: epoch %d not checked at block %d (recorded at %d): %s; the next "
                 "pull or push tries again", ctx.config.space16, seq, block, meta.block, err)
        return None
    if event is None or event.digest != meta.digest:
        return None
    record_landing(ctx, replace(meta, block=event.block, tx=event.tx_hash,
                                writer=event.writer))
    log.warning("space %s: epoch %d is in block %d (tx %s), not in block %d as recorded: "
                "the chain put it back in a later block after dropping the first; recorded "
                "where it is", ctx.config.space16, seq, event.block, event.tx_hash[:12],
                meta.block)
    return event
