"""Which chain an endpoint answers for, and the one wording of an endpoint on another chain.

Why it matters: off the devchain kint is configured for Base (chain 8453), whatever
KINT_RPC_URL names, and KINT_RPC_URL_2 left unset is Base's public endpoint. A local chain
reached through KINT_RPC_URL with no devchain record here then answers every call as if it
were Base: a signature made for 8453 would not verify there, and two endpoints on two
chains would "disagree on the head". One eth_chainId read of each endpoint names the real
cause. The CLI (`kint authorize`, `kint session-key show`: one endpoint), a space's worker
(a cold start's second opinion: both endpoints; a connect: its primary) and `kint doctor`
(its `rpc primary` and `rpc secondary` checks, one endpoint each) say it in the same words.
The words name each endpoint by where it came from (`endpoint_names`), and so do a cold
start's and doctor's of a second endpoint missing or silent (`no_second_hint`,
`silent_second_hint`): a space's kept endpoints are changed by a connect, not a setting
(kint.chain.endpoint_source decides which are in force, for every wording).
"""

from __future__ import annotations

from kint.chain.anchor import Anchor
from kint.chain.config import ChainConfig
from kint.chain.endpoint_source import kept_endpoints
from kint.chain.rpc import RpcTracker, RpcUnavailable
from kint.settings.urls import redact_url

ENDPOINT_NAMES = ("KINT_RPC_URL", "KINT_RPC_URL_2")
# A space's endpoints an earlier `kint connect --rpc-urls` gave it (its enrolment keeps them).
KEPT_NAMES = ("`kint connect --rpc-urls`",) * len(ENDPOINT_NAMES)
# The names that are an option, passed an endpoint, where a setting is pointed at one.
_OPTIONS = ("--rpc-urls", KEPT_NAMES[0])
_DEVCHAIN_ADVICE = ("for a local devchain, copy its record ($KINT_HOME/devchain/devchain.json) "
                    "to this machine instead")
# An endpoint of another chain on a machine whose devchain record is in force (`--rpc-urls`'s,
# a space's table's): they change how a space reaches the devchain, never which chain it is
# (kint.chain.config); only the machine's KINT_RPC_URL takes the machine off the devchain.
_BASE_ADVICE = ("for Base while the devchain's record is in force here, point KINT_RPC_URL at "
                "an endpoint of Base for the whole machine (every space here then reads Base)")


def endpoint_names(chain: ChainConfig) -> tuple[str, ...]:
    """What the words call `chain`'s endpoints, by where they came from: the settings, or the
    endpoints the space's enrolment keeps from `kint connect --rpc-urls`, which replace the
    settings' (KINT_RPC_URL may be right while they are not: a pull's cold start and join's
    vault step said "(KINT_RPC_URL)" of them, and sent the user to a setting not in force)."""
    return KEPT_NAMES if kept_endpoints(chain) else ENDPOINT_NAMES


def no_second_hint(chain: ChainConfig) -> str:
    """What to do when a cold start has no second, independent endpoint to ask (KINT_RPC_URL_2
    resolves to the primary, or the space's kept endpoints name one): said by a pull's
    refusal and by doctor's `rpc secondary`, which sent a space's kept endpoints to
    KINT_RPC_URL_2, a setting they replace."""
    if kept_endpoints(chain):
        return ("give the space two of different operators (`kint connect --rpc-urls "
                "URL,URL`), or set KINT_ALLOW_SINGLE_RPC=1 to accept one")
    return ("set KINT_RPC_URL_2 to another operator's endpoint on the same chain, or "
            "KINT_ALLOW_SINGLE_RPC=1 to accept one")


def silent_second_hint(chain: ChainConfig) -> str:
    """What to do when the second endpoint did not answer, by where it came from (as
    `no_second_hint`)."""
    if kept_endpoints(chain):
        return ("check the second endpoint `kint connect --rpc-urls` gave this space, or set "
                "KINT_ALLOW_SINGLE_RPC=1")
    return "check KINT_RPC_URL_2, or set KINT_ALLOW_SINGLE_RPC=1"


def answered_chain_id(chain: ChainConfig, tracker: RpcTracker, index: int) -> int:
    """The chain id endpoint `index` of `chain` answers for (eth_chainId). Raises
    RpcUnavailable when it does not answer."""
    return Anchor(chain, tracker, index).chain_id()


def other_chain(chain: ChainConfig, tracker: RpcTracker, endpoints: int = 1, *,
                skip_silent: bool = False,
                names: tuple[str, ...] | None = None) -> tuple[str, str] | None:
    """(what is wrong, what to do) when one of the first `endpoints` endpoints answers for
    another chain than the one kint signs for here, else None. An endpoint that does not
    answer raises RpcUnavailable, or with `skip_silent` (the caller's refusal already says
    it did not answer) is left out. Only the primary and the second opinion are looked at
    (ENDPOINT_NAMES): a space given more endpoints (`connect --rpc-urls`) asks no other.
    `names` are what the words call the endpoints (on_other_chain)."""
    answers = {}
    for index in range(min(endpoints, len(chain.rpc_urls), len(ENDPOINT_NAMES))):
        try:
            answers[index] = answered_chain_id(chain, tracker, index)
        except RpcUnavailable:
            if not skip_silent:
                raise
    return on_other_chain(chain, answers, endpoints, names=names)


def on_other_chain(chain: ChainConfig, answers: dict[int, int], endpoints: int = 1, *,
                   names: tuple[str, ...] | None = None) -> tuple[str, str] | None:
    """The one wording, from chain ids already read (`answers`: endpoint index -> the id it
    answered for): each endpoint that answered for another chain, the chain this machine
    signs for, and what to point where; None when every answer is that chain.

    `endpoints` is how many endpoints the caller relies on together: with two (a cold
    start's second opinion) the fix is two endpoints of the chain; with one, the endpoint
    that answered wrong (a check of KINT_RPC_URL_2 alone names KINT_RPC_URL_2).

    `names` say where each endpoint came from, so that the words send the user to the real
    source: by default `endpoint_names` (the settings, or the space's kept `kint connect
    --rpc-urls`), `("--rpc-urls",)` for a connect given `--rpc-urls`, whose endpoints
    replace the ones in force, the devchain's record's too. On the devchain the words also
    say how a space gets to Base (an endpoint of Base given there, by the option or a
    space's table, is read as the devchain's). A name of `_OPTIONS` is an option: passed,
    not pointed."""
    names = names or endpoint_names(chain)
    expected = chain.chain_id
    wrong = [index for index, answered in sorted(answers.items()) if answered != expected]
    if not wrong:
        return None
    said = [f"{redact_url(chain.rpc_urls[index])} ({names[index]}) answers for "
            f"chain {answers[index]}" for index in wrong]
    if endpoints > 1 and names[0] in _OPTIONS:  # the space's own endpoints, given together
        todo = f"pass {names[0]} two endpoints of chain {expected}"
    elif endpoints > 1:
        todo = (f"point KINT_RPC_URL and KINT_RPC_URL_2 at two endpoints of chain {expected} "
                f"(unset, KINT_RPC_URL_2 is Base's public endpoint, whatever KINT_RPC_URL "
                f"names)")
    elif names[wrong[0]] in _OPTIONS:  # an option: given, not pointed (the second: doctor's)
        which = "a second endpoint" if wrong[0] else "an endpoint"
        todo = f"pass {names[wrong[0]]} {which} of chain {expected}"
    else:
        todo = (f"point {' and '.join(names[index] for index in wrong)} at an "
                f"endpoint of chain {expected}")
    # Off the devchain, how to reach one; on it (its record is here already), given for
    # Base maybe, how a space gets to Base there.
    todo += f"; {_BASE_ADVICE if chain.devchain else _DEVCHAIN_ADVICE}"
    return f"{' and '.join(said)}, not {expected}, the chain this machine signs for", todo
