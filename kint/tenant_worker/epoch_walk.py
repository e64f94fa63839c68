"""The walk of a pull: from the chain's head back through each Epoch event's prevBlock,
one exact-block log query per epoch, fetching each epoch's ciphertext (rebuilt from this
machine's cache when it hashes to the event's digest, else read from the push's calldata)
and opening it with the key its header names, before anything is written (pull.py).

Every check that can stop a pull on one epoch lives here: the head's event against the
head, the calldata against the event, the header, the data key, the GCM tag, and the
plaintext's agreement with chain and header. Prev continuity, a check across epochs, is
read over the whole walk by pull_plan.py, with where the pull resumes. An epoch this
machine cannot open is kept as such (`Fetched.opened` None, with its
reason), for the pull to skip past with a later snapshot or stop at. An epoch that fails
any other check (the RPC would not serve its calldata or served calldata the event does
not vouch for, it opened and contradicts the chain, or its prev does not chain on the
epoch before it) is kept too, with the refusal it would have been (`Fetched.refusal`):
kint v0.3.0 applies the epochs before it and stops there, a gap the next pull retries
(03-new-machine.md, "What every epoch must pass" and "Gaps"), and nobody walks past it,
since nobody has seen what it holds. Continuity is the first of those checks, so an
epoch whose prev breaks is reported as that, whatever else is wrong with it (pull_plan.py
replaces it with the gap).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kint.chain.anchor import Anchor, CalldataRefused, EpochLog, Head, TransactionNotServed
from kint.chain.rpc import RpcUnavailable
from kint.epochs.envelope import Header, Opened, open_epoch, parse_header
from kint.epochs.errors import Disagreement, HeaderError, Malformed, Unopenable
from kint.keccak import keccak
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.cache_check import rebuilt_envelope
from kint.tenant_worker.cold_start import stale
from kint.tenant_worker.data_key import wrapped_for_here
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import EpochMeta, cache_epoch
from kint.tenant_worker.walk_history import (epoch_log_retried, unserved_below_head,
                                             unserved_transaction)

log = logging.getLogger("kint.worker")


@dataclass
class Fetched:
    log: EpochLog
    envelope: bytes
    header: Header | None  # None: the bytes do not parse as a kint header
    opened: Opened | None  # None: this machine cannot open it (`reason` says why)
    reason: str | None = None
    # True when nobody can walk past it (it opened and contradicts itself or the chain, is
    # garbage inside a valid seal, could not be read, or its prev breaks); False for an
    # epoch a later snapshot can supersede.
    final: bool = False
    # Set for a gap that is not merely closed to this machine (the ciphertext could not be
    # read, the epoch contradicts the chain, its prev breaks): the refusal a pull that
    # cannot stop at a gap (one moving the store aside, a backfill) raises instead.
    refusal: ProtocolError | None = None
    # Set when the endpoint said it has no such push transaction (walk_history.py).
    unserved: TransactionNotServed | None = None
    # True for a gap this machine could not read (its calldata not served, or served
    # altered, or its link broken): unlike one it read and can never apply, the chain may
    # hold rows in it nobody here has seen, so no snapshot is anchored over it.
    unread: bool = False
    # True for an epoch whose header parses and names a data key this machine does not hold:
    # one sealed before a rotation, when a later snapshot opens (pull_plan.split_rotated).
    rotated: bool = False
    # True when, besides, the header carries a wrap under one of this machine's key tags
    # (data_key.key_tags_here): the data key moved on elsewhere (a `kint rekey`, a vault two
    # machines started), and connecting again opens it. False for a header none of them
    # opens, such as a leaked session key's bad epoch (06-epochs.md, "An epoch nobody can
    # open"), which no connect opens: the owner's snapshot goes over it instead.
    rekeyed: bool = False

    @property
    def snapshot(self) -> bool:
        return self.opened is not None and self.opened.plaintext.snapshot

    def entry(self, **extra: Any) -> dict[str, Any]:
        return {"seq": self.log.seq, "block": self.log.block, "tx": self.log.tx_hash,
                "reason": self.reason, **extra}


def epoch_meta(f: Fetched) -> EpochMeta:
    assert f.opened is not None
    return EpochMeta(seq=f.log.seq, digest=f.log.digest, prev=f.log.prev, block=f.log.block,
                     tx=f.log.tx_hash, bucket=f.opened.header.bucket,
                     rows_root=f.opened.plaintext.rows_root, writer=f.log.writer)


def fetch_epoch(ctx: SpaceContext, anchor: Anchor, owner: str, ev: EpochLog,
           held: dict[bytes, bytes]) -> Fetched:
    """The epoch's ciphertext (rebuilt from the cache when it hashes to the event's digest,
    else from the push calldata, checked), opened with the key its header names."""
    envelope = rebuilt_envelope(ctx.state, ev.seq, held, owner)
    if envelope is not None and keccak(envelope).hex() != ev.digest:
        envelope = None
    if envelope is None:
        try:
            envelope = anchor.push_calldata(ev.tx_hash, owner, ctx.config.space_id, ev.prev,
                                            ev.digest)
        except TransactionNotServed as err:
            gap = _gap(ev, str(err), stale(f"epoch {ev.seq}: {err}"), unread=True)
            gap.unserved = err
            return gap
        except CalldataRefused as err:
            return _gap(ev, str(err), stale(f"epoch {ev.seq}: {err}"), unread=True)
        except RpcUnavailable as err:
            reason = f"cannot fetch the calldata of epoch {ev.seq}: {err}"
            return _gap(ev, reason, ProtocolError(ErrorCode.RPC_UNAVAILABLE, reason),
                        unread=True)
    try:
        header = parse_header(envelope)
    except HeaderError as err:
        return Fetched(ev, envelope, None, None, f"not a kint epoch ({err})")
    key = held.get(header.dek_id)
    if key is None:
        return Fetched(ev, envelope, header, None,
                       "sealed under a data key this machine does not hold (rotated)",
                       rotated=True, rekeyed=wrapped_for_here(ctx, header.wraps))
    try:
        opened = open_epoch(envelope, dek=key, owner=owner, space=ctx.config.space_id,
                            seq=ev.seq, prev=ev.prev)
    except Unopenable as err:
        return Fetched(ev, envelope, header, None, str(err))
    except Disagreement as err:
        if err.field == "snapshot":
            return Fetched(ev, envelope, header, None, str(err), final=True)
        return _gap(ev, str(err), stale(f"epoch {ev.seq}: {err}"), envelope, header)
    except Malformed as err:
        return Fetched(ev, envelope, header, None, f"its content is not an epoch ({err})",
                       final=True)
    return Fetched(ev, envelope, header, opened)


def _gap(ev: EpochLog, reason: str, refusal: ProtocolError, envelope: bytes = b"",
         header: Header | None = None, *, unread: bool = False) -> Fetched:
    """An epoch that could not be read (`unread`), or opened and contradicts the chain: a
    gap nothing walks past (`final`), and the refusal a pull that cannot stop at one
    raises."""
    return Fetched(ev, envelope, header, None, reason, final=True, refusal=refusal,
                   unread=unread)


def walk(ctx: SpaceContext, anchor: Anchor, owner: str, head: Head, base: int, full: bool,
          held: dict[bytes, bytes]) -> list[Fetched]:
    """Newest first, from the head down to the epoch after `base` (or the newest snapshot
    that opens, unless `full`). An epoch below the head the endpoint will not serve ends
    the walk (walk_history.py): at the oldest snapshot read that opens, or in a refusal."""
    out: list[Fetched] = []
    seq, block, expect = head.seq, head.block, head.digest
    while seq > base:
        ctx.progress = f"pull: checking epoch {seq} (walking back from {head.seq})"
        try:
            ev = epoch_log_retried(anchor, owner, ctx.config.space_id, seq, block)
        except RpcUnavailable as err:
            if seq == head.seq:
                raise
            return _stopped(out, seq, block, head, f"{err}")
        if ev is None and seq < head.seq:
            return _stopped(out, seq, block, head, "the endpoint has no Epoch event at that "
                                                   "block, though the epoch above names it")
        if ev is None:
            raise stale(f"no Epoch event for seq {seq} at block {block}; the RPC may be "
                        f"pruned or lying")
        if ev.digest != expect and seq == head.seq:
            raise stale(f"epoch {seq}: its event digest is not the head's ({expect[:12]})")
        # Below the head, an event whose digest is not the one the epoch above chains on is
        # a break in prev continuity: the walk goes on through it, and pull_plan makes the
        # epoch above it the gap, after the epochs below are applied (v0.3.0).
        f = fetch_epoch(ctx, anchor, owner, ev, held)
        if f.unserved is not None and base == 0:  # a restore from nothing
            raise unserved_transaction(seq, block, f.unserved)
        out.append(f)
        if f.snapshot and not full:
            if seq > base + 1:  # v0.3.0's log line (03-new-machine.md, "Snapshots and --full")
                log.info("pull: starting at snapshot epoch %d; the epochs before it are not "
                         "needed to restore (`kint pull --full` walks them for the older "
                         "versions)", seq)
            break
        if f.opened is None and f.header is not None and f.header.snapshot and not full:
            log.warning("pull: epoch %d claims to be a snapshot but cannot be applied; walking "
                        "the full history instead", seq)
        seq, block, expect = seq - 1, ev.prev_block, ev.prev
    return out


def _stopped(out: list[Fetched], seq: int, block: int, head: Head,
             why: str) -> list[Fetched]:
    """The walk, ended at epoch `seq` the endpoint would not serve: what it read down to
    the oldest snapshot that opened (the pull starts there and is whole), or, without one,
    the refusal (walk_history.py)."""
    starts = [i for i, f in enumerate(out) if f.snapshot]
    if not starts:
        raise unserved_below_head(seq, block, head, why, len(out))
    log.warning("pull: epoch %d at block %d cannot be read (%s); the pull starts at snapshot "
                "epoch %d, and the epochs below it are left for a later `kint pull --full`",
                seq, block, why, out[starts[-1]].log.seq)
    return out[:starts[-1] + 1]


def backfill(ctx: SpaceContext, anchor: Anchor, owner: str, head: Head,
              held: dict[bytes, bytes], reported: frozenset[int] = frozenset()
              ) -> tuple[list[int], list[dict[str, Any]], dict[str, Any] | None]:
    """`--full`: walk from the head to epoch 1 and cache, for history, every epoch this
    machine has not decrypted (those a snapshot let an earlier pull skip). Returns the seqs
    cached, the epochs it could not open (CLOSED, and the walk carries on past them, as
    v0.3.0's: 03-new-machine.md, "Snapshots and --full"), and where it stopped short of
    epoch 1, if it did: an epoch whose event or calldata could not be read, or whose link
    breaks, is one nobody has seen, so the walk cannot pass it. It runs after the pull
    applied its epochs, so that is no refusal of the pull (whose store is restored): the
    pull reports it and the next `pull --full` tries again from the head. The epochs in
    `reported` (the pull's own walk found them closed and said so) are not fetched again,
    so no epoch is reported twice by one pull."""
    cached = set(ctx.state.cached_seqs()) | set(reported)
    added: list[int] = []
    closed: list[dict[str, Any]] = []
    seq, block, expect = head.seq, head.block, head.digest
    while seq >= 1:
        try:
            ev = anchor.epoch_log(owner, ctx.config.space_id, seq, block)
        except RpcUnavailable as err:
            return sorted(added), closed, {"seq": seq, "block": block,
                                           "reason": f"cannot read its Epoch event: {err}"}
        if ev is None or ev.digest != expect:
            return sorted(added), closed, {
                "seq": seq, "block": block,
                "reason": ("no Epoch event at its block" if ev is None else
                           f"its event digest is not the prev of epoch {seq + 1} "
                           f"({expect[:12]})")}
        if seq not in cached:
            f = fetch_epoch(ctx, anchor, owner, ev, held)
            if f.refusal is not None:  # not an epoch that stays closed: tried again later
                return sorted(added), closed, f.entry()
            if f.opened is not None:
                cache_epoch(ctx.state, f.opened.payload, f.envelope, epoch_meta(f))
                added.append(seq)
            else:
                closed.append(f.entry())
        seq, block, expect = seq - 1, ev.prev_block, ev.prev
    return sorted(added), closed, None
