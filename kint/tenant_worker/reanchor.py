"""`kint push --reanchor`: put back on the chain the epochs a reorganisation dropped.

A chain that loses the block carrying an epoch loses the epoch with it: the contract's head
falls back to the seq before, while this machine's mirror, watermark and epoch cache still
hold the epoch, and every push and pull refuses STALE_RPC over the difference
(behind_head.py). Nothing on this machine is wrong, and waiting mends nothing once the
dropped transaction is gone, so the way out is to send the same epochs again.

What goes back is the epoch itself, byte for byte: its ciphertext is rebuilt from the cached
clear header and gzip member with the data key (cache_check.rebuilt_envelope), must hash to
the digest this machine recorded, and is pushed on the same prev. So each lands with the
seq and digest this machine (and any machine that pulled it) already holds, and only its
block and transaction change; nothing is sealed anew and no row is read from the store.

Why a flag and not every push: whether the chain lost an epoch is one endpoint's word (its
head older than the epoch, its block number at or past the epoch's block), and a re-send
spends an epoch's gas. The refusal asks for a second endpoint's word first and names this
flag; it is a command-line flag only, as `--over-skipped` is, never a tool argument.

What is checked before anything is signed: the endpoint is at or past the block of this
machine's newest epoch (a lagging endpoint is not a reorganisation); the dropped epochs
rebuild from the cache and chain on the endpoint's head; and the endpoint knows none of
their transactions (one it holds waiting, or in a block, lands or has landed by itself).
No journal file is written: a re-anchoring cut short is finished by running it again,
which sends each epoch at most once (tests/test_reanchor_resume.py). An epoch that landed
moved the head past it, so it is not sent again, and its record is put right from the
next epoch's prevBlock if the run died before recording it (landed_block.py); one whose
transaction is still waiting at the endpoint is named as such (its hash is recorded in
the cached metadata before it is sent); one signed and never sent is sent as it was signed,
from the nonce book, not signed again at another nonce.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from web3.exceptions import TransactionNotFound

from kint.chain.anchor import Anchor, Head
from kint.chain.calls import bounded
from kint.chain.config import ChainConfig
from kint.chain.endpoint_source import other_endpoint
from kint.chain.units import receipt_cost
from kint.custody.data_key import dek_id
from kint.keccak import keccak
from kint.outcomes import NOTHING_DROPPED
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import REREAD_HINT
from kint.tenant_worker.behind_head import reorganised_at
from kint.tenant_worker.cache_check import rebuilt_envelope
from kint.tenant_worker.epoch_cache import EpochMeta
from kint.tenant_worker.epoch_send import SendWords, send_epoch, sign_epoch
from kint.tenant_worker.landed_block import (cache_epoch_meta, record_landing,
                                             settle_block, settle_head_block)
from kint.tenant_worker.session_sender import SessionSender
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import CorruptStateFile, Mirror

log = logging.getLogger("kint.worker")

REANCHOR_UNUSED = ("kint: --reanchor not used: the chain holds every epoch this machine "
                   "saw anchored")
SENT_AGAIN = ("epoch {seq} was sent again and may still land: `kint push --reanchor` "
              "again names it while it waits, and goes on once it has landed")
NEVER_SENT_AGAIN = ("epoch {seq} was signed to be sent again but never sent (no connection "
                    "to the endpoint was made): `kint push --reanchor` again sends that "
                    "same transaction")
REANCHOR_WORDS = SendWords(spent=SENT_AGAIN, never_sent=NEVER_SENT_AGAIN, may_land=SENT_AGAIN)


def reanchor(ctx: SpaceContext, anchor: Anchor, sender: SessionSender | None, owner: str,
             key: bytes, head: Head, mirror: Mirror | None,
             dry_run: bool = False) -> list[dict[str, Any]]:
    """Send again, in order, the epochs above `head` that this machine holds (a
    reorganisation dropped them), or refuse saying why they cannot be. Returns one line per
    epoch (what `push` reports of an epoch), none when the chain lost nothing; with
    `dry_run`, the epochs that would be sent, nothing sent (and no `sender`, the session
    key a dry run does not load)."""
    if mirror is None or head.seq >= mirror.head.seq:
        if not dry_run:
            settle_head_block(ctx, anchor, owner, head)
        return []
    at = reorganised_at(anchor, mirror.head.block)
    if at is None:
        raise ProtocolError(
            ErrorCode.STALE_RPC,
            f"the endpoint's head (seq {head.seq}) is older than the seq {mirror.head.seq} "
            f"this machine saw anchored at block {mirror.head.block}, and the endpoint is "
            f"behind that block too: a lagging endpoint, not a reorganisation, so "
            f"--reanchor sent nothing; {NOTHING_DROPPED}")
    lost = _dropped(ctx, anchor.config, owner, key, head, mirror)
    for meta, _ in lost:
        _not_known(anchor, meta)
    if dry_run:
        return [_line(meta, envelope) for meta, envelope in lost]
    log.warning("space %s: the endpoint (at block %d) holds the head at seq %d, below the "
                "seq %d this machine anchored at block %d: re-anchoring epoch(s) %s",
                ctx.config.space16, at, head.seq, mirror.head.seq, mirror.head.block,
                [meta.seq for meta, _ in lost])
    assert sender is not None  # only a dry run comes without one
    return [_send_again(ctx, anchor, sender, owner, meta, envelope) for meta, envelope in lost]


def _dropped(ctx: SpaceContext, chain: ChainConfig, owner: str, key: bytes, head: Head,
             mirror: Mirror) -> list[tuple[EpochMeta, bytes]]:
    """The epochs from head.seq + 1 to the mirror's head, each rebuilt from the cache and
    checked: it hashes to its recorded digest, and it chains on the one before, the first
    on the endpoint's head, the last being the mirror's head. `chain` is the space's, whose
    endpoints in force a refusal names where it asks for another's word."""
    state = ctx.state
    keys = {dek_id(key): key}
    out: list[tuple[EpochMeta, bytes]] = []
    prev = head.digest
    for seq in range(head.seq + 1, mirror.head.seq + 1):
        try:
            meta = state.meta(seq)
        except CorruptStateFile as err:
            raise _cannot(seq, f"its cached metadata cannot be used ({err})") from None
        if meta.prev != prev:
            raise ProtocolError(
                ErrorCode.STALE_RPC,
                f"epoch {seq} that this machine holds chains on {meta.prev[:12]}, not on "
                f"the {prev[:12]} the endpoint holds at seq {seq - 1}: the chain below "
                f"the dropped epochs is not the one this machine saw, so --reanchor sent "
                f"nothing; {NOTHING_DROPPED}",
                f"ask another endpoint for the head ({other_endpoint(chain)}) before "
                f"anything else")
        envelope = rebuilt_envelope(state, seq, keys, owner)
        if envelope is None or keccak(envelope).hex() != meta.digest:
            raise _cannot(seq, "its ciphertext does not rebuild from this machine's epoch "
                               "cache with the data key held here")
        out.append((meta, envelope))
        prev = meta.digest
    if prev != mirror.head.digest:
        raise _cannot(mirror.head.seq, "the epoch cache does not end at the mirror's head")
    return out


def _cannot(seq: int, why: str) -> ProtocolError:
    return ProtocolError(ErrorCode.CORRUPT_STATE,
                         f"epoch {seq} cannot be sent again: {why}; --reanchor sent "
                         f"nothing; {NOTHING_DROPPED}",
                         "`kint pull --full` on a machine that holds the epochs caches them "
                         "again; re-anchor from there")


def _not_known(anchor: Anchor, meta: EpochMeta) -> None:
    """Refuse when the endpoint still knows the epoch's last transaction: waiting to be
    mined (a chain that dropped a block may put its transactions back), it lands by
    itself; in a block, the head read contradicts it."""
    sent = "0x" + meta.tx.removeprefix("0x")

    def lookup() -> Any:
        try:
            return anchor.w3.eth.get_transaction(sent)
        except TransactionNotFound:  # an answer: the endpoint has no such transaction
            return None

    found = bounded(lookup, f"looking up epoch {meta.seq}'s transaction")
    if found is None:
        return
    if found.get("blockNumber") is None:
        raise ProtocolError(
            ErrorCode.STALE_RPC,
            f"epoch {meta.seq}'s transaction {sent[:14]} is waiting at the endpoint to be "
            f"mined again, so it lands by itself; --reanchor sent nothing; {NOTHING_DROPPED}",
            "run `kint push` once it has landed (`kint status` shows the head)")
    raise ProtocolError(
        ErrorCode.STALE_RPC,
        f"epoch {meta.seq}'s transaction {sent[:14]} is in block {found['blockNumber']} "
        f"at the endpoint, yet its head is below seq {meta.seq}: the endpoint contradicts "
        f"itself; --reanchor sent nothing; {NOTHING_DROPPED}",
        f"ask another endpoint ({other_endpoint(anchor.config)})")


def _send_again(ctx: SpaceContext, anchor: Anchor, sender: SessionSender, owner: str,
                meta: EpochMeta, envelope: bytes) -> dict[str, Any]:
    """Push `envelope` again on its own prev, and record where it landed: the cached
    metadata's block, transaction and writer, the mirror's head and the watermark when it
    is theirs (their seq and digest do not change). A transaction an earlier run signed
    for it and never sent (the nonce book still holds it) is sent as it is: signed anew
    at the next nonce, it would wait behind the old one, which the wait's slow path sends
    (nonces.unstick), and one of the two would revert, spending an epoch's gas."""
    state = ctx.state
    signed = sender.signed_before(meta.tx)
    if signed is None:
        calldata = anchor.encode_push(owner, ctx.config.space_id, meta.prev, envelope)
        signed = sign_epoch(sender, calldata)
        # The new transaction's hash first: a re-anchoring cut short finds it at the
        # endpoint, or in the nonce book when it never left this machine.
        cache_epoch_meta(state, replace(meta, tx=keccak(signed.raw).hex()))
    # A nonce counted as spent may be this very transaction's: the chain's head says.
    receipt = send_epoch(sender, signed, meta.seq, REANCHOR_WORDS)
    event = anchor.epoch_from_receipt(receipt)
    if event is None or (event.seq, event.digest) != (meta.seq, meta.digest):
        raise ProtocolError(ErrorCode.INTERNAL,
                            f"epoch {meta.seq} landed again but the Epoch event does not "
                            f"match what was sent", REREAD_HINT)
    # The epoch below, where the chain holds it: the one a run cut short after its receipt
    # re-sent but did not record, or one the chain put back in a later block.
    settle_block(ctx, anchor, owner, meta.seq - 1, event.prev_block)
    cost = receipt_cost(receipt)
    landed = replace(meta, block=event.block, tx=event.tx_hash, writer=event.writer,
                     cost={"gas": cost["gas"], "bytes": len(envelope),
                           "effective_gas_price": cost["effective_gas_price"],
                           "l1_fee": cost["l1_fee"], "cost_wei": cost["cost_wei"]})
    record_landing(ctx, landed)
    log.info("space %s: epoch %d anchored again at block %d (tx %s)", ctx.config.space16,
             landed.seq, landed.block, landed.tx[:12])
    return _line(landed, envelope)


def _line(meta: EpochMeta, envelope: bytes) -> dict[str, Any]:
    cost = meta.cost or {}
    return {"seq": meta.seq, "block": meta.block, "tx": meta.tx, "digest": meta.digest,
            "bucket": meta.bucket, "bytes": len(envelope), "gas_used": cost.get("gas"),
            "cost_wei": cost.get("cost_wei")}
