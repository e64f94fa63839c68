"""Signing and sending one epoch's transaction, for a push (push.py) and a re-anchoring
(reanchor.py) alike: both refuse a signing the chain will not take as push_refusals.refused
says, and both tell, once the epoch is signed, a send refused outright from one whose
nonce the endpoint counts as spent (perhaps by this very transaction, sent before) and
from one that may still land or never left this machine. Written once so the two cannot
drift apart; what each says of the epoch afterwards is its own (`SendWords`), since a push
is settled by its journal and a re-anchoring by running it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kint.chain.calls import ChainRefused, spent_nonce
from kint.chain.rpc import RpcNotReached, RpcUnavailable, WaitCut
from kint.outcomes import NOTHING_DROPPED
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.former_key_wait import DeferredWait
from kint.tenant_worker.push_refusals import refused
from kint.tenant_worker.session_sender import SessionSender, Signed


@dataclass(frozen=True)
class SendWords:
    """What a command says of an epoch it signed when its send goes wrong, each with a
    `{seq}` for the epoch: the endpoint counts its nonce as spent (`spent`), no connection
    to the endpoint was made (`never_sent`), or the request left this machine and the
    answer did not come back (`may_land`)."""

    spent: str
    never_sent: str
    may_land: str


# A push whose endpoint failed after its epoch was signed and journalled (pending.py): the
# send's request left this machine (it may still land), or its connection was never made.
# The settlement of its journal says the same when its own re-send fails so.
MAY_STILL_LAND = ("epoch {seq} was signed and may still land: the next push or pull "
                  "settles it against the chain before anything else, so it is never "
                  "anchored twice")
NEVER_SENT = ("epoch {seq} was signed but never sent (no connection to the endpoint was "
              "made): the next push or pull sends it, or drops it if the chain has moved "
              "on, before anything else, so it is never anchored twice")

# The settlement's re-send of a journal (pending._send_again) that made no connection: it
# was not sent this time, but a push killed after its own send may have left it at the
# endpoint already, so "never sent" would not be true.
NOT_SENT_AGAIN = ("epoch {seq} was signed and not sent again (no connection to the endpoint "
                  "was made), and a send of it before may still land: the next push or pull "
                  "settles it against the chain before anything else, so it is never "
                  "anchored twice")

NONCE_SPENT = ("the endpoint counts epoch {seq}'s nonce as spent, perhaps by its own "
               "transaction sent before: the next push or pull settles it against the chain "
               "before anything else, so it is never anchored twice")
PUSH_WORDS = SendWords(spent=NONCE_SPENT, never_sent=NEVER_SENT, may_land=MAY_STILL_LAND)
RESEND_WORDS = SendWords(spent=NONCE_SPENT, never_sent=NOT_SENT_AGAIN,
                         may_land=MAY_STILL_LAND)


def sign_epoch(sender: SessionSender, calldata: bytes) -> Signed:
    """`calldata` signed at the machine's next nonce, or the refusal a push answers when
    the chain would not take it (an estimate that reverts, too little ETH)."""
    try:
        return sender.sign(calldata, NOTHING_DROPPED)
    except ChainRefused as err:
        raise refused(err) from None


def send_epoch(sender: SessionSender, signed: Signed, seq: int, words: SendWords,
               not_taken: Callable[[], None] | None = None,
               until: float | None = None) -> Any:
    """Send epoch `seq`'s `signed` transaction and wait for its receipt. A refusal whose
    nonce is spent is RPC_UNAVAILABLE with `words.spent` (that nonce may be this very
    transaction's, so whether the epoch landed is the chain's to say, not the refusal's);
    any other refusal runs `not_taken` (a push drops its journal: nothing can land) and is
    answered as push_refusals.refused says. An endpoint that failed is RPC_UNAVAILABLE
    with `words.never_sent` when no connection was made for the send, else
    `words.may_land`, where the endpoint's words alone read as if nothing had left this
    machine, or as if it had. A receipt wait cut at `until` (the exit push's bound) is
    raised as it is (WaitCut), for the push to say where it stopped (push._push_epochs)."""
    sent = False
    try:
        tx = sender.send(signed)
        sent = True
        return sender.wait(tx, signed, until)
    except WaitCut:
        raise
    except ChainRefused as err:
        if spent_nonce(err):
            raise ProtocolError(ErrorCode.RPC_UNAVAILABLE,
                                f"{err.detail}; {words.spent.format(seq=seq)}") from None
        if not_taken is not None:
            not_taken()
        raise refused(err) from None
    except RpcUnavailable as err:
        raise endpoint_failed(err, sent, seq, words) from None


def endpoint_failed(err: RpcUnavailable, sent: bool, seq: int,
                    words: SendWords) -> ProtocolError:
    """RPC_UNAVAILABLE for epoch `seq`'s send (`sent`: the endpoint took it) or receipt
    wait that failed with `err`: `words.never_sent` when no connection was made for the
    send, else `words.may_land`. A push's own send (PUSH_WORDS) and its journal's re-send
    (pending.py, RESEND_WORDS) say it alike but for a send that made no connection. A wait
    that ran out behind a previous key's nonce waiting elsewhere (DeferredWait) keeps its
    own hint: the endpoints answered."""
    never = not sent and isinstance(err, RpcNotReached)
    said = words.never_sent if never else words.may_land
    hint = err.hint if isinstance(err, DeferredWait) else None
    return ProtocolError(ErrorCode.RPC_UNAVAILABLE, f"{err}; {said.format(seq=seq)}", hint)
