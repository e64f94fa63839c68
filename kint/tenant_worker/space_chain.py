"""`space_chain`: the chain settings a space's worker runs with, for the command line.

`kint session-key show` and `kint authorize` talk to the chain in the command's own process:
`authorize direct` and `burn-nonce` sign with the owner's key from the caller's
environment, which never crosses to a worker, `submit` sends from the session key, and
`page` serves the loopback page the browser's wallet answers. Which endpoint and contract
they use must still be the space's own, the ones its push, pull and connect use: the
running supervisor's settings, the space's `[spaces."<label>"]` table in config.toml and
the endpoints an earlier `kint connect --rpc-urls` kept. Read in the command's process
through its own environment, a caller's KINT_RPC_URL or KINT_CONTRACT took the command to
another endpoint or contract than the space's (a dead endpoint refused where the space's
answers; another chain refused as a move of the space). So the worker hands the command
the settings it runs with, and the caller's values it does not use are said in one line
each, by the wire that carries every request's settings (kint.settings.wire).

The endpoints may carry a provider's key in their path or query: they cross only the 0700
ipc socket, to a process of the same user, and are never logged or printed unredacted
(kint.settings.urls.redact_url).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kint.chain.config import ChainConfig
from kint.tenant_worker.space import SpaceContext


def space_chain(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    """The space's ChainConfig as JSON (`chain_config` reads it back); a chain setting that
    is refused is refused with its own code (SpaceContext.chain)."""
    del args
    return {"chain": dataclasses.asdict(ctx.chain())}


def chain_config(reply: dict[str, Any]) -> ChainConfig:
    """The ChainConfig `space_chain` sent. A field this kint does not know is dropped and one
    it lacks takes its default: for the seconds before the supervisor notices an upgrade on
    disk, the worker may be of an older or newer kint than the command, and one more field
    (the timeout's source, say) raised TypeError in the older."""
    known = {field.name for field in dataclasses.fields(ChainConfig)}
    fields = {name: value for name, value in reply["chain"].items() if name in known}
    fields["rpc_urls"] = tuple(fields["rpc_urls"])
    return ChainConfig(**fields)
