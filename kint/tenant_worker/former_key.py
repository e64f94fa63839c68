"""A push journal signed by a session key this machine has since rotated away from.

A push interrupted after it signed leaves its journal (pending.py), which names the key
that signed it (`sender`). `kint session-key rotate` while it waits makes another key the
machine's, and a running worker signs with the new one at once (space.py
`session_account`). The journal's transaction is still the old key's: whether it was
mined, and whether its nonce is spent, are that address's facts, never the new key's (the
new key's count says nothing of the old nonce: settled against it, a transaction never
sent read as spent and was dropped, or one long mined was sent again).

Why it is not a `SessionSender`: the machine's nonce book holds one key's sequence, one
file per nonce number, and the new key's first allocation deletes the old key's entries.
The old key's nonce N is therefore nothing of the book's, and the new key's entry at the
same number may be a live transaction of another space: marking it mined or giving it back
would strand that one. So the former key reads the chain alone and writes no book entry.

A nonce of the old key below the journal's that nothing spent (a push of another space
killed after it took the nonce and before it sent, or a dropped journal's never sent) holds
the journal's transaction back for ever: the book that sent or filled such a hole
(nonces.unstick) holds the new key now. So the former key fills it itself, in its receipt
wait's slow path (`fill_below`): with the push another space's journal holds signed at it,
else a transfer to self from `session.key.old`; when neither can be had, the settlement
refuses at once, naming the address and the nonce, instead of waiting out the receipt
timeout at every push and pull. "Nothing spent" is the word of the space's every endpoint
on its chain, not only the one it sends through: a transaction of the old key at that
nonce waiting in another endpoint's pool was sent (a push of another space, sent through
its own endpoint; the user's own), and a filler would replace it, so it is left to arrive
(`waits_elsewhere`), the wait going on as for any transaction that waits; but for a bound
(`deferral`, former_key_wait.py: counted from its first sighting, which the journal keeps
and a look that endpoint does not answer keeps too): one not passed on by then is taken
as one that never will be, and filled (the filler replaces it) or, when nothing here can
fill it, refused at once, naming the nonce and the endpoint it waits at.

It replaces its own waiting transaction (the dropped journal's, `cancel`) only when its
keystore can still be opened here: `session.key.old`, kept by the rotate, naming this very
address. A second rotate (session.key.old is then another key) or a keystore that no
longer opens leaves the transaction to the chain, and the refusal or the push says so,
naming the address it waits on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kint.chain.anchor import Anchor
from kint.chain.calls import (INSUFFICIENT_FUNDS, ChainRefused, answer_int, bounded, nonce_held,
                              spent_nonce)
from kint.chain.config import same_endpoint
from kint.chain.nonces import retry_seconds
from kint.chain.rpc import ReceiptTimedOut, RpcUnavailable, WaitCut
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import (FILL_AGAIN_HINT, FORMER_KEY_DEVCHAIN_FUND,
                                 FORMER_KEY_ELSEWHERE, FORMER_KEY_FUND,
                                 FORMER_KEY_UNFILLABLE)
from kint.paths import space_files
from kint.settings.urls import redact_url
from kint.tenant_worker import former_key_wait
from kint.tenant_worker.former_key_wait import DeferredWait, Elsewhere, Look
from kint.tenant_worker.pending_journal import PendingEpoch
from kint.tenant_worker.session_sender import Signed, filler, mined_count, replacement

log = logging.getLogger("kint.worker")

def same_address(one: str, other: str) -> bool:
    return one.lower() == other.lower()


@dataclass(frozen=True)
class FormerKey:
    """The key that signed a journal, when it is no longer the machine's session key."""

    anchor: Anchor
    address: str
    home: Path
    space16: str

    def describe(self) -> str:
        return f"signed by the previous session key {self.address}"

    def mined_count(self) -> int:
        return mined_count(self.anchor, self.address)

    def held_count(self, anchor: Anchor | None = None) -> int:
        """The key's next nonce counting what the endpoint (`anchor`, else the one the
        space sends through) holds waiting to be mined: a nonce below it is mined or waits
        there; the first one above the mined count that nothing waits at stops it (a
        queued transaction behind a hole does not count)."""
        at = anchor or self.anchor
        return bounded(lambda: answer_int(at.w3.eth.get_transaction_count(self.address,
                                                                          "pending")),
                       "reading the previous session key's waiting nonce")

    def hole_below(self, nonce: int) -> int | None:
        """The lowest nonce below `nonce` that nothing of this key was mined at or waits
        at, or None. Something must spend it before `nonce` can be mined: the book that
        filled such a hole for the machine's key no longer holds this one."""
        held = self.held_count()
        return held if held < nonce else None

    def waits_elsewhere(self, hole: int) -> Look:
        """Which other endpoint of the space (redacted) counts a transaction of this key at
        `hole`, mined or waiting ("pending" count above it), and whether one did not answer
        (`Look`): "holds nothing" and "did not say" are not the same. The endpoint read
        first holds nothing there, yet a push of another space sent through its own
        endpoint, or a transaction of the user's, may wait in another pool that has not
        passed it on yet: it was sent, and a filler would replace it (another space's
        epoch cancelled). An endpoint that does not answer is asked once (no retries: a
        silent one cost ~31 s a look, half the receipt wait), and counted as unanswered.
        One that serves another chain than the space's holds nothing: the same address
        may have sent more there, which would defer the fill for ever."""
        config = replace(self.anchor.config, rpc_retries=False)  # advisory: asked once
        unanswered = False
        for index, url in enumerate(config.rpc_urls):
            if same_endpoint(url, self.anchor.url):
                continue
            other = Anchor(config, self.anchor.tracker, index)
            try:
                if other.chain_id() != config.chain_id:
                    continue
                held = self.held_count(other)
            except RpcUnavailable:
                unanswered = True
                continue
            if held > hole:
                return Look(redact_url(url))
        return Look(unanswered=unanswered)

    def deferral(self, hole: int) -> Elsewhere | None:
        """Whether the fill of `hole` waits for a transaction of this key at another
        endpoint (`waits_elsewhere`), and how long it has: None when none holds one. The
        bound counts from the first sighting, which the journal keeps (former_key_wait.py
        `since`, which also says what an unanswered look keeps), so a restarted worker goes
        on counting."""
        journal = space_files(self.home, self.space16)["pending"]
        look = self.waits_elsewhere(hole)
        seen = former_key_wait.since(journal, self.address, hole, look)
        if seen is None:
            return None
        waited = former_key_wait.waited(seen)
        return Elsewhere(look.url or seen.url, waited, waited >= former_key_wait.bound_s(),
                         unanswered=look.url is None)

    def check_hole(self, nonce: int) -> None:
        """Before a journal's transaction at `nonce` is sent again: a hole below it that
        this machine cannot fill is refused at once, naming the nonce and what to do, where
        the receipt wait ran out its 60 s at every push and pull for ever. It can fill a
        hole with another space's push its journal holds signed (no key needed), or with a
        transfer when the key opens here; that is left to `wait`'s slow path, which gives
        the other space's own settlement the time to send its push first. A nonce another
        of the space's endpoints holds a transaction at is no hole while the bound lasts
        (`deferral`): that one is waited for; past it, refused naming that endpoint."""
        hole = self.hole_below(nonce)
        if hole is None or self.signed_at(hole) is not None or self.account() is not None:
            return
        elsewhere = self.deferral(hole)
        if elsewhere is None or elsewhere.over:
            raise self._unfillable(hole, nonce, elsewhere)

    def wait(self, tx_hash: str, signed: Signed, until: float | None = None) -> Any:
        """The receipt of the journal's transaction sent again, its slow path filling the
        holes below it (`fill_below`) every KINT_NONCE_RETRY_SECONDS, as the machine's
        key's `unstick` does, the first time by half the receipt wait at the latest: from
        60 s on the setting ran it never, so no hole was filled nor a deferral seen, and
        every push and pull ran out its wait in "may still land". A wait that runs out
        while its last look left a hole to a transaction waiting at another endpoint says
        so, with a hint of its own (DeferredWait): the bound on that (DEFER_STEPS x
        KINT_NONCE_RETRY_SECONDS) outlives the 60 s wait from 20 s on, and the refusal
        said only "may still land", the next one naming the nonce and the endpoint. The
        hole is read again as the wait runs out (`_still_behind`): one cleared since the
        last look ends the wait in the plain words. `until`: the exit push's bound, whose
        settlement of the journal is cut there (WaitCut as it is, pending._send_again)."""
        deferred: list[tuple[int, Elsewhere]] = []

        def slow() -> None:
            deferred.clear()
            self.fill_below(signed.nonce, deferred)

        try:
            return self.anchor.wait(tx_hash, on_slow=slow, slow_after_s=retry_seconds(),
                                    first_slow_within=True, until=until)
        except WaitCut:
            raise  # the caller's bound, not the wait's end: no deferral to say
        except RpcUnavailable as err:
            if not deferred:
                raise
            hole, elsewhere = deferred[-1]
            behind = self._still_behind(hole) if isinstance(err, ReceiptTimedOut) else None
            if behind is False:
                raise  # the way cleared since the last look: the plain timeout's words
            why = (f"{err}: it waits behind a nonce of the previous session key "
                   f"{self.address}: {elsewhere.words(hole)}; until the bound, the fill "
                   f"waits for it")
            # An endpoint that failed meanwhile is the endpoint's hint's to say.
            raise (DeferredWait(why) if behind else RpcUnavailable(why)) from None

    def _still_behind(self, hole: int) -> bool | None:
        """Whether the hole the receipt wait's last look left (a transaction waiting at
        another endpoint) still stops the journal's at the endpoint this space sends
        through, read again as the wait ran out; None when that endpoint does not answer.
        The last look may be most of a KINT_NONCE_RETRY_SECONDS old: the held nonce may
        have reached this endpoint since, or the journal's transaction been mined, short
        of its confirmations. DeferredWait's hint (pass the transaction on, pull once the
        bound passed) then sent the user after a way that had cleared."""
        try:
            return self.held_count() <= hole
        except RpcUnavailable as err:
            log.info("space %s: whether nonce %d of the previous session key %s still waits "
                     "is not known: %s", self.space16, hole, self.address, err)
            return None

    def fill_below(self, nonce: int,
                   deferred: list[tuple[int, Elsewhere]] | None = None) -> list[int]:
        """Spend each nonce below `nonce` that nothing of this key waits at, as `unstick`
        does for the machine's key: the push another space's journal on this machine holds
        signed at it (killed after it signed, before it sent) is sent as it is, and that
        space's settlement finds it landed; any other is filled with a transfer to self
        signed by `session.key.old`. A nonce something waits at is left to it, also when
        only the send finds it so, as far as "replacement transaction underpriced" says:
        an earlier filler of ours at the nonce, read through an endpoint whose count lags
        behind its pool, is not sent over again. That answer covers only a transaction
        bidding within ~10% of the filler's (another filler): a push of another space or
        the user's, priced near the gas price, that such a lagging endpoint holds is
        replaced by the filler's bid (twice the gas price at least), no refusal saying so.
        Refused (ProtocolError, the journal kept) when a transfer is needed and the key
        does not open here, or the endpoint does not take what fills it (too little ETH
        names the address to fund). Returns the nonces it filled; a hole left to a
        transaction waiting elsewhere is added to `deferred`."""
        account: Any | None = None
        filled: list[int] = []
        for _ in range(max(0, nonce - self.mined_count())):
            hole = self.hole_below(nonce)
            if hole is None:
                break
            raw, how = self.signed_at(hole), "sent the push another space's journal holds"
            elsewhere = self.deferral(hole) if raw is None else None
            if elsewhere is not None and not elsewhere.over:
                log.info("space %s: nonce %d of the previous session key %s waits at the "
                         "endpoint %s, not yet at the one this space sends through: not "
                         "filled, the push waits behind it", self.space16, hole,
                         self.address, elsewhere.where())
                if deferred is not None:
                    deferred.append((hole, elsewhere))
                break
            if raw is None:
                account = account or self.account()  # opened once a transfer is needed
                if account is None:
                    raise self._unfillable(hole, nonce, elsewhere)
                raw, how = filler(self.anchor, account, hole), "filled with a transfer to self"
            try:
                self.anchor.send_raw(raw)
            except ChainRefused as err:
                if spent_nonce(err):
                    continue  # mined meanwhile: read the count again
                if nonce_held(err):
                    # The endpoint holds a transaction at `hole` after all that the
                    # filler's bid does not replace: in practice the filler an earlier
                    # settlement sent, read through an endpoint that lags (one priced
                    # near 1x, a push or the user's, would have been replaced, not
                    # refused). The nonce is taken. Reading the count again would show
                    # the same lag: the wait's next slow step looks again.
                    log.info("space %s: nonce %d of the previous session key %s already "
                             "waits at the endpoint: not filled again", self.space16,
                             hole, self.address)
                    break
                raise self._refused_fill(hole, nonce, err) from None
            filled.append(hole)
            if elsewhere is not None:
                log.info("space %s: %s (the previous session key %s): %s, which replaces it",
                         self.space16, elsewhere.words(hole), self.address, how)
                continue
            log.info("space %s: nonce %d of the previous session key %s was never sent: %s",
                     self.space16, hole, self.address, how)
        return filled

    def signed_at(self, hole: int) -> bytes | None:
        """The transaction of this key at nonce `hole` that another space's push journal
        under KINT_HOME holds signed, or None. A journal that does not read is passed over
        (its own space names it)."""
        for path in sorted(self.home.glob("pending-*.json")):
            held = _journal(path)
            if held is not None and same_address(held.sender, self.address) \
                    and held.nonce == hole:
                return held.raw_tx
        return None

    def give_back(self, nonce: int) -> None:
        """Nothing to give back: the book's entries are the machine's key's now, and one at
        the same number is another transaction. A nonce of this key left unsent is a hole
        that the settlement of any journal above it fills (`fill_below`)."""

    def _unfillable(self, hole: int, nonce: int,
                    elsewhere: Elsewhere | None = None) -> ProtocolError:
        """Refused: nothing here can spend `hole`. `elsewhere`: a transaction of the key
        waits at `hole` at another endpoint, past the bound: which one is said, and that
        passing it on (it is the user's own, or another space's push) also frees the way."""
        why = (f"{elsewhere.words(hole)}" if elsewhere is not None
               else f"nonce {hole} of that key was never sent")
        passed = (FORMER_KEY_ELSEWHERE.format(url=elsewhere.url) if elsewhere is not None
                  else "")
        return ProtocolError(
            ErrorCode.RPC_UNAVAILABLE,
            f"the interrupted push's transaction, nonce {nonce} of the previous session key "
            f"{self.address}, cannot be mined: {why}, and this machine can no longer open "
            f"that key to fill it (session.key.old is another key, or none); the journal is "
            f"kept",
            passed + FORMER_KEY_UNFILLABLE.format(hole=hole, address=self.address,
                                                  space16=self.space16))

    def _refused_fill(self, hole: int, nonce: int, err: ChainRefused) -> ProtocolError:
        fund = (_fund(self.anchor.config, self.address) if err.error == INSUFFICIENT_FUNDS
                else "")
        return ProtocolError(
            ErrorCode.RPC_UNAVAILABLE,
            f"the interrupted push's transaction, nonce {nonce} of the previous session key "
            f"{self.address}, waits behind nonce {hole} of that key, which was never sent, "
            f"and the endpoint refused the transaction that fills it ({err}); the "
            f"journal is kept", fund + FILL_AGAIN_HINT.format(hole=hole))

    def account(self) -> Any | None:
        """The key itself when `session.key.old` holds it and opens here, else None (a
        second rotate replaced it, or the local secret no longer opens it)."""
        from kint.custody.errors import CustodyError
        from kint.custody.session_key import session_address, unlock_session_key

        try:
            if not same_address(session_address(self.home, old=True), self.address):
                return None
            return unlock_session_key(self.home, old=True)
        except CustodyError as err:
            log.warning("space %s: session.key.old does not open (%s)", self.space16, err)
            return None

    def cancel(self, nonce: int, replaced: bytes) -> bytes | None:
        """Replace `replaced`, waiting at the endpoint at `nonce`, by a transfer to self
        signed by this key (`SessionSender.cancel`, without the book). None when the key
        cannot be opened here: nothing is sent. Raises what the send raised."""
        account = self.account()
        if account is None:
            return None
        raw = replacement(self.anchor, account, nonce, replaced)
        self.anchor.send_raw(raw)
        return raw


def signer_of(sender: Any, signed_by: str, home: Path) -> Any:
    """Who settles a journal `signed_by` an address: the machine's sender when that is its
    key, else the former key (read from the chain; never the book)."""
    if same_address(sender.account.address, signed_by):
        return sender
    return FormerKey(sender.anchor, signed_by, home, sender.space16)


def rotated_signer(home: Path, journal: Path) -> str | None:
    """The address that signed the push journal at `journal` when it is not this machine's
    session key now (a rotate since), for `kint doctor` to name the key the journal waits
    on; None when it is the same key, or when either file does not read (the settlement
    names those)."""
    from kint.custody.errors import CustodyError
    from kint.custody.session_key import session_address

    held = _journal(journal)
    try:
        current = session_address(home)
    except CustodyError:
        return None
    if held is None or same_address(held.sender, current):
        return None
    return held.sender


def _journal(path: Path) -> PendingEpoch | None:
    """The push journal at `path`, or None when there is none or it does not read (the
    settlement of its own space names such a file)."""
    try:
        return PendingEpoch.load(path)
    except (OSError, ProtocolError):
        return None


def _fund(config: Any, address: str) -> str:
    """What funds the previous key `address` for its fill on the chain of `config`: on the
    devchain the command that gives it ETH (no wallet holds devchain ETH, as push's
    session_sender.fund_hint says of the current key), elsewhere the chain to send ETH on."""
    if config.devchain:
        return FORMER_KEY_DEVCHAIN_FUND.format(address=address)
    return FORMER_KEY_FUND.format(chain_id=config.chain_id, address=address)
