"""A loopback JSON-RPC proxy in front of the test's real anvil, whose behaviour the test
switches while kint's workers talk through it (docs/faults.md: faults made for real).

Modes (`RpcProxy.set_mode`):

- `forward`: every request goes to anvil and its answer comes back unchanged.
- `hang`: the connection is accepted and the request read, then nothing is ever answered:
  the handler sleeps until `release()` (or a mode change, or `stop()`), bounded by
  `max_hang_s` so the test suite can always finish. The client's own timeout is what ends
  the call on its side.
- `hang_methods` (`methods=[...]`): `hang` for a request calling one of those methods,
  `forward` for the rest.
- `error_methods` (`methods=[...]`, `message=TEXT`): a request calling one of those methods
  is answered with a JSON-RPC error object carrying TEXT (an endpoint that refuses, or
  lies about why); the rest is forwarded. With `tx=HASH`, only a request whose first
  parameter is that transaction is refused (one epoch's calldata, say).
- `delay` (`seconds=S`): every request forwarded S seconds late (a slow endpoint that
  still answers).
- `delay_methods` (`methods=[...]`, `seconds=S`): `delay` for a request calling one of
  those methods, `forward` for the rest: a call held at one chosen step. A mode change
  (`forward()`) lets a held request through at once.
- `stale_head`: the anchor's `head(owner, space)` eth_call is answered as it was at an
  older block (`block=N`): a real older head, read from anvil's historical state, and
  eth_blockNumber answers N, as a node that lags answers it. With `reads=K`, only the next
  K head reads are answered so, and the rest (eth_blockNumber included) forwarded (a head
  read that raced a transaction being mined).
- `same_seq_other_digest`: `head()` answers the real seq and block with another digest.
- `bad_calldata`: `eth_getTransactionByHash` of a push returns the transaction with a byte
  of its ciphertext argument's encrypted body altered, so keccak(ct) is not the event's
  digest. With `tx=HASH`, only that push is altered.
- `unmined`: `eth_getTransactionReceipt` is answered null, as for a transaction no block
  holds yet (a slow block): a push sent meanwhile waits for its receipt until the mode
  changes, while anvil has in fact mined it.
- `tampered_ciphertext` (`tx=HASH`): a consistent liar. The push `tx` comes back with a
  byte of its ciphertext's encrypted body altered, and the digest of the real ciphertext is
  replaced by the digest of the altered one wherever it appears (the head, the Epoch log),
  so every hash the client can check agrees and only the AES-GCM tag can tell. With
  `envelope=BYTES`, those bytes are served as the ciphertext instead (an epoch the test
  sealed itself, that opens and says what the chain does not).
- `broken_prev` (`tx=HASH`): the Epoch log of push `tx` names another prev (a digest no
  epoch has), so that epoch does not chain on the one before it; the rest is forwarded.

- `pruned` (`before=N`): a node that keeps no history below block N, as a pruned node
  serves it: an `eth_getLogs` whose range starts below N is answered with an error object
  (`message=TEXT`), or with no logs at all (`logs="empty"`), or served (`logs="kept"`: a
  node that keeps logs but no old transactions), and `eth_getTransactionByHash` of a
  transaction mined below N is answered null; the rest is forwarded.
- `rate_limited` (`methods=[...]`, `count=K`): the next K requests calling one of those
  methods are answered HTTP 429 Too Many Requests with a text body, as a metered endpoint
  answers a client over its quota; the rest (and every request after the K) is forwarded.

- `other_chain` (`chain_id=N`): an endpoint now serving another network, where the
  contract is not deployed: eth_chainId answers N, eth_call and eth_getCode answer empty
  bytes, eth_getLogs no logs, eth_getTransactionCount 0, and eth_sendRawTransaction an
  error object (a transaction signed for another chain id); the rest is forwarded. With
  `true_ids=K`, the first K eth_chainId reads since the mode was set are forwarded: the
  endpoint changed network after a command's own chain id check (kint.commands.onchain).

- `close_after` (`methods=[...]`): the first request calling one of those methods is
  answered, but only once the proxy has stopped listening, so the next connection is
  refused (an endpoint gone between two calls: a request that never left the client);
  `reopen()` listens again on the same port, forwarding.

- `no_data` (`selector=0x...`, `count=K`): the next K eth_calls of that function are
  answered with no data (`"0x"`), as a load-balanced endpoint's node that lags behind, or
  holds no state for its "latest" yet, answers a view; the rest is forwarded.

Any mode also takes `chain_id=N`: eth_chainId is answered N, as an endpoint of chain N
would answer (the rest as the mode says).

Lies are rewrites of chosen requests or responses; anything not matched is forwarded as
is. Batch requests (a JSON array) are handled element by element. The server is a
threaded `http.server` on 127.0.0.1 port 0; every response closes its connection, so no
handler thread outlives its request, and `stop()` joins them all.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

from eth_hash.auto import keccak

from kint.custody.wraps import WRAP_LEN
from kint.epochs.envelope import HEADER_LEN

HEAD_SELECTOR = "0x" + keccak(b"head(address,bytes32)")[:4].hex()
PUSH_SELECTOR = "0x" + keccak(b"push(address,bytes32,bytes32,bytes)")[:4].hex()
# In push calldata: selector, owner, space, prev, offset of the bytes, their length.
CIPHERTEXT_OFFSET = 4 + 5 * 32
# In an Epoch log's data (seq, prev, digest, prevBlock), where prev's 32 bytes start.
LOG_PREV_OFFSET = 32
MODES = ("forward", "hang", "hang_methods", "delay", "delay_methods", "stale_head",
         "same_seq_other_digest", "bad_calldata", "tampered_ciphertext", "broken_prev",
         "unmined", "error_methods", "pruned", "rate_limited", "other_chain", "close_after",
         "no_data")
THREAD_PREFIX = "kint-test-rpc-proxy"
_ALL: list["RpcProxy"] = []


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]


def _calls_one_of(items: list[Any], methods: list[str]) -> bool:
    """Whether a request (its items, one for a single call) calls one of `methods`."""
    return any(isinstance(i, dict) and i.get("method") in methods for i in items)


def header_length(envelope: bytes) -> int:
    """The clear header's length: 59 fixed bytes (the last one n_wraps), then 77 per wrap.
    What follows it is the AES-GCM ciphertext."""
    return HEADER_LEN + WRAP_LEN * envelope[HEADER_LEN - 1]


def push_ciphertext(data: bytes) -> tuple[int, int]:
    """(start, length) of the `ct` argument in push calldata."""
    length = int.from_bytes(data[CIPHERTEXT_OFFSET - 32:CIPHERTEXT_OFFSET], "big")
    return CIPHERTEXT_OFFSET, length


# What an endpoint of another network answers (mode `other_chain`; eth_chainId is the
# mode's own number).
_OTHER_CHAIN: dict[str, dict[str, Any]] = {
    "eth_chainId": {}, "eth_call": {"result": "0x"}, "eth_getCode": {"result": "0x"},
    "eth_getLogs": {"result": []}, "eth_getTransactionCount": {"result": "0x0"},
    "eth_sendRawTransaction": {"error": {"code": -32000,
                                         "message": "invalid chain id for signer"}}}


def _from_block(params: Any) -> int:
    """The first block an eth_getLogs filter asks for (0 when it names none, or a tag)."""
    if isinstance(params, list) and params and isinstance(params[0], dict):
        start = params[0].get("fromBlock")
        if isinstance(start, str) and start.startswith("0x"):
            return int(start, 16)
        if isinstance(start, int):
            return start
    return 0


def _answer_429(handler: BaseHTTPRequestHandler) -> None:
    """An HTTP 429 with a text body and Retry-After, as a metered endpoint refuses a
    client over its rate."""
    body = b"Too Many Requests: rate limit exceeded"
    handler.send_response(429)
    handler.send_header("Content-Type", "text/plain")
    handler.send_header("Retry-After", "1")
    handler.send_header("Content-Length", str(len(body)))
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.wfile.write(body)


def _call_data(params: Any) -> str:
    if isinstance(params, list) and params and isinstance(params[0], dict):
        return str(params[0].get("data") or params[0].get("input") or "")
    return ""


def _names_tx(item: dict[str, Any], tx: str | None) -> bool:
    """Whether a request is about transaction `tx` (its first parameter), or `tx` is None
    (a mode meant for every request of its method)."""
    params = item.get("params")
    return tx is None or (isinstance(params, list) and bool(params)
                          and _bare(params[0]) == _bare(tx))


def _bare(h: object) -> str:
    """A hash as lower-case hex without 0x, however an answer or a test spelled it."""
    return str(h).lower().removeprefix("0x")


def post_json(host: str | None, port: int | None, body: bytes, path: str = "/") -> bytes:
    """POST a JSON-RPC body to the upstream endpoint (the test's anvil); its raw answer.
    The proxies of the tests forward through this."""
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request("POST", path or "/", body=body, headers={"Content-Type": "application/json"})
        return conn.getresponse().read()
    finally:
        conn.close()


def answer_json(handler: BaseHTTPRequestHandler, answer: bytes, *, close: bool = False) -> None:
    """Write `answer` as the handler's 200 JSON response (`close`: and end the connection)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(answer)))
    if close:
        handler.send_header("Connection", "close")
    handler.end_headers()
    handler.wfile.write(answer)


def closed_port_url() -> str:
    """The URL of a loopback port nothing listens on (bound, then let go): a connection to
    it is refused at once, an endpoint that never answers without a hang."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def json_post_handler(serve: Callable[[BaseHTTPRequestHandler, dict], None]
                      ) -> type[BaseHTTPRequestHandler]:
    """A handler class for a LoopbackServer whose every POST is one JSON-RPC request,
    decoded and handed to `serve(handler, request)` to answer; quiet in the test's output."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            serve(self, json.loads(self.rfile.read(int(self.headers["Content-Length"]))))

        def log_message(self, fmt: str, *args: object) -> None:
            pass

    return Handler


def answer_status(handler: BaseHTTPRequestHandler, status: int) -> None:
    """Answer with HTTP `status` and no body (a 429, a 500)."""
    handler.send_response(status)
    handler.send_header("Content-Length", "0")
    handler.end_headers()


class LoopbackServer:
    """A test's own HTTP endpoint on 127.0.0.1: `handler` serves each request on a thread
    of its own, from now until `stop`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class ScriptedEndpoint(LoopbackServer):
    """Answers `answers[method]`: a result, {"error": {...}} for an error object, or an int
    for that HTTP status with no body."""

    def __init__(self) -> None:
        self.answers: dict[str, Any] = {"eth_gasPrice": "0x3b9aca00"}
        self.sent: list[str] = []
        self._lock = threading.Lock()
        super().__init__(json_post_handler(self._serve))

    def _serve(self, handler: BaseHTTPRequestHandler, request: dict) -> None:
        with self._lock:
            if request["method"] == "eth_sendRawTransaction":
                self.sent.append(request["params"][0])
            answer = self.answers.get(request["method"], "0x0")
        if isinstance(answer, int):
            answer_status(handler, answer)
            return
        body = {"error": answer["error"]} if isinstance(answer, dict) else {"result": answer}
        answer_json(handler, json.dumps({"jsonrpc": "2.0", "id": request["id"],
                                         **body}).encode())

    def refuse_sends(self, message: str) -> None:
        self.answers["eth_sendRawTransaction"] = {"error": {"code": -32000,
                                                            "message": message}}


class RpcProxy:
    def __init__(self, upstream: str, max_hang_s: float = 30.0) -> None:
        parts = urlsplit(upstream)
        if parts.hostname not in ("127.0.0.1", "localhost"):
            raise ValueError(f"the proxy only fronts a loopback endpoint, not {upstream}")
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port or 80
        self.max_hang_s = max_hang_s
        self._lock = threading.Lock()
        self._mode = "forward"
        self._stale_reads = 0
        self._limited = 0
        self._params: dict[str, Any] = {}
        self._release = threading.Event()
        self.calls: list[str] = []  # every JSON-RPC method seen, in order
        self.lies: list[str] = []  # what was rewritten, one line each
        self.hanging = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                proxy._handle(self)

            def log_message(self, fmt: str, *args: Any) -> None:
                pass

        self._handler_class = Handler
        self._server = self._listen(0)
        self._thread: threading.Thread | None = None
        self._handlers: set[threading.Thread] = set()
        _ALL.append(self)

    def _listen(self, port: int) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class)
        server.daemon_threads = False
        server.block_on_close = True  # server_close() joins every handler thread
        return server

    # -- control -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mode(self) -> str:
        return self._mode

    def start(self) -> "RpcProxy":
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name=f"{THREAD_PREFIX}-{self.port}", daemon=True)
        self._thread.start()
        return self

    def set_mode(self, mode: str, **params: Any) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown proxy mode {mode!r}")
        if mode == "tampered_ciphertext":
            params = {**params, **self._prepare_tamper(params["tx"], params.get("envelope"))}
        with self._lock:
            self.release()
            self._release = threading.Event()
            self._mode, self._params = mode, params
            self._stale_reads = 0
            self._limited = 0

    def forward(self) -> None:
        self.set_mode("forward")

    def repoint(self, upstream: str) -> None:
        """Forward to another loopback endpoint from now on, on the same port: an endpoint a
        space keeps that now reaches another node (another devchain, its own state)."""
        parts = urlsplit(upstream)
        if parts.hostname not in ("127.0.0.1", "localhost"):
            raise ValueError(f"the proxy only fronts a loopback endpoint, not {upstream}")
        with self._lock:
            self.upstream_host, self.upstream_port = parts.hostname, parts.port or 80

    @contextmanager
    def answering_as(self, chain_id: int) -> Iterator[None]:
        """Forwarding, eth_chainId answered `chain_id` (recorded as a lie), within; then
        forwarding as anvil answers. For a connect through the proxy of a space configured
        for Base (off the devchain's own endpoint): connect refuses an endpoint of another
        chain, while what a test shows after it (a pull naming anvil's chain) needs the
        real answer."""
        self.set_mode("forward", chain_id=chain_id)
        try:
            yield
        finally:
            self.forward()

    def reopen(self) -> None:
        """Listen again on the same port after `close_after` closed it, forwarding."""
        if self._server.socket.fileno() != -1:
            return
        self.forward()
        self._server = self._listen(self.port)
        self.start()

    def _stop_listening(self) -> None:
        """From a handler thread: end the accept loop and close the listening socket, so
        that a connection made from now on is refused."""
        self._server.shutdown()
        self._server.socket.close()

    def release(self) -> None:
        """Wake every hung handler (it closes its connection without an answer)."""
        self._release.set()

    def threads(self) -> list[threading.Thread]:
        with self._lock:
            handlers = list(self._handlers)
        return ([self._thread] if self._thread is not None else []) + handlers

    def stop(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()  # joins the handler threads
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> "RpcProxy":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- upstream ----------------------------------------------------------------------

    def upstream(self, body: bytes) -> bytes:
        with self._lock:  # read as one pair: `repoint` changes both under the lock
            host, port = self.upstream_host, self.upstream_port
        return post_json(host, port, body)

    def upstream_call(self, method: str, params: list[Any]) -> Any:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        answer = json.loads(self.upstream(body.encode()))
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def _prepare_tamper(self, tx_hash: str, envelope: bytes | None) -> dict[str, Any]:
        tx_hash = tx_hash if tx_hash.startswith("0x") else "0x" + tx_hash
        tx = self.upstream_call("eth_getTransactionByHash", [tx_hash])
        data = bytes.fromhex(tx["input"][2:])
        if "0x" + data[:4].hex() != PUSH_SELECTOR:
            raise ValueError(f"{tx_hash} is not a push")
        _, length = push_ciphertext(data)
        original = data[CIPHERTEXT_OFFSET:CIPHERTEXT_OFFSET + length]
        tampered = (envelope if envelope is not None
                    else _flip(original, header_length(original) + 7))  # the encrypted body
        size = len(tampered).to_bytes(32, "big")
        padding = bytes(-len(tampered) % 32)
        new_input = data[:CIPHERTEXT_OFFSET - 32] + size + tampered + padding
        return {"tx": tx_hash.lower(), "input": "0x" + new_input.hex(),
                "digest": keccak(original).hex(), "fake_digest": keccak(tampered).hex()}

    # -- serving -----------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        me = threading.current_thread()
        with self._lock:
            self._handlers.add(me)
        try:
            self._serve(handler)
        finally:
            with self._lock:
                self._handlers.discard(me)

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length)
        with self._lock:
            mode, params, release = self._mode, dict(self._params), self._release
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        items = request if isinstance(request, list) else [request]
        with self._lock:
            self.calls += [str(i.get("method")) if isinstance(i, dict) else "?" for i in items]
        hung = mode == "hang" or (mode == "hang_methods"
                                  and _calls_one_of(items, params["methods"]))
        if hung:
            with self._lock:
                self.hanging += 1
            try:
                release.wait(self.max_hang_s)
            finally:
                with self._lock:
                    self.hanging -= 1
            return  # close the connection without a word
        if mode == "rate_limited" and self._take_rate_limited(items, params):
            try:
                _answer_429(handler)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if mode == "close_after" and _calls_one_of(items, params["methods"]):
            with self._lock:
                self._mode, self._params = "forward", {}
            self._lie(f"stopped listening after {[i.get('method') for i in items]}")
            self._stop_listening()
        if mode == "delay" or (mode == "delay_methods" and _calls_one_of(items,
                                                                          params["methods"])):
            release.wait(float(params["seconds"]))
        if request is None or (isinstance(request, list) and not request):
            answer = self.upstream(body)
        elif isinstance(request, list):
            answer = json.dumps([self._one(item, mode, params) for item in request]).encode()
        else:
            answer = json.dumps(self._one(request, mode, params)).encode()
        try:
            answer_json(handler, answer, close=True)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _take_stale_read(self, params: dict[str, Any]) -> bool:
        """Whether this head read is one `stale_head` answers from the older block: every
        one, or the first `reads` since the mode was set."""
        if params.get("reads") is None:
            return True
        with self._lock:
            if self._stale_reads >= int(params["reads"]):
                return False
            self._stale_reads += 1
            return True

    def _take_true_id(self, params: dict[str, Any]) -> bool:
        """Whether this eth_chainId read is one `other_chain` forwards: one of the first
        `true_ids` since the mode was set (counted as `stale_head`'s reads are)."""
        with self._lock:
            if self._stale_reads >= int(params.get("true_ids", 0)):
                return False
            self._stale_reads += 1
            return True

    def _take_rate_limited(self, items: list[Any], params: dict[str, Any]) -> bool:
        """Whether this request is one `rate_limited` answers 429: it calls one of the
        methods, and fewer than `count` have been answered so since the mode was set."""
        if not _calls_one_of(items, params["methods"]):
            return False
        with self._lock:
            if self._limited >= int(params.get("count", 1)):
                return False
            self._limited += 1
            self.lies.append(f"429 for {[i.get('method') for i in items if isinstance(i, dict)]}")
            return True

    def _take_no_data(self, params: dict[str, Any]) -> bool:
        """Whether this call is one `no_data` empties: one of the first `count` since the
        mode was set (counted as `stale_head`'s reads are)."""
        with self._lock:
            if self._stale_reads >= int(params["count"]):
                return False
            self._stale_reads += 1
            return True

    def _lie(self, what: str) -> None:
        with self._lock:
            self.lies.append(what)

    def _one(self, item: Any, mode: str, params: dict[str, Any]) -> Any:
        if not isinstance(item, dict):
            return json.loads(self.upstream(json.dumps(item).encode()))
        method = item.get("method")
        is_head = method == "eth_call" and _call_data(item.get("params")).startswith(HEAD_SELECTOR)
        if mode == "stale_head" and is_head and self._take_stale_read(params):
            old = dict(item)
            old["params"] = [item["params"][0], hex(int(params["block"]))]
            self._lie(f"head read at block {params['block']}")
            return json.loads(self.upstream(json.dumps(old).encode()))
        if (mode == "stale_head" and method == "eth_blockNumber"
                and params.get("reads") is None):
            self._lie(f"eth_blockNumber: {params['block']}")
            return {"jsonrpc": "2.0", "id": item.get("id"), "result": hex(int(params["block"]))}
        if (mode == "error_methods" and method in params["methods"]
                and _names_tx(item, params.get("tx"))):
            self._lie(f"{method}: error {params['message']!r}")
            return {"jsonrpc": "2.0", "id": item.get("id"),
                    "error": {"code": -32000, "message": params["message"]}}
        if (mode == "pruned" and method == "eth_getLogs" and params.get("logs") != "kept"
                and _from_block(item.get("params")) < int(params["before"])):
            if params.get("logs") == "empty":
                self._lie(f"eth_getLogs: no logs below block {params['before']}")
                return {"jsonrpc": "2.0", "id": item.get("id"), "result": []}
            self._lie(f"eth_getLogs: pruned below block {params['before']}")
            return {"jsonrpc": "2.0", "id": item.get("id"),
                    "error": {"code": -32000, "message": params.get(
                        "message", "pruned history unavailable")}}
        if mode == "other_chain" and method == "eth_chainId" and self._take_true_id(params):
            return json.loads(self.upstream(json.dumps(item).encode()))
        if mode == "other_chain" and method in _OTHER_CHAIN:
            self._lie(f"{method}: on chain {params['chain_id']}")
            answered = _OTHER_CHAIN[method]
            if method == "eth_chainId":
                answered = {"result": hex(params["chain_id"])}
            return {"jsonrpc": "2.0", "id": item.get("id"), **answered}
        if method == "eth_chainId" and params.get("chain_id") is not None:
            self._lie(f"eth_chainId: {params['chain_id']}")
            return {"jsonrpc": "2.0", "id": item.get("id"), "result": hex(params["chain_id"])}
        if (mode == "no_data" and method == "eth_call"
                and _call_data(item.get("params")).startswith(params["selector"])
                and self._take_no_data(params)):
            self._lie(f"eth_call {params['selector']}: no data")
            return {"jsonrpc": "2.0", "id": item.get("id"), "result": "0x"}
        if mode == "unmined" and method == "eth_getTransactionReceipt":
            return {"jsonrpc": "2.0", "id": item.get("id"), "result": None}
        answer = json.loads(self.upstream(json.dumps(item).encode()))
        result = answer.get("result") if isinstance(answer, dict) else None
        if mode == "same_seq_other_digest" and is_head and isinstance(result, str):
            raw = bytes.fromhex(result[2:])  # head() returns (digest, seq, blockNumber)
            other = keccak(b"kint-test-lie" + raw[:32])
            answer["result"] = "0x" + (other + raw[32:]).hex()
            self._lie(f"head digest {raw[:32].hex()[:12]} -> {other.hex()[:12]}")
        elif (mode == "bad_calldata" and method == "eth_getTransactionByHash"
              and isinstance(result, dict)
              and str(result.get("input", "")).startswith(PUSH_SELECTOR)
              and _names_tx(item, params.get("tx"))):
            data = bytes.fromhex(result["input"][2:])
            at = CIPHERTEXT_OFFSET + header_length(data[CIPHERTEXT_OFFSET:]) + 7
            result["input"] = "0x" + _flip(data, at).hex()
            self._lie(f"calldata of {result.get('hash')} altered")
        elif (mode == "pruned" and method == "eth_getTransactionByHash"
              and isinstance(result, dict) and result.get("blockNumber") is not None
              and int(result["blockNumber"], 16) < int(params["before"])):
            answer["result"] = None
            self._lie(f"eth_getTransactionByHash: {result.get('hash')} pruned")
        elif (mode == "broken_prev" and method == "eth_getLogs" and isinstance(result, list)):
            for entry in result:
                if _bare(entry.get("transactionHash")) == _bare(params["tx"]):
                    data = bytes.fromhex(str(entry["data"])[2:])
                    at = LOG_PREV_OFFSET
                    other = keccak(b"kint-test-lie" + data[at:at + 32])
                    entry["data"] = "0x" + (data[:at] + other + data[at + 32:]).hex()
                    self._lie(f"eth_getLogs: prev of {params['tx']} -> {other.hex()[:12]}")
        elif mode == "tampered_ciphertext" and result is not None:
            if method == "eth_getTransactionByHash" and isinstance(result, dict) and \
                    str(result.get("hash", "")).lower() == params["tx"]:
                result["input"] = params["input"]
                self._lie(f"ciphertext of {params['tx']} tampered")
            elif method in ("eth_call", "eth_getLogs"):
                text = json.dumps(result)
                if params["digest"] in text:
                    answer["result"] = json.loads(text.replace(params["digest"],
                                                               params["fake_digest"]))
                    self._lie(f"{method}: digest {params['digest'][:12]} -> "
                              f"{params['fake_digest'][:12]}")
        return answer


def live_proxy_threads() -> list[threading.Thread]:
    """Threads of any proxy made in this process that still run (a module's teardown
    asserts there are none)."""
    out: list[threading.Thread] = []
    for proxy in _ALL:
        out += [t for t in proxy.threads() if t.is_alive()]
    return out

