"""Which chain an endpoint answers for, and the one wording of an endpoint on another chain.

Why it matters: off the devchain kint is configured for Base (chain 8453), whatever
KINT_RPC_URL names, and KINT_RPC_URL_2 left unset is Base's public endpoint. A local chain
reached through KINT_RPC_URL with no devchain record here then answers every call as if it
were Base: a signature made for 8453 would not verify there, and two endpoints on two
chains would "disagree on the head". One eth_chainId read of each endpoint names the real
cause. The CLI (`kint authorize`, `kint session-key show`: one endpoint) and a space's
worker (a cold start's second opinion: both endpoints) say it in the same words.
"""

from __future__ import annotations

from kint.chain.anchor import Anchor
from kint.chain.config import ChainConfig
from kint.chain.rpc import RpcTracker, RpcUnavailable
from kint.settings.urls import redact_url

ENDPOINT_NAMES = ("KINT_RPC_URL", "KINT_RPC_URL_2")
_DEVCHAIN_TODO = ("for a local devchain, copy its record ($KINT_HOME/devchain/devchain.json) "
                  "to this machine instead")


def answered_chain_id(chain: ChainConfig, tracker: RpcTracker, index: int) -> int:
    """The chain id endpoint `index` of `chain` answers for (eth_chainId). Raises
    RpcUnavailable when it does not answer."""
    return Anchor(chain, tracker, index).chain_id()


def other_chain(chain: ChainConfig, tracker: RpcTracker, endpoints: int = 1, *,
                skip_silent: bool = False) -> tuple[str, str] | None:
    """(what is wrong, what to do) when one of the first `endpoints` endpoints answers for
    another chain than the one kint signs for here, else None. An endpoint that does not
    answer raises RpcUnavailable, or with `skip_silent` (the caller's refusal already says
    it did not answer) is left out. Only the primary and the second opinion are looked at
    (ENDPOINT_NAMES): a space given more endpoints (`connect --rpc-urls`) asks no other."""
    wrong = []
    for index in range(min(endpoints, len(chain.rpc_urls), len(ENDPOINT_NAMES))):
        try:
            answered = answered_chain_id(chain, tracker, index)
        except RpcUnavailable:
            if not skip_silent:
                raise
            continue
        if answered != chain.chain_id:
            wrong.append(f"{redact_url(chain.rpc_urls[index])} ({ENDPOINT_NAMES[index]}) "
                         f"answers for chain {answered}")
    if not wrong:
        return None
    return _wording(chain, wrong, endpoints)


def _wording(chain: ChainConfig, wrong: list[str], endpoints: int) -> tuple[str, str]:
    """The one wording: each endpoint that answered for another chain, the chain this
    machine signs for, and the endpoints to point at one of it."""
    expected = chain.chain_id
    if endpoints > 1:
        todo = (f"point KINT_RPC_URL and KINT_RPC_URL_2 at two endpoints of chain {expected} "
                f"(unset, KINT_RPC_URL_2 is Base's public endpoint, whatever KINT_RPC_URL "
                f"names)")
    else:
        todo = f"point KINT_RPC_URL at an endpoint of chain {expected}"
    return (f"{' and '.join(wrong)}, not {expected}, the chain this machine signs for",
            f"{todo}; {_DEVCHAIN_TODO}")
