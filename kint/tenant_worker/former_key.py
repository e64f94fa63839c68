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
from kint.tenant_worker.session_sender import Signed, mined_count, replacement

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

    def wait(self, tx_hash: str, signed: Signed) -> Any:
        """The receipt of the journal's transaction sent again. No slow path: unsticking
        what holds it back is the book's work, and the book no longer holds this key (a
        nonce of it below this one is another journal's, settled by its own space)."""
        return self.anchor.wait(tx_hash)

    def give_back(self, nonce: int) -> None:
        """Nothing to give back: the book's entries are the machine's key's now, and one at
        the same number is another transaction."""

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
