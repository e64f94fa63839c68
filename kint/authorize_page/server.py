"""The one-shot loopback server behind `kint authorize page`.

Why it is built this way:

- It binds 127.0.0.1 on a port the OS picks, and every path starts with a 32-byte random
  token (64 hex characters), so another local user or a web page cannot guess where it is.
  A request for any other path gets a bare 404 and prints nothing; one under the token
  whose `Host` is not this server's own address is refused (a DNS-rebinding page would
  send its own host name).
- It accepts exactly one result: a same-origin `POST /<token>/result` with a JSON body
  naming the transaction the wallet sent. `Origin` must be the page's own origin and
  `Sec-Fetch-Site` must be `same-origin`, so another site open in the same browser cannot
  end the wait with a forged result. Even a forged result would prove nothing: the CLI then
  asks the chain (`canWrite`) and believes only that.
- Nothing secret ever crosses the page: it carries the owner and session key addresses, the
  expiry and the setSessionKey calldata, all public. No derive signature, passphrase or key.
- No script comes from elsewhere. The page's scripts are files of this package, served
  from this server under a per-page CSP nonce; the Base Account SDK is a pinned copy
  (`SDK_*` below, the exact file npm publishes) loaded only when the owner picks it, with
  a Subresource Integrity check, and only if its SHA-256 is the pinned one.
- Every response says `no-store` and `no-referrer`, so the token is neither cached nor sent
  to the wallet's own pages.
- Each connection has `REQUEST_TIMEOUT_S` to send its whole request, counted from when it
  connects, not from its last byte: any local process can open connections to the port
  before it knows the token, and one that sends nothing, less body than it announced, or
  a byte now and then (which would reset a per-read timeout) must not hold a thread of the
  CLI until the page times out.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import io
import json
import re
import secrets
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any, Callable
from urllib.parse import urlsplit

# The Base Account SDK as published on npm: @base-org/account 2.5.10, dist/base-account.min.js
# (Apache-2.0; its licence ships beside it). The npm tarball's integrity is
# sha512-O/wRk4+RValIKkXuBYm7jvTf+p5GEml+qhFS5anqpWSqwoIHuUxPJMXaUCmRiChr6DweUOhQwspVYkiYJFtl9g==
SDK_PACKAGE = "@base-org/account"
SDK_VERSION = "2.5.10"
SDK_FILE = f"base-account-{SDK_VERSION}.min.js"
SDK_SHA256 = "fd307e471e738cc16604aa5d5263d7505d6f6b76e45355c977e8c67e985f52fe"

MAX_RESULT_BYTES = 4096
# Seconds a connection may take to send its request line, headers and body.
REQUEST_TIMEOUT_S = 10.0
_TX = re.compile(r"[A-Za-z0-9:_.\-]{1,256}")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
# What the Base Account SDK reaches from the page (its popup is a window of its own, which
# the page's CSP does not govern). An injected wallet needs none of these.
SDK_CONNECT = ("https://keys.coinbase.com", "https://rpc.wallet.coinbase.com",
               "https://chain-proxy.wallet.coinbase.com", "https://mainnet.base.org")
_ASSETS = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8",
           SDK_FILE: "text/javascript; charset=utf-8"}


@dataclass(frozen=True)
class PageRequest:
    """What the page asks the wallet to do: all public values."""

    owner: str
    key: str
    expiry: int
    chain_id: int
    anchor: str
    calldata: str  # 0x-hex of setSessionKey(key, expiry)


@dataclass(frozen=True)
class PageResult:
    """What the page reported: the transaction the wallet returned, and from which account."""

    tx: str
    account: str


def _static(name: str) -> bytes:
    return resources.files("kint.authorize_page").joinpath("static", name).read_bytes()


def sdk_bytes() -> bytes | None:
    """The pinned SDK, or None when the packaged file is missing or not the pinned bytes."""
    try:
        data = _static(SDK_FILE)
    except (FileNotFoundError, OSError):
        return None
    return data if hashlib.sha256(data).hexdigest() == SDK_SHA256 else None


def _json_for_html(value: Any) -> str:
    """JSON that cannot close the <script type="application/json"> block it sits in."""
    text = json.dumps(value, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


class AuthorizePage:
    """One page, one result. `start()` returns the URL; `wait()` the result or None after
    the timeout; `close()` stops the server (always call it)."""

    def __init__(self, request: PageRequest,
                 on_refused: Callable[[str], None] | None = None,
                 request_timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.request = request
        self.request_timeout_s = request_timeout_s
        self.token = secrets.token_bytes(32).hex()
        self._on_refused = on_refused or (lambda why: None)
        self._result: PageResult | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._sdk = sdk_bytes()
        self.port = 0

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.origin}/{self.token}/"

    @property
    def sdk_available(self) -> bool:
        return self._sdk is not None

    def start(self) -> str:
        handler = _handler_for(self)
        self._server = _QuietServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.2}, daemon=True,
                                        name="kint-authorize-page")
        self._thread.start()
        return self.url

    def wait(self, timeout_s: float) -> PageResult | None:
        self._done.wait(timeout_s)
        with self._lock:
            return self._result

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> "AuthorizePage":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- what the handler asks ------------------------------------------------------------

    def token_matches(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.encode(), self.token.encode())

    def accept(self, result: PageResult) -> bool:
        """Record the one result; False when one was already taken."""
        with self._lock:
            if self._result is not None:
                return False
            self._result = result
        self._done.set()
        return True

    def refused(self, why: str) -> None:
        self._on_refused(why)

    def page_html(self, nonce: str) -> bytes:
        config = asdict(self.request)
        config["chainId"] = config.pop("chain_id")
        config["resultPath"] = f"/{self.token}/result"
        config["sdk"] = ({"src": f"/{self.token}/{SDK_FILE}", "version": SDK_VERSION,
                          "integrity": "sha384-" + base64.b64encode(
                              hashlib.sha384(self._sdk).digest()).decode()}
                         if self._sdk is not None else None)
        html = _static("page.html").decode("utf-8")
        html = html.replace("{{NONCE}}", nonce)
        return html.replace("{{REQUEST_JSON}}", _json_for_html(config)).encode("utf-8")

    def asset(self, name: str) -> bytes | None:
        if name == SDK_FILE:
            return self._sdk
        return _static(name) if name in _ASSETS else None


class _QuietServer(http.server.ThreadingHTTPServer):
    """The page's server, which prints nothing for a connection that fails.

    socketserver prints a traceback to stderr, the waiting command's terminal, for every
    request whose handler raised: any local process, without the token, could fill the
    terminal by connecting and resetting (a read or write on a reset connection raises).
    A connection's fault is that client's, and the page keeps serving; anything else
    raised in a handler is a fault of kint's, printed as before."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


def content_security_policy(nonce: str) -> str:
    """The page's CSP: scripts and styles only with this response's nonce (the package's
    own files, and the pinned SDK that app.js adds with the same nonce), nothing framed,
    no form posts, no base URL, and network requests to this server and the SDK's hosts."""
    return "; ".join([
        "default-src 'none'",
        f"script-src 'nonce-{nonce}'",
        f"style-src 'nonce-{nonce}'",
        "img-src data:",
        "connect-src 'self' " + " ".join(SDK_CONNECT),
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ])


def _handler_for(page: AuthorizePage) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "kint"
        sys_version = ""
        protocol_version = "HTTP/1.1"
        # The socket's timeout, for what is written back; what is read shares one deadline
        # (`setup`). A request line or header that does not come in time ends the
        # connection (http.server's own handling); a body, in do_POST.
        timeout = page.request_timeout_s

        def setup(self) -> None:
            super().setup()
            self.rfile.close()  # the reader setup() made: replaced by one with a deadline
            self.rfile = io.BufferedReader(_DeadlineReader(
                self.connection, time.monotonic() + page.request_timeout_s,
                page.request_timeout_s))

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Silent: a request line carries the token."""

        # -- plumbing -------------------------------------------------------------------

        def _send(self, status: int, body: bytes = b"", ctype: str = "text/plain; charset=utf-8",
                  extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            headers = {"Content-Type": ctype, "Content-Length": str(len(body)),
                       "Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
                       "X-Content-Type-Options": "nosniff",
                       "Cross-Origin-Resource-Policy": "same-origin",
                       "Connection": "close", **(extra or {})}
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self.close_connection = True

        def _route(self) -> tuple[str, str] | None:
            """(token, rest) of a path under a token, or None; the host must be ours.

            The token first: a request without it is a bare 404 and leaves no line on the
            waiting terminal, so a local user who cannot name the page cannot print there
            either. Only a request that knows the token is checked for its `Host` (a
            DNS-rebinding page that learnt the URL sends its own host name)."""
            parts = urlsplit(self.path).path.split("/", 2)
            if len(parts) < 3 or parts[0] != "" or not page.token_matches(parts[1]):
                self._send(404, b"not found\n")
                return None
            if self.headers.get("Host") != f"127.0.0.1:{page.port}":
                # Noted before the answer goes out, as every other refusal is: whoever
                # reads the 403 may look at the refusals at once.
                page.refused(f"Host {_shown(self.headers.get('Host'))} is not this server's")
                self._send(403, b"wrong host\n")
                return None
            return parts[1], parts[2]

        # -- GET: the page and its files --------------------------------------------------

        def do_GET(self) -> None:  # noqa: N802
            routed = self._route()
            if routed is None:
                return
            _, rest = routed
            if rest == "":
                nonce = secrets.token_urlsafe(18)
                self._send(200, page.page_html(nonce), "text/html; charset=utf-8", {
                    "Content-Security-Policy": content_security_policy(nonce),
                    "X-Frame-Options": "DENY",
                    # The Base Account SDK talks to its popup through window.opener.
                    "Cross-Origin-Opener-Policy": "same-origin-allow-popups",
                    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
                })
                return
            body = page.asset(rest)
            if body is None:
                self._send(404, b"not found\n")
                return
            self._send(200, body, _ASSETS[rest])

        def do_HEAD(self) -> None:  # noqa: N802
            self.do_GET()

        # -- POST: the one result ---------------------------------------------------------

        def do_POST(self) -> None:  # noqa: N802
            routed = self._route()
            if routed is None:
                return
            if routed[1] != "result":
                self._send(404, b"not found\n")
                return
            origin = self.headers.get("Origin")
            if origin != page.origin:
                self._refuse(403, f"Origin {_shown(origin)} is not the page's {page.origin}")
                return
            site = self.headers.get("Sec-Fetch-Site")
            if site != "same-origin":
                self._refuse(403, f"Sec-Fetch-Site {_shown(site)} is not same-origin")
                return
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if ctype != "application/json":
                self._refuse(415, f"Content-Type {_shown(ctype)} is not application/json")
                return
            try:
                length = int(self.headers.get("Content-Length") or "-1")
            except ValueError:
                length = -1
            if not 0 < length <= MAX_RESULT_BYTES:
                self._refuse(413, "the body is empty, unsized or too large")
                return
            try:
                raw = self.rfile.read(length)
            except OSError:  # the body did not come in time
                self.close_connection = True
                return
            result = _parse_result(raw, page.request.owner)
            if isinstance(result, str):
                self._refuse(400, result)
                return
            if not page.accept(result):
                self._send(409, b'{"ok":false,"error":"a result was already received"}',
                           "application/json")
                return
            self._send(200, b'{"ok":true}', "application/json")

        def _refuse(self, status: int, why: str) -> None:
            page.refused(why)
            body = json.dumps({"ok": False, "error": why}).encode()
            self._send(status, body, "application/json")

        def do_PUT(self) -> None:  # noqa: N802
            self._send(405, b"method not allowed\n")

        do_DELETE = do_PATCH = do_OPTIONS = do_PUT

    return Handler


class _DeadlineReader(io.RawIOBase):
    """A connection's reads under one deadline for the whole request. A socket timeout
    alone is per read, so a client sending a byte every few seconds would keep its thread
    for as long as it liked; here each read waits only for what is left, and none is made
    past the deadline. The socket's own timeout is put back after each read, for the
    answer written on it."""

    def __init__(self, sock: socket.socket, deadline: float, write_timeout_s: float) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline
        self._write_timeout_s = write_timeout_s

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not come in time")
        self._sock.settimeout(left)
        try:
            return self._sock.recv_into(buffer)
        finally:
            self._sock.settimeout(self._write_timeout_s)


def _parse_result(raw: bytes, owner: str) -> PageResult | str:
    """The page's report, or why it is refused."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return "the body is not JSON"
    if not isinstance(data, dict):
        return "the body is not a JSON object"
    tx, account = data.get("tx"), data.get("account")
    if not isinstance(tx, str) or not _TX.fullmatch(tx):
        return "tx is not a transaction identifier"
    if not isinstance(account, str) or not _ADDRESS.fullmatch(account):
        return "account is not an address"
    if account.lower() != owner.lower():
        return f"account {account} is not the owner {owner}"
    return PageResult(tx=tx, account=account)


def _shown(value: str | None) -> str:
    """A header value as it may be printed: quoted, control characters escaped, cut short."""
    if value is None:
        return "(none)"
    return repr(value[:120])
