"""The pending-epoch journal (docs/faults.md, its first rows): `pending-<space16>.json`,
written before a push sends its signed transaction, so a push killed at any step is settled
from the chain head later instead of reading as a fork.

It holds the epoch (seq, prev, digest, the sealed envelope and its plaintext bytes) and the
signed transaction with its nonce. `resolve_pending` compares it with the head: landed
(record it), not landed and still next (re-send the same signed transaction), or passed
by the chain (overtaken.py: landed below the head and recorded, or never to land and
dropped; either way a pull goes on from there).

The journal is settled with the key that signed it (its `sender`): after a `kint
session-key rotate` that is no longer the machine's key, and its nonce, its receipt and
any replacement are that key's (former_key.py).

A journal whose key may no longer write for the owner (revoked, or expired: `canWrite`)
is never sent again, since the chain would revert it at the key's cost: dropped once its
transaction cannot land from here (its nonce given back, or its transaction replaced at
the endpoint), and kept, refused as kept, while it may (`_settle_unauthorized`); one
whose transaction, sent before the key lost its rights, was mined and reverted is dropped
as any spent nonce's and said the same way (`_spent_unauthorized`). A re-send
whose endpoint fails, its receipt wait run out included, keeps the journal and says so in
a push's own words, "not sent again" where a push says "never sent" (`_send_again`). The
exit push's settlement waits for that receipt only until the exit push's bound (`until`):
cut there, it keeps the journal for the next push or pull (SettleCut), where the wait ran
its own 60 s on past the bound, after the supervisor had answered the exit push TIMEOUT.

A head read that shows the chain still at the journal's prev can be older than the block
that mined the journal's own transaction. A spent nonce or a refused re-send after such a
read is therefore never taken alone as "it did not land": the chain is read again, nonce
before head, and the Epoch event at the journal's seq decides (`_settle_spent`).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from web3.exceptions import TransactionNotFound

from kint.chain.anchor import Anchor, Head
from kint.chain.calls import ChainRefused, bounded
from kint.chain.rpc import RpcUnavailable, WaitCut
from kint.chain.units import receipt_cost
from kint.epochs.plaintext import parse_plaintext
from kint.keccak import keccak
from kint.paths import remove_file
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.epoch_send import RESEND_WORDS, endpoint_failed
from kint.tenant_worker.former_key import FormerKey, signer_of
from kint.tenant_worker.dropped_nonce import release_nonce, signed_by
from kint.protocol.errors import UNSETTLED_HINT
from kint.protocol.hints import REREAD_HINT, STALE_JOURNAL_HINT
from kint.tenant_worker.overtaken import UNSETTLED, Overtaken, epoch_at
from kint.tenant_worker.pending_journal import PendingEpoch
from kint.tenant_worker.unauthorized_journal import Unauthorized
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import (
    EpochMeta,
    EpochRejected,
    Mirror,
    Watermark,
    record_epoch,
)

log = logging.getLogger("kint.worker")


class SettleCut(WaitCut):
    """The re-send's receipt wait of the journal of epoch `seq`, cut at the exit push's
    bound (`until`): sent again, it may still land, and the journal is kept for the next
    push or pull to settle; the exit push says it stopped there (push.py)."""

    def __init__(self, seq: int, words: str) -> None:
        super().__init__(words)
        self.seq = seq


def record_landed(ctx: SpaceContext, anchor: Anchor, pending: PendingEpoch,
                  receipt: Any) -> Mirror:
    """The epoch landed: check the event against what was sent, record it, drop the file."""
    state = ctx.state
    event = anchor.epoch_from_receipt(receipt)
    if event is None or event.digest != pending.digest or event.seq != pending.seq:
        raise ProtocolError(ErrorCode.INTERNAL,
                            f"epoch {pending.seq} landed but the Epoch event digest does not "
                            f"match what was sent", REREAD_HINT)
    cost = receipt_cost(receipt)
    gas = cost["gas"]
    plaintext = parse_plaintext(pending.plaintext)
    meta = EpochMeta(seq=pending.seq, digest=event.digest, prev=pending.prev,
                     block=event.block, tx=event.tx_hash, bucket=pending.bucket,
                     rows_root=plaintext.rows_root, writer=event.writer,
                     cost={"gas": gas, "bytes": len(pending.envelope),
                           "effective_gas_price": cost["effective_gas_price"],
                           "l1_fee": cost["l1_fee"], "cost_wei": cost["cost_wei"]})
    try:
        mirror = record_epoch(state, pending.plaintext, plaintext, pending.envelope, meta)
    except EpochRejected as err:
        raise ProtocolError(ErrorCode.INTERNAL, f"could not record epoch: {err}") from None
    remove_file(state.files["pending"])
    log.info("space %s: epoch %d anchored at block %d (%d bytes, %d gas)",
             ctx.config.space16, meta.seq, meta.block, len(pending.envelope), gas)
    return mirror


def resolve_pending(ctx: SpaceContext, anchor: Anchor, sender: Any, owner: str,
                    until: float | None = None) -> Overtaken | Unauthorized | None:
    """Finish what a killed push left: its epoch landed (record it), or it did not (re-send
    the same signed transaction, or drop it), or the chain moved past it (`_overtaken`).
    Returns what that last case found, or a journal dropped because its key may not write
    (unsent, `_settle_unauthorized`, or its nonce spent, `_spent_unauthorized`), for a push
    or pull to say; None otherwise. `sender` is the
    machine's; the journal's own key settles it (`signer_of`). `until` (time.monotonic(),
    the exit push's bound; None for every other caller): the re-send's receipt wait ends
    there, SettleCut (`_send_again`)."""
    path = ctx.state.files["pending"]
    pending = PendingEpoch.load(path)
    if pending is None:
        return None
    sender = signer_of(sender, pending.sender, ctx.config.home)
    space16 = ctx.config.space16
    mirror = ctx.state.mirror()
    if mirror is not None and (mirror.head.seq, mirror.head.digest) == (pending.seq,
                                                                         pending.digest):
        # Killed after the mirror was saved: finish the last two steps.
        mark = ctx.state.watermark()
        if mark is None or mark.seq < pending.seq:
            ctx.state.save_watermark(Watermark(pending.seq, pending.digest, mirror.head.block))
        remove_file(path)
        log.info("space %s: finished recording epoch %d after an interrupted push", space16,
                 pending.seq)
        return None
    head = anchor.head(owner, ctx.config.space_id)
    if head.seq == pending.seq and head.digest == pending.digest:
        _record_head(ctx, anchor, pending, head, owner)
        return None
    if head.seq == pending.seq - 1 and head.digest == pending.prev:
        if sender.mined_count() <= pending.nonce:
            if not anchor.can_write(owner, pending.sender):
                return _settle_unauthorized(ctx, anchor, sender, pending, owner)
            return _send_again(ctx, anchor, sender, pending, owner, until)
        return _settle_spent(ctx, anchor, sender, pending, owner, None)
    if head.seq < pending.seq:
        raise _stale_head(head, pending)
    return _overtaken(ctx, anchor, pending, head, owner, sender)


def _send_again(ctx: SpaceContext, anchor: Anchor, sender: Any, pending: PendingEpoch,
                owner: str, until: float | None = None) -> Overtaken | Unauthorized | None:
    """The journal's transaction, not landed and still next, sent again as it was signed
    and its receipt waited for. A refusal is settled from the chain read again
    (`_settle_spent`); an endpoint that fails the send or the wait keeps the journal and
    says so in the words of a push's own send (epoch_send.RESEND_WORDS), but for a send that
    made no connection: not sent again, where a send of it before may have reached the
    endpoint. The transaction may still land, and the next settlement finds it. Escaping as
    the endpoint's bare words, a wait that ran out read as an endpoint that did not answer.
    A wait cut at `until` (the exit push's bound: AnchorWrites.wait) keeps the journal too,
    raised SettleCut for the exit push to say where it stopped; taken for an endpoint that
    failed, it would be refused RPC_UNAVAILABLE, as if the bound were the endpoint's.
    """
    from kint.tenant_worker.session_sender import Signed

    if isinstance(sender, FormerKey):
        sender.check_hole(pending.nonce)
    sent = False
    try:
        tx = anchor.send_raw(pending.raw_tx)
        sent = True
        receipt = sender.wait(tx, Signed(pending.nonce, pending.raw_tx), until=until)
    except WaitCut as err:
        raise SettleCut(pending.seq, str(err)) from None
    except ChainRefused as err:
        return _settle_spent(ctx, anchor, sender, pending, owner, err)
    except RpcUnavailable as err:
        raise endpoint_failed(err, sent, pending.seq, RESEND_WORDS) from None
    record_landed(ctx, anchor, pending, receipt)
    log.info("space %s: re-sent and recorded pending epoch %d", ctx.config.space16,
             pending.seq)
    return None


def _settle_unauthorized(ctx: SpaceContext, anchor: Anchor, sender: Any,
                         pending: PendingEpoch, owner: str) -> Overtaken | Unauthorized | None:
    """The key that signed the journal may not write for the owner now (revoked, or its
    authorization expired: `canWrite`), and the journal's transaction is not on the chain:
    sent again, it would revert NotAuthorized and spend the key's gas for nothing. It is not
    sent. The nonce is read again after the rights (spent meanwhile, the chain decides as
    for any spent nonce: `_settle_spent`). Unspent, the journal is dropped only once its
    transaction can no longer land (dropped_nonce.py: its nonce given back, or its
    transaction replaced at the endpoint), and the settlement returns that (Unauthorized: a
    push refuses with it, naming the key and what to do; the rows it carried are still in
    the store). Its transaction still in the book or at the endpoint keeps the journal,
    refused saying so (RPC_UNAVAILABLE when the endpoint failed to say whether it holds it,
    NOT_CONNECTED, the key's, when it answered): once the owner authorizes the key again,
    the next push would re-broadcast it from the book (nonces.unstick) and it would land, an
    epoch of this machine with no journal to record it; the next settlement sends it and
    records it."""
    try:
        spent = sender.mined_count() > pending.nonce
    except RpcUnavailable as err:
        raise ProtocolError(ErrorCode.RPC_UNAVAILABLE,
                            f"the chain could not be read again once the key that signed "
                            f"the interrupted push of epoch {pending.seq} was found not "
                            f"authorized ({err}); {UNSETTLED}", UNSETTLED_HINT) from None
    if spent:
        return _settle_spent(ctx, anchor, sender, pending, owner, None)
    release = release_nonce(ctx, anchor, sender, pending)
    if release.spent:  # mined since the read above: perhaps the journal's own, landed
        return _settle_spent(ctx, anchor, sender, pending, owner, None)
    rotated = isinstance(sender, FormerKey)
    found = Unauthorized(pending.seq, pending.sender, owner, rotated, release.waiting)
    # A previous session key's transaction goes whatever became of it: the book no longer
    # holds that key's nonces (nothing here re-broadcasts it), and the next push, signed by
    # the current key on the same prev, takes the seq first, so it can only revert.
    if release.may_land is not None and not rotated:
        found = replace(found, waiting=None, kept=release.may_land, unread=release.unread)
    else:
        remove_file(ctx.state.files["pending"])
    log.warning("space %s: %s", ctx.config.space16, found.describe())
    if found.kept is not None:
        raise found.refusal()
    return found


def _record_head(ctx: SpaceContext, anchor: Anchor, pending: PendingEpoch, head: Head,
                 owner: str) -> None:
    """The head is the journal's epoch: record it from the head's Epoch event."""
    event = anchor.epoch_log(owner, ctx.config.space_id, head.seq, head.block)
    if event is None:
        raise ProtocolError(ErrorCode.RPC_UNAVAILABLE, "the head's Epoch log is missing")
    _record_from_event(ctx, anchor, pending, event)
    log.info("space %s: a push killed mid-way had landed; recorded epoch %d",
             ctx.config.space16, head.seq)


def _settle_spent(ctx: SpaceContext, anchor: Anchor, sender: Any, pending: PendingEpoch,
                  owner: str, refused: ChainRefused | None) -> Overtaken | Unauthorized | None:
    """The head read said the chain was still at the journal's prev, yet the journal's
    nonce turned out spent or its re-send was refused. Both happen when the journal's own
    transaction was mined just after that head read, so neither means "it never landed".
    The nonce is read first and the head after it: a head still at prev once the nonce is
    known spent means whatever spent it was not this epoch (a filler, or a re-send that
    reverted), and only then is the journal dropped. A head that moved is settled from the
    Epoch event at the journal's seq (landed: recorded; another epoch: dropped); a chain
    that cannot be read keeps the journal (RPC_UNAVAILABLE). A journal dropped so whose key
    may not write for the owner now (revoked or expired: its own transaction, sent before,
    reverted when mined) is returned as `_settle_unauthorized`'s is (`_spent_unauthorized`),
    so the push or pull says it once, as it does when the journal was not sent; it went
    with one line in the log before."""
    try:
        spent = sender.mined_count() > pending.nonce
        head = anchor.head(owner, ctx.config.space_id)
    except RpcUnavailable as err:
        raise ProtocolError(ErrorCode.RPC_UNAVAILABLE,
                            f"the chain could not be read again after the interrupted push "
                            f"of epoch {pending.seq} {_why(refused)} ({err}); {UNSETTLED}",
                            UNSETTLED_HINT) from None
    if head.seq == pending.seq and head.digest == pending.digest:
        _record_head(ctx, anchor, pending, head, owner)
        return None
    if head.seq >= pending.seq:
        return _overtaken(ctx, anchor, pending, head, owner, sender)
    if head.seq != pending.seq - 1 or head.digest != pending.prev:
        raise _stale_head(head, pending)
    if not spent:
        # Refused before it spent the nonce (too little ETH, say), or a nonce the endpoint
        # named spent and then not: the transaction may still land, so the journal stays.
        raise ProtocolError(ErrorCode.RPC_UNAVAILABLE,
                            f"the interrupted push of epoch {pending.seq}{signed_by(sender)} "
                            f"is not on the chain and its nonce is not spent {_why(refused)}; "
                            f"{UNSETTLED}", f"fund {pending.sender} if the refusal says so; "
                            + UNSETTLED_HINT)
    remove_file(ctx.state.files["pending"])
    log.info("space %s: dropped pending epoch %d %s: another transaction spent its nonce "
             "and the chain is still at its prev", ctx.config.space16, pending.seq,
             _why(refused))
    return _spent_unauthorized(ctx, anchor, sender, pending, owner)


def _spent_unauthorized(ctx: SpaceContext, anchor: Anchor, sender: Any,
                        pending: PendingEpoch, owner: str) -> Unauthorized | None:
    """What a journal dropped for its spent nonce tells when its key may not write for the
    owner now: Unauthorized (`spent`), else None. The journal is gone already, so an
    endpoint that cannot answer the rights leaves it said in the log alone."""
    try:
        if anchor.can_write(owner, pending.sender):
            return None
    except RpcUnavailable as err:
        log.warning("space %s: whether the key of the dropped epoch %d may write could not "
                    "be read (%s)", ctx.config.space16, pending.seq, err)
        return None
    found = Unauthorized(pending.seq, pending.sender, owner, isinstance(sender, FormerKey),
                         spent=True)
    log.warning("space %s: %s", ctx.config.space16, found.describe())
    return found


def _why(refused: ChainRefused | None) -> str:
    return (f"(its re-send was refused: {refused})" if refused is not None
            else "(its nonce was spent)")


def _stale_head(head: Head, pending: PendingEpoch) -> ProtocolError:
    """Below the journal's own prev, or another digest at it: what this machine saw
    anchored before it pushed is not on this endpoint's chain."""
    return ProtocolError(ErrorCode.STALE_RPC,
                         f"the endpoint's head (seq {head.seq}, {head.digest[:12]}) is not "
                         f"the seq {pending.seq - 1} an interrupted push of epoch "
                         f"{pending.seq} was built on: a stale or lying RPC; the journal is "
                         f"kept", STALE_JOURNAL_HINT)


def _overtaken(ctx: SpaceContext, anchor: Anchor, pending: PendingEpoch, head: Head,
               owner: str, sender: Any) -> Overtaken:
    """The chain holds an epoch at the journal's seq and is not at it with our digest
    (overtaken.py): the event of that seq says whose it is. A journal dropped gives its
    nonce back when its transaction never left this machine (dropped_nonce.py): whatever
    that finds, a transaction built on a prev the head has passed cannot land."""
    event = epoch_at(anchor, owner, ctx.config.space_id, head, pending.seq)
    found = Overtaken(seq=pending.seq, head_seq=head.seq,
                      landed=event.digest == pending.digest)
    if found.landed:
        _record_from_event(ctx, anchor, pending, event)
        log.warning("space %s: %s", ctx.config.space16, found.describe())
        return found
    remove_file(ctx.state.files["pending"])
    found = replace(found, waiting=release_nonce(ctx, anchor, sender, pending).waiting)
    log.warning("space %s: %s (epoch %d there has digest %s, this machine's had %s)",
                ctx.config.space16, found.describe(), pending.seq, event.digest[:12],
                pending.digest[:12])
    return found


def _record_from_event(ctx: SpaceContext, anchor: Anchor, pending: PendingEpoch,
                       event: Any) -> None:
    """Record the journal's epoch from the chain's Epoch event of it: the event must be the
    journal's own transaction (its hash is the signed bytes' keccak) on the journal's prev,
    and its receipt carries the digest sent (`record_landed`)."""
    sent = keccak(pending.raw_tx).hex()
    if event.tx_hash != sent or event.prev != pending.prev:
        raise ProtocolError(ErrorCode.STALE_RPC,
                            f"the Epoch event of seq {pending.seq} carries this machine's "
                            f"digest but names transaction {event.tx_hash[:12]} on prev "
                            f"{event.prev[:12]}, not the {sent[:12]} on {pending.prev[:12]} "
                            f"that was sent; the journal is kept",
                            STALE_JOURNAL_HINT)
    def fetch() -> Any:
        try:
            return anchor.w3.eth.get_transaction_receipt("0x" + event.tx_hash)
        except TransactionNotFound:  # an answer (no receipt served), not a failure
            return None

    receipt = bounded(fetch, "reading the landed push's receipt")
    if receipt is None:
        raise ProtocolError(ErrorCode.RPC_UNAVAILABLE,
                            f"the receipt of transaction {event.tx_hash[:12]}, epoch "
                            f"{pending.seq} of this machine, is not served; the journal is "
                            f"kept", STALE_JOURNAL_HINT)
    record_landed(ctx, anchor, pending, receipt)
