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
the journal's transaction back for ever: the book that filled such a hole with a transfer
to self (nonces.unstick) holds the new key now. So the former key fills it itself, from
`session.key.old`, in its receipt wait's slow path (`fill_below`); when that key does not
open here, the settlement refuses at once, naming the address and the nonce, instead of
waiting out the receipt timeout at every push and pull.

It replaces its own waiting transaction (the dropped journal's, `cancel`) only when its
keystore can still be opened here: `session.key.old`, kept by the rotate, naming this very
address. A second rotate (session.key.old is then another key) or a keystore that no
longer opens leaves the transaction to the chain, and the refusal or the push says so,
naming the address it waits on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from kint.chain.anchor import Anchor
from kint.chain.calls import INSUFFICIENT_FUNDS, ChainRefused, answer_int, bounded, spent_nonce
from kint.chain.nonces import retry_seconds
from kint.protocol import ErrorCode, ProtocolError
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

    def held_count(self) -> int:
        """The key's next nonce counting what the endpoint holds waiting to be mined: a
        nonce below it is mined or waits there; the first one above the mined count that
        nothing waits at stops it (a queued transaction behind a hole does not count)."""
        return bounded(lambda: answer_int(
            self.anchor.w3.eth.get_transaction_count(self.address, "pending")),
            "reading the previous session key's waiting nonce")

    def hole_below(self, nonce: int) -> int | None:
        """The lowest nonce below `nonce` that nothing of this key was mined at or waits
        at, or None. Something must spend it before `nonce` can be mined: the book that
        filled such a hole for the machine's key no longer holds this one."""
        held = self.held_count()
        return held if held < nonce else None

    def check_hole(self, nonce: int) -> None:
        """Before a journal's transaction at `nonce` is sent again: a hole below it that
        this machine cannot fill (the key does not open here) is refused at once, naming
        the nonce and what to do, where the receipt wait ran out its 60 s at every push and
        pull for ever. One it can fill is left to `wait`'s slow path, which gives another
        space's settlement of its own journal at that nonce the time to send it first."""
        hole = self.hole_below(nonce)
        if hole is not None and self.account() is None:
            raise self._unfillable(hole, nonce)

    def wait(self, tx_hash: str, signed: Signed) -> Any:
        """The receipt of the journal's transaction sent again, its slow path filling the
        holes below it (`fill_below`) every KINT_NONCE_RETRY_SECONDS, as the machine's
        key's `unstick` does."""
        return self.anchor.wait(tx_hash, on_slow=lambda: self.fill_below(signed.nonce),
                                slow_after_s=retry_seconds())

    def fill_below(self, nonce: int) -> list[int]:
        """Spend each nonce below `nonce` that nothing of this key waits at with a transfer
        to self signed by `session.key.old`. A nonce something waits at is left to it (a
        push of another space sent before its worker was killed is mined as it was). The
        nonce of a push killed after it signed and before it sent, whose journal another
        space keeps, is spent too: that space's settlement then finds it spent with the
        chain at its prev and drops its journal, its rows pushed by the machine's key.
        Refused (ProtocolError, the journal kept) when the key does not open here, or the
        endpoint does not take the transfer (too little ETH names the address to fund).
        Returns the nonces it filled."""
        account: Any | None = None
        filled: list[int] = []
        for _ in range(max(0, nonce - self.mined_count())):
            hole = self.hole_below(nonce)
            if hole is None:
                break
            account = account or self.account()  # opened once there is a hole to fill
            if account is None:
                raise self._unfillable(hole, nonce)
            try:
                self.anchor.send_raw(filler(self.anchor, account, hole))
            except ChainRefused as err:
                if spent_nonce(err):
                    continue  # mined meanwhile: read the count again
                raise self._refused_fill(hole, nonce, err) from None
            filled.append(hole)
            log.info("space %s: nonce %d of the previous session key %s was never sent: "
                     "filled with a transfer to self", self.space16, hole, self.address)
        return filled

    def give_back(self, nonce: int) -> None:
        """Nothing to give back: the book's entries are the machine's key's now, and one at
        the same number is another transaction. A nonce of this key left unsent is a hole
        that the settlement of any journal above it fills (`fill_below`)."""

    def _unfillable(self, hole: int, nonce: int) -> ProtocolError:
        return ProtocolError(
            ErrorCode.RPC_UNAVAILABLE,
            f"the interrupted push's transaction, nonce {nonce} of the previous session key "
            f"{self.address}, cannot be mined: nonce {hole} of that key was never sent, and "
            f"this machine can no longer open that key to fill it (session.key.old is "
            f"another key, or none); the journal is kept",
            f"put that key's keystore back as session.key.old under KINT_HOME and run `kint "
            f"pull` (it fills nonce {hole} with a transfer to self), or send any transaction "
            f"from {self.address} at nonce {hole}; or move pending-{self.space16}.json out "
            f"of KINT_HOME and run `kint pull`: the push's rows are still in the store, and "
            f"the next push anchors them with this machine's key")

    def _refused_fill(self, hole: int, nonce: int, err: ChainRefused) -> ProtocolError:
        fund = (f"send ETH on chain {self.anchor.config.chain_id} to {self.address}, then "
                if err.error == INSUFFICIENT_FUNDS else "")
        return ProtocolError(
            ErrorCode.RPC_UNAVAILABLE,
            f"the interrupted push's transaction, nonce {nonce} of the previous session key "
            f"{self.address}, waits behind nonce {hole} of that key, which was never sent, "
            f"and the endpoint refused the transfer to self that fills it ({err}); the "
            f"journal is kept", f"{fund}run `kint pull`: it fills nonce {hole} again")

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

    try:
        signed_by = orjson.loads(journal.read_bytes())["sender"]
        current = session_address(home)
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, CustodyError):
        return None
    if not isinstance(signed_by, str) or same_address(signed_by, current):
        return None
    return signed_by
