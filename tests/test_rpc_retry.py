"""A call whose connection fails or times out is tried twice more, as v0.3.0's are
(10-configuration.md, `KINT_RPC_TIMEOUT`), except a send, which is never sent twice behind
the caller's back; and a connection never made is told apart from a request that left
(kint/chain/rpc.py). The endpoint is a loopback server that drops, or answers late, its
first requests, and a port nothing listens on."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Iterator

import pytest

from rpc_proxy import LoopbackServer, answer_json, answer_status, json_post_handler
from kint.chain.calls import bounded
from kint.chain.rpc import (RETRY_PAUSES_S, RpcNotReached, RpcTracker, RpcUnavailable,
                            TrackedHTTPProvider, connect)

TIMEOUT_S = 0.5


class FlakyEndpoint(LoopbackServer):
    """Answers JSON-RPC after failing its first `fail` requests: `drop` reads one and
    closes the connection without a word, `late` answers it after the client's timeout,
    `429` answers HTTP 429. `methods` lists every method asked, in order."""

    def __init__(self) -> None:
        self.fail, self.how = 0, "drop"
        self.methods: list[str] = []
        self._lock = threading.Lock()
        super().__init__(json_post_handler(self._serve))

    def _serve(self, handler: BaseHTTPRequestHandler, request: dict) -> None:
        with self._lock:
            self.methods.append(request["method"])
            failing = self.fail > 0
            self.fail -= 1
        if failing and self.how == "drop":
            return
        if failing and self.how == "late":
            time.sleep(TIMEOUT_S * 3)
        if failing and self.how == "429":
            answer_status(handler, 429)
            return
        result = ("0x" + "ab" * 32 if request["method"] == "eth_sendRawTransaction"
                  else "0x10")
        body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
        try:
            answer_json(handler, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # a late answer: the client gave up on it and closed


@pytest.fixture
def endpoint() -> Iterator[FlakyEndpoint]:
    server = FlakyEndpoint()
    yield server
    server.stop()


def _w3(url: str):  # noqa: ANN202 - web3's Web3
    """A client of `url` as kint makes one, its pauses between tries cut to nothing: as
    many tries as kint makes (one per pause, and the first), which is what these tests
    count, without the 0.75 s of pauses each failing read would sleep."""
    provider = TrackedHTTPProvider(url, TIMEOUT_S, RpcTracker())
    provider.retry_pauses = tuple(0.0 for _ in RETRY_PAUSES_S)
    return connect(provider)


@pytest.mark.parametrize("how", ["drop", "late"])
def test_a_read_is_tried_twice_more(endpoint, how):
    """Two dropped (or late) answers in a row, then the answer: the read gets it, on its
    third try. A third failure is the caller's: RPC_UNAVAILABLE after three tries."""
    endpoint.fail, endpoint.how = 2, how
    w3 = _w3(endpoint.url)
    assert bounded(lambda: w3.eth.block_number, "reading the block number") == 16
    assert endpoint.methods == ["eth_blockNumber"] * 3

    endpoint.methods.clear()
    endpoint.fail = 3
    with pytest.raises(RpcUnavailable) as failed:
        bounded(lambda: w3.eth.block_number, "reading the block number")
    assert not isinstance(failed.value, RpcNotReached)  # the requests left this machine
    assert endpoint.methods == ["eth_blockNumber"] * 3


def test_a_send_and_an_answer_are_not_tried_again(endpoint):
    """A send whose connection dropped may have reached the endpoint: it is not sent
    again here (the push journal decides). An HTTP 429 is an answer: not retried."""
    endpoint.fail = 1
    w3 = _w3(endpoint.url)
    with pytest.raises(RpcUnavailable) as failed:
        bounded(lambda: w3.eth.send_raw_transaction(b"\x01"), "sending a transaction")
    assert not isinstance(failed.value, RpcNotReached)
    assert endpoint.methods == ["eth_sendRawTransaction"]

    endpoint.methods.clear()
    endpoint.fail, endpoint.how = 1, "429"
    with pytest.raises(RpcUnavailable, match="HTTP 429"):
        bounded(lambda: w3.eth.block_number, "reading the block number")
    assert endpoint.methods == ["eth_blockNumber"]


def test_a_connection_never_made_is_said_as_such():
    """A port nothing listens on: the send fails as never having reached the endpoint
    (RpcNotReached), so a push can say its epoch was never sent."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    w3 = _w3(f"http://127.0.0.1:{port}")
    with pytest.raises(RpcNotReached, match="could not be reached"):
        bounded(lambda: w3.eth.send_raw_transaction(b"\x01"), "sending a transaction")


class _LogReader:
    """A stand-in anchor whose Epoch-event read is one bounded call to the endpoint."""

    def __init__(self, url: str) -> None:
        self.w3 = _w3(url)

    def epoch_log(self, owner: str, space: str, seq: int, block: int) -> int:
        return bounded(lambda: self.w3.eth.block_number, "reading an epoch log")


def test_a_walks_log_read_repeats_a_refusal_not_a_timeout(endpoint, monkeypatch):
    """The walk asks a log read once more only when the endpoint answered with a refusal
    (a 429: RpcErrorAnswer). A read that timed out was already tried three times by the
    provider: the walk raises it at once, where it asked again (six timeouts in all)."""
    from kint.chain.rpc import RpcErrorAnswer
    from kint.tenant_worker import walk_history

    monkeypatch.setattr(walk_history, "LOG_RETRY_S", 0.0)
    reader = _LogReader(endpoint.url)
    endpoint.fail, endpoint.how = 3, "late"
    with pytest.raises(RpcUnavailable, match="did not answer") as failed:
        walk_history.epoch_log_retried(reader, "owner", "space", 2, 7)  # type: ignore[arg-type]
    assert not isinstance(failed.value, RpcErrorAnswer)
    assert endpoint.methods == ["eth_blockNumber"] * 3

    endpoint.methods.clear()
    endpoint.fail, endpoint.how = 1, "429"
    assert walk_history.epoch_log_retried(reader,  # type: ignore[arg-type]
                                          "owner", "space", 2, 7) == 16
    assert endpoint.methods == ["eth_blockNumber"] * 2


def test_the_timeout_settings_text_says_which_answers_are_asked_again():
    """docs/settings.md (made from the schema) said an answer is never tried again, while
    a pull's history walk asks a log read the endpoint refused once more
    (walk_history.epoch_log_retried): the text names that one exception, with its pause,
    and the provider's pauses as they are."""
    from kint.chain.rpc import RETRY_PAUSES_S
    from kint.settings.schema import V030_DEPARTURES
    from kint.tenant_worker.walk_history import LOG_RETRY_S

    text = V030_DEPARTURES["KINT_RPC_TIMEOUT"]
    assert "never tried again" not in text
    assert ("except by a pull's history walk, which asks a log read the endpoint refused so "
            "once more after a second") in text and LOG_RETRY_S == 1.0
    assert f"after {RETRY_PAUSES_S[0]:g} s and then {RETRY_PAUSES_S[1]:g} s" in text
