"""RPC_UNAVAILABLE for a worker's chain call that failed (kint.chain.rpc.RpcUnavailable).

An endpoint that did not answer is refused in the op's words with the hint the op gives
(none: the code's own, which names the endpoint in force on the way out:
rpc_hint.name_the_endpoint). A view that returned no data (kint.chain.anchor.NoContractThere)
is another failure: the endpoint answered, and there is no EpochAnchor at the contract's
address on its chain. Refused like the first, a push, a pull or a connect said the step
twice, once in the message and once as the hint, and the hint was the one of an endpoint
that did not answer ("the devchain's endpoint did not answer", "that is a transport
failure"): the user was sent to restart a devchain that ran. Here what happened is the
message and its own step, named where the contract and the endpoint were set, the hint.
"""

from __future__ import annotations

from kint.chain.anchor import NoContractThere
from kint.chain.rpc import RpcUnavailable
from kint.protocol import ErrorCode, ProtocolError


def chain_unavailable(err: RpcUnavailable, before: str = "",
                      hint: str | None = None) -> ProtocolError:
    """The refusal of `err`: `before` (the op's words, e.g. "cannot read the chain head: ")
    then the failure's; `hint` for an endpoint that did not answer, NoContractThere's own
    step for a view with no data."""
    if isinstance(err, NoContractThere):
        return ProtocolError(ErrorCode.RPC_UNAVAILABLE, before + err.happened, err.step)
    return ProtocolError(ErrorCode.RPC_UNAVAILABLE, before + str(err), hint)
