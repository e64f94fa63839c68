"""The small client the CLI and kint-server use to talk to the supervisor.

It never imports the engine: it builds a request, sends it as one frame on a DEALER, and
waits for the reply with the same id until one deadline, taken when the call begins: the
call's bound (`timeout_s`, or the bound of the tool call it is part of, `bounded`) counts
from there, whatever starting a supervisor took first, and the request goes out with what
is left of it less a grace (kint/client_bound.py), so that the supervisor's TIMEOUT (which
says what the worker is doing) arrives before the client gives up on its own, and the
client's own refusal comes at the bound it names, not past it. While it waits it looks,
once a second, at the supervisor's pid lock (kint/client_liveness.py): a supervisor that
died mid-request is reported within a second or so, not when a deadline of up to half an
hour runs out. The socket it talks on, and to which supervisor, is its connection's
(kint/client_connection.py); the wait is a receive with a timeout, not a poller.
"""

from __future__ import annotations

import time
from typing import Any

import zmq

from kint.client_bound import call_deadline, request_ms
from kint.client_connection import ClientConnection
from kint.client_errors import NO_ANSWER_HINT, KintError, SupervisorUnavailable
from kint.client_request import (encoded, refused_proof, reply_among, reply_to, waiting,
                                 without_proofs)
from kint.front_closed import moment
from kint.protocol import Reply, Request
from kint.protocol.envelope import new_request_id
from kint.protocol.limits import DEFAULT_TIMEOUT_MS
from kint.seconds_text import seconds_text

# While waiting for a reply, how often the client checks that its supervisor still runs.
LIVENESS_EVERY_S = 1.0
# The status gives a progress line's age to the millisecond: a line of an op that began
# within this of the call being sent still counts as the call's.
PROGRESS_AGE_SLACK_S = 0.01
_RCVTIMEO = int(zmq.RCVTIMEO)
# pyzmq's own send, without the checks its Socket.send adds for DRAFT sockets' routing ids
# and groups (a DEALER has neither): 0.6 against 2.5 us hot, on every call.
_send = zmq.backend.Socket.send


class Client(ClientConnection):
    """A client of the supervisor holding its home: its calls, casts and pings, each on
    the connection its base keeps (kint/client_connection.py)."""

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def ping(self, timeout_s: float = 1.0) -> bool:
        return self.ping_answer(timeout_s) is not None

    def ping_answer(self, timeout_s: float = 1.0) -> dict[str, Any] | None:
        """The supervisor's answer to `sup.ping` on a socket of its own (its pid, uptime
        and, from session 28, when it took its home), or None when none came within
        `timeout_s`."""
        if not self.socket_exists() or self._holder.pid() is None:
            return None
        try:
            reply = self._roundtrip(Request(id=new_request_id(), op="sup.ping",
                                            timeout_ms=1000),
                                    time.monotonic() + timeout_s, timeout_s, fresh_socket=True)
        except KintError:
            return None
        return reply.result or {}

    def ensure_running(self, wait_s: float | None = None, on_demand: bool = True) -> int | None:
        """Start a supervisor if none answers, waiting up to `wait_s` for it, and never past
        the start's own START_WAIT_S (kint.supervisor.autostart, read at the call): a call
        passes what is left of its bound, which counts the start; `on_demand` and the pid
        returned (of the supervisor this call started, else None) as autostart's."""
        from kint.paths import UnsafePathError
        from kint.pid_file_lock import FOREIGN_FILE_HINT, NotOwnFile
        from kint.supervisor.autostart import START_WAIT_S, ensure_running

        start_wait_s = START_WAIT_S if wait_s is None else min(wait_s, START_WAIT_S)
        try:
            return ensure_running(self.home, lambda t: self.ping(t), wait_s=start_wait_s,
                                  on_demand=on_demand)
        except UnsafePathError as err:  # refused, never followed or tightened
            raise SupervisorUnavailable(str(err), err.hint) from None
        except NotOwnFile as err:  # the start lock or stderr: a link or a stranger's file
            raise SupervisorUnavailable(str(err), FOREIGN_FILE_HINT) from None
        except TimeoutError as err:
            hint = getattr(err, "hint", None) or ("run `kint supervisor start --foreground` "
                                                  "to see why it does not start")
            raise SupervisorUnavailable(str(err), hint) from None

    def call(self, op: str, *, tenant: str | None = None, db: str | None = None,
             space: str | None = None, args: dict[str, Any] | None = None,
             timeout_s: float | None = None) -> dict[str, Any]:
        """Send one request and return its result, or raise KintError with the refusal,
        by one deadline: `timeout_s` from now (or the thread's `bounded` block's). A
        supervisor older than secret proofs refuses one as a secret's value: the request
        goes again, by the same deadline, saying only that the secret is set, as that
        supervisor's own clients did (`_proofless`)."""
        deadline, bound_s = call_deadline(timeout_s if timeout_s is not None
                                          else DEFAULT_TIMEOUT_MS / 1000)
        try:
            return self._call(op, tenant, db, space, args, deadline, bound_s)
        except KintError as err:
            if not refused_proof(err, args):
                raise
        self._proofless, self._proofless_pid = True, self.sent_to
        return self._call(op, tenant, db, space, args, deadline, bound_s)

    def _call(self, op: str, tenant: str | None, db: str | None, space: str | None,
              args: dict[str, Any] | None, deadline: float, bound_s: float) -> dict[str, Any]:
        """`call`'s one request, by `deadline` (time.monotonic()), the end of its bound of
        `bound_s`."""
        self.sent_to = None
        serving = self._holder.pid()
        run = self._served_run()
        if self.autostart and (serving is None or self._sock is None
                               or not self.socket_exists(serving)):
            # No supervisor holds the home (a stale socket file says nothing), or this
            # client has not looked yet: make sure one answers, within the call's bound
            # (a tool's 5 s status must not wait out a 30 s start before refusing).
            # Unless it closed its socket to new clients: then only one it answered on
            # this connection goes on.
            if not self._refuse_if_closed(serving, op, sent=False):
                self.ensure_running(max(0.0, deadline - time.monotonic()))
                serving = self._holder.pid()
                run = self._served_run()
        self._follow(serving)
        left = deadline - time.monotonic()
        if left <= 0:  # starting the supervisor, or the block's calls before, spent it
            raise SupervisorUnavailable(f"no answer from the supervisor within "
                                        f"{seconds_text(bound_s)} ({op} was not sent)",
                                        NO_ANSWER_HINT)
        if self._proofless and serving == self._proofless_pid:
            args = without_proofs(args)
        request = Request(id=new_request_id(), op=op, tenant=tenant, db=db, space=space,
                          args=args or {}, timeout_ms=request_ms(left))
        if self._sock is None:
            self._socket(serving)
            self._refuse_if_no_file(serving, op)
        elif self._connected_at is None or self._connected_at[1] != serving:
            # A kept socket ZeroMQ reconnects to this supervisor by itself: from now, if
            # its file is there (the door open), within its reconnect interval.
            self._stamp(serving)
        self.sent_to = serving
        reply = self._roundtrip(request, deadline, bound_s, serving=serving)
        if run is not None and run[0] > 0 and run[0] == serving and self._connected is not None:
            self._front = (run, *self._connected, moment())
        if not reply.ok:
            raise KintError(reply.error or "INTERNAL", reply.message or "", reply.hint)
        return reply.result or {}

    def cast(self, op: str, *, tenant: str | None = None, db: str | None = None,
             space: str | None = None, args: dict[str, Any] | None = None,
             timeout_s: float = 60) -> None:
        """Send a request that gets no reply (a note, an exit push): queued on the socket,
        delivered once it is connected. It says of a secret only that it is set, never
        with a proof: the proof's one bit comes back in a reply, and a cast has none, while
        a supervisor older than proofs refuses one and, with no reply to tell the client,
        the cast was lost (kint-server's goodbye from a socket of its own is the first
        message that socket sends, before any call could have learnt which supervisor
        this is)."""
        if self.autostart:
            serving = self._holder.pid()
            if serving is None or self._sock is None or not self.socket_exists(serving):
                if not self._refuse_if_closed(serving, "a cast", sent=False):
                    self.ensure_running()
        serving = self._holder.pid()
        self._follow(serving)
        request = Request(id=new_request_id(), op=op, tenant=tenant, db=db, space=space,
                          args=without_proofs(args) or {}, timeout_ms=int(timeout_s * 1000),
                          cast=True)
        _send(self._socket(serving), encoded(request), 0)

    def progress_line(self, space16: str, op: str, sent_at: float) -> str | None:
        """The space's progress line, when it is of an `op` that began after `sent_at` (this
        process's time.monotonic() when the call it reports on was sent); else None, as
        when the status does not answer (the call itself says what went wrong). The
        supervisor gives a worker's line as of its last beat and keeps it until the next,
        so without the check the first line shown for a call could be the last one of the
        op before it, or of another op the space ran meanwhile."""
        from kint.space_row import read_space_row  # not on `kint supervisor status`'s path

        try:
            row = read_space_row(self, space16)
        except KintError:
            return None
        if row is None or not row.get("progress") or row.get("progress_op") != op:
            return None
        age = row.get("progress_age_s")
        if age is None or age > time.monotonic() - sent_at + PROGRESS_AGE_SLACK_S:
            return None
        return row["progress"]

    def _roundtrip(self, request: Request, deadline: float, bound_s: float, *,
                   fresh_socket: bool = False, serving: int | None = None) -> Reply:
        """Send `request` and wait for its reply until `deadline` (time.monotonic()), the
        end of the call's bound of `bound_s`. `serving` is the pid of the supervisor it
        goes to, watched while waiting (None: not known yet; a ping is not watched). A look
        that drops the socket (the supervisor gone, its door closed) takes the reply that had
        arrived on it (`_taken`): one that stops answers, then exits, within a look's gap."""
        sock = self._connect() if fresh_socket else self._socket(serving)
        # The receive timeout on `sock` now: a kept socket keeps it from call to call.
        waiting_ms = -1 if fresh_socket else self._rcvtimeo
        self._sent_now()
        try:
            _send(sock, encoded(request), 0)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    # A reply that arrived since the last receive is the answer, the door
                    # open or closed: a TIMEOUT would invite a retry that runs a write twice.
                    # The same look as a dropped socket's (`_taken`), on the socket itself.
                    if (reply := reply_among(request.id, waiting(sock))) is not None:
                        return reply
                    raise SupervisorUnavailable(
                        f"no answer from the supervisor within {seconds_text(bound_s)}"
                        + ("" if fresh_socket else self._drop_if_closed(serving)),
                        NO_ANSWER_HINT)
                # A receive that gives up after a second (or what is left) is the whole
                # wait: fewer calls into ZeroMQ than a poll followed by a receive.
                wait_ms = max(1, int(min(left, LIVENESS_EVERY_S) * 1000))
                if wait_ms != waiting_ms:
                    sock.set(_RCVTIMEO, wait_ms)
                    waiting_ms = wait_ms
                    if not fresh_socket:
                        self._rcvtimeo = wait_ms
                try:
                    frame = sock.recv()
                except zmq.Again:
                    if not fresh_socket:
                        try:
                            serving = self.sent_to = self._check_serving(serving, request.op)
                        except KintError:
                            # The look dropped the socket: a reply on it was the answer.
                            if (taken := self._taken(request.id)) is None:
                                raise
                            return taken
                    continue
                if (reply := reply_to(request.id, frame)) is not None:
                    return reply
        finally:
            self._dropped_with = []  # read only in this wait: held no longer than it
            if fresh_socket:
                sock.close(linger=0)
