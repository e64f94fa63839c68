"""The small client the CLI (and, later, kint-server) use to talk to the supervisor.

It never imports the engine: it builds a request, sends it as one frame on a DEALER, and
waits for the reply with the same id until a deadline computed once, a little past the
request's own, so that the supervisor's TIMEOUT (which says what the worker is doing)
arrives before the client gives up on its own.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import zmq

from kint.paths import FRONT_SOCKET, front_address, kint_home, socket_dir
from kint.protocol import ProtocolError, Reply, Request, decode_reply, encode_request
from kint.protocol.envelope import new_request_id
from kint.protocol.limits import DEFAULT_TIMEOUT_MS

# How much longer than the request's own deadline the client waits for the reply.
CLIENT_GRACE_S = 2.0


class KintError(Exception):
    """What a kint call refused with: a code, one line, and what to do."""

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint


class SupervisorUnavailable(KintError):
    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__("SUPERVISOR_UNAVAILABLE", message, hint)


class Client:
    def __init__(self, home: Path | None = None, *, autostart: bool = True) -> None:
        self.home = home or kint_home()
        self.autostart = autostart
        self._zctx = zmq.Context.instance()
        self._sock: zmq.Socket | None = None

    def _socket(self) -> zmq.Socket:
        if self._sock is None:
            sock = self._zctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(front_address(self.home))
            self._sock = sock
        return self._sock

    def close(self, linger_ms: int = 0) -> None:
        """Close the socket; `linger_ms` lets queued casts leave first."""
        if self._sock is not None:
            self._sock.close(linger=linger_ms)
            self._sock = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def socket_exists(self) -> bool:
        return (socket_dir(self.home) / FRONT_SOCKET).exists()

    def ping(self, timeout_s: float = 1.0) -> bool:
        from kint.supervisor.autostart import running_pid

        if not self.socket_exists() or running_pid(self.home) is None:
            return False
        try:
            self._roundtrip(Request(id=new_request_id(), op="sup.ping", timeout_ms=1000),
                            timeout_s, fresh_socket=True)
        except KintError:
            return False
        return True

    def ensure_running(self) -> None:
        from kint.supervisor.autostart import ensure_running

        try:
            ensure_running(self.home, lambda t: self.ping(t))
        except TimeoutError as err:
            raise SupervisorUnavailable(str(err), "run `kint supervisor start --foreground` "
                                        "to see why it does not start") from None

    def call(self, op: str, *, tenant: str | None = None, db: str | None = None,
             space: str | None = None, args: dict[str, Any] | None = None,
             timeout_s: float | None = None) -> dict[str, Any]:
        """Send one request and return its result, or raise KintError with the refusal."""
        if self.autostart:
            if not self.socket_exists() or self._sock is None:
                self.ensure_running()
        timeout_ms = int((timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_MS / 1000) * 1000)
        request = Request(id=new_request_id(), op=op, tenant=tenant, db=db, space=space,
                          args=args or {}, timeout_ms=timeout_ms)
        reply = self._roundtrip(request, timeout_ms / 1000 + CLIENT_GRACE_S)
        if not reply.ok:
            raise KintError(reply.error or "INTERNAL", reply.message or "", reply.hint)
        return reply.result or {}

    def cast(self, op: str, *, tenant: str | None = None, db: str | None = None,
             space: str | None = None, args: dict[str, Any] | None = None,
             timeout_s: float = 60) -> None:
        """Send a request that gets no reply (a note, an exit push): queued on the socket,
        delivered once it is connected."""
        if self.autostart and (not self.socket_exists() or self._sock is None):
            self.ensure_running()
        request = Request(id=new_request_id(), op=op, tenant=tenant, db=db, space=space,
                          args=args or {}, timeout_ms=int(timeout_s * 1000), cast=True)
        self._socket().send(encode_request(request))

    def _roundtrip(self, request: Request, wait_s: float, *, fresh_socket: bool = False) -> Reply:
        sock: zmq.Socket
        if fresh_socket:
            sock = self._zctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(front_address(self.home))
        else:
            sock = self._socket()
        try:
            sock.send(encode_request(request))
            deadline = time.monotonic() + wait_s
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not sock.poll(left * 1000, zmq.POLLIN):
                    raise SupervisorUnavailable(
                        f"no answer from the supervisor within {wait_s:.1f}s",
                        "see `kint supervisor status` and the supervisor log")
                try:
                    reply = decode_reply(sock.recv())
                except ProtocolError as err:
                    raise KintError(err.code.value, err.message, err.hint) from None
                if reply.id == request.id or reply.id is None:
                    return reply
                # A reply to an earlier request that timed out on this side: not ours.
        finally:
            if fresh_socket:
                sock.close(linger=0)
