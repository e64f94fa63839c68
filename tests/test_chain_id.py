"""kint.chain.chain_id: which chain a space's endpoints answer for.

A space may be given more endpoints than two (`kint connect --rpc-urls a,b,c`); only the
first two are ever asked (the primary and the second opinion), so only they are looked at
when a cold start's refusal names an endpoint of another chain. Real endpoints on
127.0.0.1: a tiny JSON-RPC server that answers eth_chainId as a chain of its own would, and
a closed port for one that does not answer.
"""

from __future__ import annotations

import json
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from typing import Iterator

import pytest

from rpc_proxy import LoopbackServer, answer_json, closed_port_url
from kint.chain.chain_id import answered_chain_id, on_other_chain, other_chain
from kint.chain.config import SPACE_URLS_SOURCE, ChainConfig
from kint.chain.rpc import RpcTracker, RpcUnavailable


def _server(chain_id: int) -> LoopbackServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            answer = json.dumps({"jsonrpc": "2.0", "id": body["id"],
                                 "result": hex(chain_id)}).encode()
            answer_json(self, answer)

        def log_message(self, *_: object) -> None:
            pass

    return LoopbackServer(Handler)


@pytest.fixture
def endpoint() -> Iterator[str]:
    """An endpoint of chain 1 (not Base)."""
    server = _server(1)
    yield server.url
    server.stop()


def _chain(*urls: str) -> ChainConfig:
    return ChainConfig(tuple(urls), 8453, "0x" + "11" * 20, 1, 2.0)


def test_an_endpoint_of_another_chain_is_named_with_its_setting(endpoint):
    silent = closed_port_url()
    found = other_chain(_chain(silent, endpoint), RpcTracker(), 2, skip_silent=True)
    assert found is not None
    assert found[0] == (f"{endpoint} (KINT_RPC_URL_2) answers for chain 1, not 8453, the "
                        f"chain this machine signs for")
    with pytest.raises(RpcUnavailable):
        other_chain(_chain(silent, endpoint), RpcTracker(), 2)


def test_only_the_two_endpoints_kint_asks_are_looked_at(endpoint):
    """A third endpoint is never the primary nor the second opinion: it is not asked (it
    was, and one of another chain made the refusal an IndexError, INTERNAL to the user)."""
    silent = closed_port_url()
    config = _chain(silent, silent, endpoint)
    assert other_chain(config, RpcTracker(), len(config.rpc_urls), skip_silent=True) is None


def test_a_kept_second_endpoint_of_another_chain_is_named_the_second(endpoint):
    """doctor's `rpc secondary` check of a space's kept endpoints (`kint connect --rpc-urls`),
    the second on another chain: the todo said to pass the connect "an endpoint" of the
    chain, as if the primary were wrong; it names the second one."""
    kept = replace(_chain(closed_port_url(), endpoint), rpc_source=SPACE_URLS_SOURCE)
    alone = on_other_chain(kept, {1: answered_chain_id(kept, RpcTracker(), 1)})
    assert alone is not None
    assert alone[0].startswith(f"{endpoint} (`kint connect --rpc-urls`) answers for chain 1")
    assert alone[1].startswith("pass `kint connect --rpc-urls` a second endpoint of chain "
                               "8453; "), alone
