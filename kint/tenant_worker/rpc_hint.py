"""RPC_UNAVAILABLE's hint, naming what set the endpoint that did not answer.

The generic hint sends the user to KINT_RPC_URL and KINT_RPC_URL_2. On the devchain no such
setting is in force: the endpoint is the one the devchain's record names, and the fix is
to start the devchain again; a space connected with `kint connect --rpc-urls` keeps its
own endpoints in its enrolment, and a `[spaces."<label>"]` table in config.toml beats both.
A hint that sends the user to a setting that is not in force is a wrong next step.
"""

from __future__ import annotations

from kint import settings
from kint.chain.config import DEVCHAIN_SOURCE, SPACE_URLS_SOURCE, ChainConfig
from kint.protocol.errors import (DEFAULT_HINTS, DEVCHAIN_RPC_HINT, SPACE_RPC_HINT, ErrorCode,
                                  ProtocolError)
from kint.tenant_worker.space import SpaceContext

GENERIC = DEFAULT_HINTS[ErrorCode.RPC_UNAVAILABLE]


def endpoint_hint(chain: ChainConfig) -> str:
    """The hint for an endpoint of `chain` that did not answer, by where it was set."""
    if chain.rpc_source == DEVCHAIN_SOURCE:
        return DEVCHAIN_RPC_HINT
    if chain.rpc_source == SPACE_URLS_SOURCE:
        return SPACE_RPC_HINT
    if chain.rpc_source == settings.FILE and chain.rpc_where:
        return f"check the endpoints set in {chain.rpc_where} and that they answer, then try again"
    return GENERIC


def name_the_endpoint(ctx: SpaceContext, err: ProtocolError) -> None:
    """Give `err` the hint of the endpoint in force, when it is RPC_UNAVAILABLE with the
    generic hint (a handler's own hint is kept). Runs under the call's settings, so it
    names the endpoint the call used; when the chain settings cannot be read now, the
    generic hint stays."""
    if err.code is not ErrorCode.RPC_UNAVAILABLE or err.hint != GENERIC:
        return
    try:
        err.hint = endpoint_hint(ctx.chain())
    except ProtocolError:
        pass
