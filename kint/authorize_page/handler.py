"""One request to the page server of `kint authorize page` (server.py): where it is routed,
what it is refused, and the headers every answer carries.

The reasons behind each refusal are server.py's docstring: a path without the token gets a
bare 404 and prints nothing; a request under the token from another `Host`, `Origin` or
site is refused and noted; the one result is a small same-origin JSON body naming the
owner's transaction; every request has one deadline from its connection. The page object
(server.AuthorizePage) keeps the token, the one result and the files; this module only
answers requests with them.
"""

from __future__ import annotations

import http.server
import io
import json
import re
import secrets
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from kint.authorize_page.server import AuthorizePage

# Every path the server answers starts with this, then the token: the page is
# `/kint/<token>`, as v0.3.0 prints it (02-quickstart.md, step 4).
PATH_PREFIX = "/kint/"
MAX_RESULT_BYTES = 4096
_TX = re.compile(r"[A-Za-z0-9:_.\-]{1,256}")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
# What the Base Account SDK reaches from the page (its popup is a window of its own, which
# the page's CSP does not govern). An injected wallet needs none of these.
SDK_CONNECT = ("https://keys.coinbase.com", "https://rpc.wallet.coinbase.com",
               "https://chain-proxy.wallet.coinbase.com", "https://mainnet.base.org")


@dataclass(frozen=True)
class PageResult:
    """What the page reported: the transaction the wallet returned, and from which account."""

    tx: str
    account: str


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


def handler_for(page: AuthorizePage) -> type[http.server.BaseHTTPRequestHandler]:
    """The request handler class for one page: PageHandler bound to it, with the page's
    request timeout as the socket's."""
    return type("Handler", (PageHandler,), {"page": page, "timeout": page.request_timeout_s})


class PageHandler(http.server.BaseHTTPRequestHandler):
    """Answers one connection for the page it is bound to (`handler_for`)."""

    page: AuthorizePage
    server_version = "kint"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    # `timeout` (set by handler_for) is the socket's, for what is written back; what is
    # read shares one deadline (`setup`). A request line or header that does not come in
    # time ends the connection (http.server's own handling); a body, in do_POST.

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the reader setup() made: replaced by one with a deadline
        self.rfile = io.BufferedReader(_DeadlineReader(
            self.connection, time.monotonic() + self.page.request_timeout_s,
            self.page.request_timeout_s))

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Silent: a request line carries the token."""

    # -- plumbing -----------------------------------------------------------------------

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

    def _route(self) -> str | None:
        """What follows the page's own path `/kint/<token>` ("" for the page, "/<name>" for
        what is below it), or None once refused; the host must be ours.

        The token first: a request without it is a bare 404 and leaves no line on the
        waiting terminal, so a local user who cannot name the page cannot print there
        either. Only a request that knows the token is checked for its `Host` (a
        DNS-rebinding page that learnt the URL sends its own host name)."""
        path = urlsplit(self.path).path
        token, slash, below = path[len(PATH_PREFIX):].partition("/")
        if not path.startswith(PATH_PREFIX) or not self.page.token_matches(token):
            self._send(404, b"not found\n")
            return None
        if self.headers.get("Host") != f"127.0.0.1:{self.page.port}":
            # Noted before the answer goes out, as every other refusal is: whoever
            # reads the 403 may look at the refusals at once.
            self.page.refused(f"Host {_shown(self.headers.get('Host'))} is not this server's")
            self._send(403, b"wrong host\n")
            return None
        return slash + below

    def _refuse(self, status: int, why: str) -> None:
        self.page.refused(why)
        body = json.dumps({"ok": False, "error": why}).encode()
        self._send(status, body, "application/json")

    # -- GET: the page and its files ------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802
        rest = self._route()
        if rest is None:
            return
        if rest == "":
            self._send_page()
            return
        asset = self.page.asset(rest[1:])
        if asset is None:
            self._send(404, b"not found\n")
            return
        self._send(200, *asset)

    def _send_page(self) -> None:
        """The page itself, under a CSP nonce of its own, framed by nobody."""
        nonce = secrets.token_urlsafe(18)
        self._send(200, self.page.page_html(nonce), "text/html; charset=utf-8", {
            "Content-Security-Policy": content_security_policy(nonce),
            "X-Frame-Options": "DENY",
            # The Base Account SDK talks to its popup through window.opener.
            "Cross-Origin-Opener-Policy": "same-origin-allow-popups",
            "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
        })

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    # -- POST: the one result -------------------------------------------------------------

    def do_POST(self) -> None:  # noqa: N802
        rest = self._route()
        if rest is None:
            return
        if rest != "/result":
            self._send(404, b"not found\n")
            return
        length = self._result_length()
        if length is None:
            return
        try:
            raw = self.rfile.read(length)
        except OSError:  # the body did not come in time
            self.close_connection = True
            return
        result = _parse_result(raw, self.page.request.owner)
        if isinstance(result, str):
            self._refuse(400, result)
            return
        if not self.page.accept(result):
            self._send(409, b'{"ok":false,"error":"a result was already received"}',
                       "application/json")
            return
        self._send(200, b'{"ok":true}', "application/json")

    def _result_length(self) -> int | None:
        """The result's announced length, or None once it is refused (and noted): from
        another origin or site (another page open in the browser cannot end the wait), not
        JSON, or empty, unsized or larger than MAX_RESULT_BYTES (before a byte is read)."""
        origin = self.headers.get("Origin")
        if origin != self.page.origin:
            self._refuse(403, f"Origin {_shown(origin)} is not the page's {self.page.origin}")
            return None
        site = self.headers.get("Sec-Fetch-Site")
        if site != "same-origin":
            self._refuse(403, f"Sec-Fetch-Site {_shown(site)} is not same-origin")
            return None
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            self._refuse(415, f"Content-Type {_shown(ctype)} is not application/json")
            return None
        try:
            length = int(self.headers.get("Content-Length") or "-1")
        except ValueError:
            length = -1
        if not 0 < length <= MAX_RESULT_BYTES:
            self._refuse(413, "the body is empty, unsized or too large")
            return None
        return length

    def do_PUT(self) -> None:  # noqa: N802
        self._send(405, b"method not allowed\n")

    do_DELETE = do_PATCH = do_OPTIONS = do_PUT


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
