"""A chain call's outcomes other than its answer, in one place: the contract (or the node,
for gas) refused it (`ChainRefused`), or the endpoint could not be used (`RpcUnavailable`:
a timeout, a refused connection, an error object, an answer of the wrong shape; an error
object or an HTTP status is the subclass `RpcErrorAnswer`).

A raw send's error object may be the node's word on the transaction (`refused_send`): one
that names why the node did not take it (a spent nonce, a bid too low, a transaction for
another chain) means nothing of it can land, and a caller must be able to tell that from a
send that may have gone through. Said as an unavailable endpoint, a push called an epoch
the endpoint had refused "may still land", and a replacement the endpoint had refused
stayed in the nonce book in place of the transaction it was meant to replace. Any other
error object stays the endpoint's failure, the transaction possibly taken: a gateway or a
load balancer answers "internal error" or "request timed out" after it passed the
transaction on, and a push told it cannot land would drop its journal and reuse its nonce
for an epoch already on its way.

`bounded` runs one call and maps every low-level failure web3, requests and the socket
raise to one of those two, so no caller sees a library's exception or a traceback, and an
endpoint's own words (its answer may be a whole web page) are quoted short.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import requests
from web3.exceptions import BadResponseFormat, TimeExhausted, Web3RPCError

from kint.chain.rpc import NEVER_CONNECTED, RpcErrorAnswer, RpcNotReached, RpcUnavailable

T = TypeVar("T")
# ChainRefused.error when the sender cannot pay for the gas.
INSUFFICIENT_FUNDS = "InsufficientFunds"
# ChainRefused.error when the endpoint answered a raw send with an error object that names
# no reason kint acts on: the transaction was not taken. Its words are the refusal's detail.
SEND_REFUSED = "SendRefused"
# What endpoints answer a raw send of a transaction they hold already (geth and erigon:
# "already known", nethermind "AlreadyKnown", older geth "known transaction", anvil
# "transaction already imported"): taken before, so the send has done its work.
_ALREADY_HELD = ("already known", "known transaction", "already imported", "alreadyknown")
# The reasons a node gives for not taking a transaction at all (geth's, erigon's and
# anvil's transaction pool errors, nethermind's names): only an error object naming one of
# these is a refusal (SEND_REFUSED); any other may come after the transaction was passed on.
_NOT_TAKEN = ("nonce too low", "oldnonce", "nonce too high", "underpriced", "feetoolow",
              "fee cap less than", "max fee per gas less than", "less than block base fee",
              "intrinsic gas too low", "exceeds block gas limit", "invalid sender",
              "invalid chain id", "chain id mismatch", "oversized data",
              "transaction type not supported", "tx type not supported")


class ChainRefused(Exception):
    """The contract (or the node, for funds) refused a transaction. `error` is the custom
    error's name (NotAuthorized, EmptyCiphertext, StaleHead, AuthorizationExpired,
    BadSignature, SeqNotMonotone), INSUFFICIENT_FUNDS, or "reverted" when nothing names it;
    `fields` holds the error's arguments by name (StaleHead: expected, got as 64 hex)."""

    def __init__(self, error: str, detail: str = "", fields: dict[str, Any] | None = None) -> None:
        self.error = error
        self.detail = detail
        self.fields = dict(fields or {})
        shown = (f"{error}({', '.join(f'{k}={v}' for k, v in self.fields.items())})"
                 if self.fields else error)
        super().__init__(f"{shown}{': ' + detail if detail else ''}")


def bounded(fn: Callable[[], T], what: str) -> T:
    """Run one chain call, mapping every transport failure to RpcUnavailable."""
    try:
        return fn()
    except (requests.exceptions.RequestException, TimeExhausted, ConnectionError,
            OSError) as err:
        if getattr(err, NEVER_CONNECTED, False):
            raise RpcNotReached(f"{what}: {transport_words(err)}") from None
        if isinstance(err, requests.exceptions.HTTPError) and isinstance(
                getattr(err.response, "status_code", None), int):
            raise RpcErrorAnswer(f"{what}: {transport_words(err)}") from None
        raise RpcUnavailable(f"{what}: {transport_words(err)}") from None
    except Web3RPCError as err:
        # The node refused the call. Too little ETH for the gas is the sender's to fix, not
        # the endpoint's: it comes back as a refusal the ops can explain.
        if "insufficient funds" in str(err).lower():
            raise ChainRefused(INSUFFICIENT_FUNDS, str(err)[:200]) from None
        raise RpcErrorAnswer(f"{what}: the endpoint answered with an error "
                             f"({endpoint_text(err)})") from None
    except ValueError as err:
        # web3 raises ValueError for JSON-RPC error objects it does not map.
        raise RpcErrorAnswer(f"{what}: the endpoint answered with an error "
                             f"({endpoint_text(err)})") from None
    except (TypeError, KeyError, AttributeError, IndexError, BadResponseFormat):
        # An answer of the wrong shape (an object where a number was due, a receipt without
        # its fields, a reply with neither a result nor an error object, which web3 raises
        # as BadResponseFormat quoting the reply whole): a lying or broken endpoint,
        # refused in words, never a traceback.
        raise RpcUnavailable(f"{what}: the endpoint's answer is not what was asked for") from None


class AlreadyHeld(Exception):
    """The endpoint answered a raw send that it holds that very transaction already: a
    send that did its work (the caller goes on with the transaction's own hash)."""


def refused_send(err: Exception) -> Exception:
    """What an error object answering a raw send means (`err`: web3's exception over it):
    too little ETH (ChainRefused INSUFFICIENT_FUNDS), the transaction held already
    (AlreadyHeld), a reason the node did not take it (ChainRefused SEND_REFUSED, the
    endpoint's words as its detail: `_NOT_TAKEN`), or anything else: the endpoint's failure
    (RpcErrorAnswer), the transaction possibly passed on (the module's docstring)."""
    text = str(err).lower()
    if "insufficient funds" in text:
        return ChainRefused(INSUFFICIENT_FUNDS, str(err)[:200])
    if any(words in text for words in _ALREADY_HELD):
        return AlreadyHeld(endpoint_text(err))
    if any(words in text for words in _NOT_TAKEN):
        return ChainRefused(SEND_REFUSED, f"the endpoint refused the transaction "
                                          f"({endpoint_text(err)})")
    return RpcErrorAnswer(f"sending a transaction: the endpoint answered with an error "
                          f"({endpoint_text(err)})")


def spent_nonce(err: ChainRefused) -> bool:
    """Whether a refused send said its nonce is spent (geth and anvil: "nonce too low",
    nethermind "OldNonce"). The transaction was not taken, yet what spent the nonce may be
    that very transaction, sent before through another endpoint (nonces.unstick), so
    whether it landed is the chain's to say, not the refusal's."""
    text = err.detail.lower()
    return err.error == SEND_REFUSED and ("nonce too low" in text or "oldnonce" in text)


def nonce_held(err: ChainRefused) -> bool:
    """Whether a refused send said the endpoint holds another transaction at its nonce,
    waiting, that it bids too little to replace (geth, erigon, reth and anvil: "replacement
    transaction underpriced"). The nonce is taken there: for a sender that only meant to
    spend it (a filler), that is the work done by what waits, never a refusal. It is said
    only of a transaction bidding about as much as the send (an earlier filler of ours):
    one bid well below it is replaced, with no refusal to read here."""
    return err.error == SEND_REFUSED and "replacement transaction underpriced" in \
        err.detail.lower()


# A call that timed out, in the words the worker names the value in force and whose it
# was after (kint.tenant_worker.rpc_hint.timeout_named), for a request and a watcher push.
RPC_TIMEOUT_WORDS = "the endpoint did not answer within KINT_RPC_TIMEOUT"


def transport_words(err: BaseException) -> str:
    """What went wrong on the way to the endpoint, in words a user acts on, with the
    library's name for it after: "ReadTimeout" alone said neither that the endpoint was
    silent nor which setting bounds the wait, and "HTTPError" neither that a metered
    endpoint was refusing this client's rate (429) nor which status it answered."""
    name = type(err).__name__
    status = getattr(getattr(err, "response", None), "status_code", None)
    if isinstance(err, requests.exceptions.HTTPError) and status == 429:
        return ("the endpoint is rate limiting this client (HTTP 429 Too Many Requests): "
                "try again in a moment, or use an endpoint with a higher limit")
    if isinstance(err, requests.exceptions.HTTPError) and isinstance(status, int):
        return f"the endpoint answered HTTP {status} ({name})"
    if isinstance(err, (requests.exceptions.Timeout, TimeoutError)):
        return f"{RPC_TIMEOUT_WORDS} ({name})"
    if isinstance(err, TimeExhausted):
        return f"the transaction was not mined in time ({name})"
    if isinstance(err, (requests.exceptions.ConnectionError, ConnectionError)):
        return f"the endpoint could not be reached ({name})"
    return name


def answer_int(value: Any) -> int:
    """An endpoint's answer that must be a number (inside `bounded`: a TypeError there is
    the endpoint's wrong answer)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"not a number: {type(value).__name__}")
    return value


# How much of an endpoint's own words an error quotes: its answer may be a whole web page.
ENDPOINT_TEXT_CHARS = 200


def endpoint_text(said: object) -> str:
    """What an endpoint said (an exception raised over its answer, or its error object), on
    one line and cut short."""
    text = " ".join(str(said).split())
    return text if len(text) <= ENDPOINT_TEXT_CHARS else text[:ENDPOINT_TEXT_CHARS] + "..."
