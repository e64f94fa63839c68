"""The one-shot loopback server behind `kint authorize page`: the page (its token, its
one result, the files it serves) and the server; each request is answered in handler.py.

Why it is built this way:

- It binds 127.0.0.1 on a port the OS picks, and every path starts with `/kint/` and a
  32-byte random token (64 hex characters), so another local user or a web page cannot
  guess where it is. The page itself is `/kint/<token>` (the URL v0.3.0 prints,
  02-quickstart.md, step 4) and its files and result sit below it. A request for any
  other path gets a bare 404 and prints nothing; one under the token whose `Host` is not
  this server's own address is refused (a DNS-rebinding page would send its own host name).
- It accepts exactly one result: a same-origin `POST /kint/<token>/result` with a JSON body
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
import json
import secrets
import sys
import threading
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any, Callable

from kint.authorize_page.handler import PATH_PREFIX, PageResult, handler_for

# The Base Account SDK as published on npm: @base-org/account 2.5.10, dist/base-account.min.js
# (Apache-2.0; its licence ships beside it). The npm tarball's integrity is
# sha512-O/wRk4+RValIKkXuBYm7jvTf+p5GEml+qhFS5anqpWSqwoIHuUxPJMXaUCmRiChr6DweUOhQwspVYkiYJFtl9g==
SDK_PACKAGE = "@base-org/account"
SDK_VERSION = "2.5.10"
SDK_FILE = f"base-account-{SDK_VERSION}.min.js"
SDK_SHA256 = "fd307e471e738cc16604aa5d5263d7505d6f6b76e45355c977e8c67e985f52fe"

# Seconds a connection may take to send its request line, headers and body.
REQUEST_TIMEOUT_S = 10.0
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
    def base_path(self) -> str:
        """The page's own path; its files and its result are below it."""
        return f"{PATH_PREFIX}{self.token}"

    @property
    def url(self) -> str:
        return self.origin + self.base_path

    @property
    def sdk_available(self) -> bool:
        return self._sdk is not None

    def start(self) -> str:
        handler = handler_for(self)
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
        config["resultPath"] = f"{self.base_path}/result"
        config["sdk"] = ({"src": f"{self.base_path}/{SDK_FILE}", "version": SDK_VERSION,
                          "integrity": "sha384-" + base64.b64encode(
                              hashlib.sha384(self._sdk).digest()).decode()}
                         if self._sdk is not None else None)
        html = _static("page.html").decode("utf-8")
        # The page's URL has no trailing slash, so its files are named by absolute path.
        html = html.replace("{{NONCE}}", nonce).replace("{{BASE_PATH}}", self.base_path)
        return html.replace("{{REQUEST_JSON}}", _json_for_html(config)).encode("utf-8")

    def asset(self, name: str) -> tuple[bytes, str] | None:
        """A file the page loads, and its content type; None for any other name."""
        if name == SDK_FILE:
            body = self._sdk
        else:
            body = _static(name) if name in _ASSETS else None
        return (body, _ASSETS[name]) if body is not None else None


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
