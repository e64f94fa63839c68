"""A pull with no watermark (a cold start) asks a second, independent endpoint for the head
before it restores anything (v0.3.0's 03-new-machine.md, "Freshness"), and refuses when the
two disagree or the second cannot be asked.

Why the refusal names chain ids: a primary on another chain than Base (a local chain
reached through KINT_RPC_URL with no devchain record here) meets a second opinion from
Base's public endpoint, and "two RPCs disagree" or "could not get a second opinion" would
send the user after the wrong endpoint. Once a second opinion failed, one eth_chainId read
of each endpoint says which answers for which chain (kint.chain.chain_id; never on a pull
that goes through).

The second opinion, and that look, are recorded in the space's tracker (`ctx.tracker`)
under their own endpoint, which keeps each endpoint's failures apart (kint.chain.rpc):
verify and status skip their head read, saying "rpc unresponsive", for 30 s after a
failure of the primary only. A second endpoint that was down (Base's public one, rate
limited, or out of reach) once made the primary look down that long after every refused
cold start; recorded apart, a second opinion that hangs shows in the heartbeat as the call
the worker waits on, on the second endpoint.
"""

from __future__ import annotations

import time

from kint.chain.anchor import Anchor, Head
from kint.chain.chain_id import no_second_hint, other_chain, silent_second_hint
from kint.chain.config import ChainConfig
from kint.chain.endpoint_source import kept_endpoints
from kint.settings.urls import redact_url
from kint.chain.rpc import RpcUnavailable
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.space import SpaceContext

SECOND_OPINION_RETRY_S = 3.0


def stale(message: str) -> ProtocolError:
    """A freshness refusal (exit 6 for `kint pull`)."""
    return ProtocolError(ErrorCode.STALE_RPC, f"{message}; nothing was applied")


def _on_the_right_chain(ctx: SpaceContext, chain: ChainConfig,
                        refusal: ProtocolError) -> ProtocolError:
    """`refusal`, or, when an endpoint answers for another chain, a refusal that says so
    first and says what to do about it."""
    found = other_chain(chain, ctx.tracker, len(chain.rpc_urls), skip_silent=True)
    if found is None:
        return refusal
    return ProtocolError(ErrorCode.STALE_RPC, f"{found[0]}: {refusal.message}", found[1])


def cold_start(ctx: SpaceContext, chain: ChainConfig, owner: str,
               head: Head) -> tuple[bool | None, str | None]:
    """Ask the second endpoint for the head. Returns whether it agreed (None: not asked)
    and, when KINT_ALLOW_SINGLE_RPC=1 let the primary stand alone, why (the output says
    so)."""
    if chain.devchain:
        return None, None
    single_ok = chain.allow_single_rpc
    if chain.second_is_same_endpoint:
        if single_ok:
            return None, "the second endpoint is the primary again"
        raise _no_second(chain)
    second = Anchor(chain, ctx.tracker, 1)  # recorded apart: see the module's docstring
    for attempt in range(2):
        ctx.progress = ("pull: cold start, asking a second RPC for the head" if attempt == 0
                        else "pull: cold start, the second RPC disagreed; asking it again")
        try:
            other = second.head(owner, ctx.config.space_id)
        except RpcUnavailable:
            if single_ok:
                return None, f"{redact_url(chain.rpc_urls[1])} did not answer"
            raise _on_the_right_chain(ctx, chain, _second_silent(chain)) from None
        if (other.seq, other.digest) == (head.seq, head.digest):
            return True, None
        if attempt == 0:
            time.sleep(SECOND_OPINION_RETRY_S)
    raise _on_the_right_chain(ctx, chain, stale(
        f"two RPCs disagree on the head: seq {head.seq} ({head.digest[:12]}) against seq "
        f"{other.seq} ({other.digest[:12]}); refusing to restore from a contested head"))


def _no_second(chain: ChainConfig) -> ProtocolError:
    """No second, independent endpoint to ask: KINT_RPC_URL_2 resolves to the primary, or
    the space's own endpoints name one (once, or the same one twice). The words and the
    hint name where the endpoints came from (kint.chain.chain_id, as doctor's): a refusal
    that named KINT_RPC_URL_2 for a space's kept endpoints sent the user to a setting not
    in force."""
    source = ("the endpoints `kint connect --rpc-urls` gave this space name one"
              if kept_endpoints(chain) else
              "KINT_RPC_URL_2 resolves to the same endpoint as the primary")
    return ProtocolError(ErrorCode.STALE_RPC, f"cold start needs a second, independent RPC "
                         f"and {source}", no_second_hint(chain))


def _second_silent(chain: ChainConfig) -> ProtocolError:
    """The second endpoint did not answer: the hint names where it came from."""
    said = f"could not get a second opinion on the head from {redact_url(chain.rpc_urls[1])}"
    return ProtocolError(ErrorCode.STALE_RPC, said, silent_second_hint(chain))
