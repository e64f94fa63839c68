"""The nonce of a push journal about to be dropped (pending.py): given back, or its
transaction the endpoint holds replaced, so it is neither re-broadcast from the machine's
book nor mined at an epoch's gas, and what is left behind said, so the caller drops the
journal only once its transaction can no longer land from here.

A journal dropped under another machine's epoch cannot land whatever this finds (its prev
is no longer the head): only the gas is at stake. One dropped because its key may not
write can, once the key is authorized again, while its signed bytes still sit in the book
or at the endpoint: the next push takes the nonce after it, stalls, and `nonces.unstick`
re-broadcasts it, an epoch that lands with no journal (`Release.may_land`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from web3.exceptions import TransactionNotFound

from kint.chain.anchor import Anchor
from kint.chain.calls import ChainRefused, bounded
from kint.chain.rpc import RpcUnavailable
from kint.keccak import keccak
from kint.tenant_worker.former_key import FormerKey
from kint.tenant_worker.overtaken import REPLACED, WAITS_TO_REVERT, not_replaced
from kint.tenant_worker.pending_journal import PendingEpoch
from kint.tenant_worker.space import SpaceContext

log = logging.getLogger("kint.worker")


@dataclass(frozen=True)
class Release:
    """What `release_nonce` left. `waiting`: what became of a transaction the endpoint
    held (REPLACED, WAITS_TO_REVERT, `not_replaced`), for a refusal to say once the journal
    is dropped. `may_land`: why its signed transaction may still be mined from this
    machine's book or the endpoint (None: it cannot, the nonce being given back, spent,
    mined, or its transaction replaced). Whether that keeps the journal is the caller's.
    `spent`: the nonce was found mined meanwhile, by the journal's own transaction or
    another: only the chain, read again, says whether the epoch landed (a journal dropped
    for its key's rights may have landed before they ended), so the caller settles it as
    a spent nonce, never drops it on this alone. `unread`: `may_land` because the endpoint
    failed the lookup, not because it answered: a refusal kept for it is the endpoint's
    failure (RPC_UNAVAILABLE), where one it answered is the key's."""

    waiting: str | None = None
    may_land: str | None = None
    spent: bool = False
    unread: bool = False


def signed_by(sender: Any) -> str:
    """Which key a journal waits on, when it is not the machine's key now."""
    return f" ({sender.describe()})" if isinstance(sender, FormerKey) else ""


def release_nonce(ctx: SpaceContext, anchor: Anchor, sender: Any,
                  pending: PendingEpoch) -> Release:
    """The journal to drop holds a nonce the machine's book keeps allocated with the signed
    bytes. The next push would take the nonce after it, wait KINT_NONCE_RETRY_SECONDS for
    it, and then re-broadcast the dropped transaction (nonces.unstick). When the endpoint
    has not mined the nonce and does not know the transaction (it never left this machine:
    a push killed before its send), the nonce is given back, so the next transaction takes
    it at once. When the endpoint holds it waiting to be mined (behind another nonce of the
    key, or a slow block), it is replaced by a transfer to self at its nonce
    (`SessionSender.cancel`), which spends 21,000 gas where a revert would spend the
    epoch's. A chain that cannot be read now, or an endpoint that refuses the replacement,
    leaves the transaction as it was, in the book or at the endpoint: said in `may_land`."""
    sent = "0x" + keccak(pending.raw_tx).hex()

    def lookup() -> Any:
        try:
            return anchor.w3.eth.get_transaction(sent)
        except TransactionNotFound:
            return None

    try:
        if sender.mined_count() > pending.nonce:
            return Release(spent=True)
        held = bounded(lookup, "looking up the interrupted push's transaction")
    except RpcUnavailable as err:
        return Release(may_land=f"whether its transaction waits at the endpoint could not be "
                                f"read ({err})", unread=True)
    if held is None:
        sender.give_back(pending.nonce)
        log.info("space %s: nonce %d of the dropped epoch %d%s was never sent; given back",
                 ctx.config.space16, pending.nonce, pending.seq, signed_by(sender))
        return Release()
    if held.get("blockNumber") is not None:
        return Release(spent=True)
    try:
        replaced = sender.cancel(pending.nonce, pending.raw_tx)
    except (RpcUnavailable, ChainRefused) as err:
        log.warning("space %s: the dropped epoch %d's transaction %s waits at the endpoint "
                    "and could not be replaced (%s)", ctx.config.space16, pending.seq,
                    sent[:14], err)
        return Release(WAITS_TO_REVERT, f"its transaction waits at the endpoint and could "
                                        f"not be replaced ({err})")
    if replaced is None:
        log.warning("space %s: the dropped epoch %d's transaction %s waits at the endpoint "
                    "from %s, whose keystore is not here to replace it: it will revert when "
                    "mined", ctx.config.space16, pending.seq, sent[:14], pending.sender)
        return Release(not_replaced(pending.sender), "its transaction waits at the endpoint, "
                       "from a previous session key this machine cannot open to replace it")
    log.info("space %s: the dropped epoch %d's transaction %s waited at the endpoint; "
             "replaced by a transfer to self at nonce %d", ctx.config.space16, pending.seq,
             sent[:14], pending.nonce)
    return Release(REPLACED)
