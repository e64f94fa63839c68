"""A killed push's journal whose key may no longer write for the owner (revoked, or its
authorization expired: pending._settle_unauthorized): its transaction is not sent again,
since the chain would revert it at the key's cost.

What became of it is a value, as `Overtaken` is, not an exception out of the settlement:
a journal dropped is settled, so the rekey journal is settled after it as after any
other, a push then refuses with it, and a pull goes on, carrying it as a notice. A journal
kept (its transaction may still land: `dropped_nonce.Release.may_land`) is refused at once
by push and pull alike, as every journal not settled yet is. It has two ways out, both
named in its hint: the key authorized again, whose next settlement sends it and records
it; or `kint session-key rotate`, after which it is a previous key's journal, which the
settlement drops whatever became of its transaction (pending._settle_unauthorized: the
nonce book no longer holds that key's nonces, and the current key's next push takes the
seq first).
"""

from __future__ import annotations

from dataclasses import dataclass

from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.errors import UNSETTLED_HINT
from kint.protocol.hints import (ASIDE_FIRST, ROTATED_KEY_NOTICE_TAIL, ROTATED_KEY_PUSH_HINT,
                                 UNAUTHORIZED_HINT, UNAUTHORIZED_KEPT_HINT, UNAUTHORIZED_PUSH_HINT,
                                 WRITE_BACK)
from kint.tenant_worker.overtaken import carried_where


# What a dropped journal's rows are once a later push anchored them (`anchored_since`).
ANCHORED_SINCE = ("the store holds no unanchored change now: a later push from this machine "
                  "(its store watcher's, or kint-server's as it closed) anchored the changes "
                  "it carried, or they are gone from the store")
NOTHING_LEFT = "nothing of it is left to anchor"


@dataclass(frozen=True)
class Unauthorized:
    """Epoch `seq`'s journal, signed by `signer`, which may not write for `owner`.
    `rotated`: a previous session key of this machine (the next push anchors its rows with
    the current one); else the machine's key, which the owner authorizes first. `waiting`:
    what became of its transaction the endpoint held (overtaken.REPLACED and the like).
    `kept`: why the journal stays (its transaction may still land); None: dropped.
    `unread`: kept because the endpoint failed to say what became of the transaction
    (`dropped_nonce.Release.unread`): the refusal is the endpoint's, RPC_UNAVAILABLE, and
    the next settlement through an endpoint that answers decides. `spent`: the journal's
    nonce was found spent with the chain still at its prev (pending._settle_spent): its own
    transaction, sent before the key lost its rights, was mined and reverted, or another
    transaction took the nonce; either way nothing of it landed, and the journal is
    dropped, said as the unsent one is. `anchored_since`: said from a kept notice
    (settled_notice.py) when the store holds no unanchored change any more: a later push of
    this machine (its store watcher's, which does not use the notice up) anchored the rows
    the journal carried, and "`kint push` anchors them" was no longer true."""

    seq: int
    signer: str
    owner: str
    rotated: bool
    waiting: str | None = None
    kept: str | None = None
    unread: bool = False
    spent: bool = False
    anchored_since: bool = False
    moved_to: str | None = None  # as Overtaken.moved_to

    def describe(self, moved_to: str | None = None) -> str:
        """What became of the journal; `moved_to` as `Overtaken.describe` takes it."""
        key = (f"the previous session key {self.signer} (rotated since)" if self.rotated
               else f"session key {self.signer}")
        if self.spent:
            said = (f"the interrupted push of epoch {self.seq} did not land: {key} is not "
                    f"authorized for owner {self.owner} (revoked, or its authorization "
                    f"expired), and its nonce was spent (its transaction reverted, or another "
                    f"took the nonce); ")
        else:
            said = (f"the interrupted push of epoch {self.seq} was not sent again: {key} is "
                    f"not authorized for owner {self.owner} (revoked, or its authorization "
                    f"expired), and the chain would revert it, spending its gas; ")
        if self.kept is not None:
            return said + self._kept(moved_to)
        carried = (ANCHORED_SINCE if self.anchored_since
                   else f"the changes it carried are {carried_where(moved_to, self.moved_to)}")
        return said + (f"its journal is dropped, and {carried}"
                       + (f"; {self.waiting}" if self.waiting else ""))

    def _kept(self, moved_to: str | None) -> str:
        """A kept journal's words: why it waits, and what settles it. Its rows are in the
        store, not anchored, until it lands; should a discarding pull move the store aside
        (`moved_to`, or `self.moved_to` first), they are in that copy, which is named: the
        journal may never land (a key rotated instead drops it), and nothing else said
        where they went."""
        if self.unread:
            said = (f"its journal is kept, since {self.kept}: the next push or pull settles "
                    f"it once the endpoint answers")
        else:
            said = (f"its journal is kept, since {self.kept}: once the key is authorized "
                    f"again, the next push or pull sends it again and records it")
        copy = self.moved_to or moved_to
        if copy is None:
            return said
        return said + (f"; until it lands, the changes it carried are "
                       f"{carried_where(None, copy)}")

    def hint(self, again: str = "kint push") -> str:
        """What to do: `again` is the command refused (push or rekey), which is what
        anchors the rows once the key may write: a rekey's snapshot carries the store's
        rows as a push does. It told a refused rekey to run `kint push` again. With a copy
        named (`self.moved_to`), writing the rows back from it comes first (ASIDE_FIRST): the
        refusal uses the notice up, and its push anchored nothing of the copy."""
        if self.kept is not None and self.unread:
            return UNSETTLED_HINT
        if self.anchored_since and self.kept is None:  # push and rekey go on past it
            return NOTHING_LEFT
        if self.kept is not None:
            return UNAUTHORIZED_KEPT_HINT
        then = self._then(again)
        return then if self.moved_to is None else f"{ASIDE_FIRST}; {then}"

    def _then(self, again: str = "kint push") -> str:
        """The step that anchors a dropped journal's rows: `again` once the key may write,
        or with the current key for a rotated one's."""
        rekey = again == "kint rekey"
        if self.rotated:
            return ("run `kint rekey` again: its snapshot anchors them with this machine's "
                    "current session key" if rekey else ROTATED_KEY_PUSH_HINT)
        return (f"{UNAUTHORIZED_HINT}; then `kint rekey` again: its snapshot anchors them"
                if rekey else UNAUTHORIZED_PUSH_HINT)

    def notice(self, moved_to: str | None = None) -> str:
        """What a pull that went on past the dropped journal carries among its warnings:
        `describe` and what to do, the rows it carried waiting in the store for a push
        (refusals carry the same as their hint), or in the store the pull moved aside
        (`moved_to`), from which they are written back first. A journal kept (no pull
        goes past one today: pending.py refuses it first) dropped no rows: what to do is
        the refusal's, never a push that anchors rows."""
        if self.kept is not None:
            return f"{self.describe(moved_to)}; {self.hint()}"
        if self.anchored_since:
            return self.describe(moved_to)
        aside = moved_to is not None or self.moved_to is not None
        said = self.describe(moved_to) + (f"; {WRITE_BACK}" if aside else "")
        if self.rotated:
            return f"{said}; {ROTATED_KEY_NOTICE_TAIL}"
        return f"{said}; {self._then()}"

    def refusal(self, again: str = "kint push") -> ProtocolError:
        """What a push (or rekey: `again`) that met it answers: the hint names the command
        to run again, which anchors the rows once the key may write. A journal kept for an
        endpoint that failed is that endpoint's refusal, as every settlement's that cannot
        read the chain (pending.py); the key's otherwise."""
        code = ErrorCode.RPC_UNAVAILABLE if self.unread else ErrorCode.NOT_CONNECTED
        return ProtocolError(code, self.describe(), self.hint(again))
