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
hour runs out. It connects only to a socket in a folder that is this user's alone.

A client that calls often (kint-server, a benchmark) pays for those looks on every call,
so they are kept cheap: the pid file stays open (`HolderWatch`), the socket's folder is
resolved once per supervisor, and the wait is a receive with a timeout, not a poller.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import zmq

from kint.client_bound import call_deadline, request_ms
from kint.client_context import end_context
from kint.client_errors import NO_ANSWER_HINT, KintError, SupervisorUnavailable
from kint.client_liveness import LivenessChecks
from kint.client_request import (encoded, refused_proof, reply_among, reply_to, waiting,
                                 without_proofs)
from kint.front_closed import Moment, moment
from kint.paths import RELATIVE_HOME_HINT, RELATIVE_PROBLEM, is_private_dir, kint_home
from kint.protocol import Reply, Request
from kint.protocol.envelope import new_request_id
from kint.protocol.limits import DEFAULT_TIMEOUT_MS
from kint.seconds_text import seconds_text
from kint.socket_paths import FRONT_SOCKET, socket_dir
from kint.supervisor.pidlock import HolderWatch

# While waiting for a reply, how often the client checks that its supervisor still runs.
LIVENESS_EVERY_S = 1.0
# The status gives a progress line's age to the millisecond: a line of an op that began
# within this of the call being sent still counts as the call's.
PROGRESS_AGE_SLACK_S = 0.01
_RCVTIMEO = int(zmq.RCVTIMEO)
# pyzmq's own send, without the checks its Socket.send adds for DRAFT sockets' routing ids
# and groups (a DEALER has neither): 0.6 against 2.5 us hot, on every call.
_send = zmq.backend.Socket.send


class Client(LivenessChecks):
    def __init__(self, home: Path | None = None, *, autostart: bool = True,
                 own_context: bool = False) -> None:
        """`own_context`: a ZeroMQ context of this client's own, ended at `close`, for a
        process that exits after what it left queued (kint-server's goodbye): a closed
        socket's queue lives only as long as its context, and the shared one (the default:
        a context costs two threads) is never ended, so the queue went with the process."""
        super().__init__()
        self.home = home or kint_home()
        self.autostart = autostart
        self._own_context = own_context
        self._zctx = zmq.Context() if own_context else zmq.Context.instance()
        self._sock: zmq.Socket | None = None
        # The receive timeout set on `_sock` (ms): set again only when a wait needs another.
        self._rcvtimeo: int | None = None
        self._holder = HolderWatch(self.home)
        # The socket's folder and path as this client's socket was connected to them.
        self._connected: tuple[str, str] | None = None
        # (the run of a supervisor that answered on that socket, HolderWatch.run: its pid
        # and its pid file's inode and write time; the folder, the path, when it last
        # answered): a supervisor binds in one folder for its whole life, so once it has
        # answered, its folder is not looked up again; a supervisor still starting may
        # yet record another. A successor with its pid (a container's) is another run;
        # the time tells them apart by a closed door's `started` (kint/front_closed.py).
        self._front: tuple[tuple[int, int, int], str, str, Moment] | None = None
        # Whether the socket was connected while the pid file named a supervisor that had
        # not bound yet: the file at the path then may have been the one stepping down.
        self._connected_unserved = False
        # (pid, since): the supervisor holding this client's request, seen stopped
        # (SIGSTOP) at every liveness check since `since` (time.monotonic()).
        self._stopped_since: tuple[int, float] | None = None
        # When (time.monotonic()) the request being waited on was sent, after the look at
        # the pid file that named its supervisor: that process began by then. What tells
        # it from a later process given its pid once the pid file names it no more
        # (kint/client_liveness.py).
        self._named_at = 0.0
        # The pid of the supervisor a look found proof that the request being waited on
        # reached, which no longer holds the home (kint/client_liveness.py); None from
        # each send (`_sent_now`).
        self._reached_by: int | None = None
        # The frames that had arrived on the socket when it was dropped: every drop keeps
        # them (kint/client_liveness.py `_drop_socket`), only the wait's are read (`_taken`);
        # emptied at each send and at the wait's end.
        self._dropped_with: list[bytes] = []
        # The pid of the supervisor the last `call` sent its request to, as the pid file
        # named it then (one the call started included); None when it sent nothing or no
        # pid was known. Read after a call that got no answer, it names the supervisor that
        # holds the request, where a pid read before the call names none when the call
        # itself started one.
        self.sent_to: int | None = None
        # Whether a supervisor refused the proof of a secret a request carried (one older
        # than kint.settings.secret_proof, which refuses it on every op), and its pid:
        # requests to that supervisor say of a secret only that it is set, for its life. A
        # later supervisor (the older one stopped, idle or replaced) is sent the proof again.
        # A cast never carries one (`cast`).
        self._proofless = False
        self._proofless_pid: int | None = None

    def _connect(self) -> zmq.Socket:
        """A DEALER on the front socket, if its folder is this user's alone: a socket in a
        folder another user can write may be theirs, and would hear every request. Never
        for a relative KINT_HOME: from another folder it names another home."""
        if not self.home.is_absolute():
            raise SupervisorUnavailable(f"KINT_HOME {self.home} {RELATIVE_PROBLEM}",
                                        RELATIVE_HOME_HINT)
        folder = socket_dir(self.home)
        if not is_private_dir(folder):
            raise SupervisorUnavailable(
                f"{folder} is not a private folder of this user; kint talks to no socket there",
                "start the supervisor (`kint supervisor start`): it binds in a private folder")
        if self._zctx.closed:  # its own, ended by a `close`: the client is used again
            self._zctx = zmq.Context()
        sock = self._zctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(f"ipc://{folder / FRONT_SOCKET}")
        return sock

    def _socket(self, serving: int | None) -> zmq.Socket:
        """This client's socket, made now if it has none. `serving`: the pid of the
        supervisor holding the home as the caller read it, before the connect (one read of
        the pid file a call)."""
        if self._sock is None:
            folder = socket_dir(self.home)
            front = folder / FRONT_SOCKET
            # Looked at before the connect (as `serving` was): a file there then may yet
            # go before the connect (the request then said to have maybe reached it), where
            # one looked at after could have been reached and moved aside since ("not
            # sent" said of a request delivered).
            stamp = (moment(), serving) if os.path.exists(front) else None
            self._sock = self._connect()
            self._rcvtimeo = None  # a new socket: no receive timeout set yet
            self._connected = (str(folder), str(front))
            self._front = None
            self._connected_at = stamp
            self._connected_unserved = serving is not None and not self._holder.serving
        return self._sock

    def _follow(self, serving: int | None) -> None:
        """Before a request goes to a supervisor this client has not heard from yet: if
        the one that last answered on the socket no longer holds the home (`_left_by`:
        it steps down, or is gone), or the socket's folder is no longer the one the
        socket was connected in (a long KINT_HOME whose short folder was refused when
        this supervisor started, so it bound in a fresh one), drop the socket and connect
        again where the supervisor holding the home is. Kept, the old socket would carry
        the request to a supervisor that refuses it as it stops (a kint-server was told
        WORKER_DOWN, `the supervisor is stopping`, with the successor serving), or wait
        out every deadline on a path nobody serves, ZeroMQ reconnecting it to a folder
        that may now be anyone's. Only off the hot path: a supervisor that has answered
        on the socket and holds the home (`_front_of`) costs no more than before."""
        if self._sock is None or self._front_of(serving) is not None:
            return
        if self._left_by(serving) or (self._front is None and self._connected_unserved
                                      and self._holder.serving):
            # The second: connected before the holder bound, no answer of its recorded
            # since (`_served_run`): what answered may have been the one stepping down.
            self._drop_socket()
        elif self._connected is not None and str(socket_dir(self.home)) != self._connected[0]:
            self._drop_socket()

    def _front_of(self, serving: int | None
                  ) -> tuple[tuple[int, int, int], str, str, Moment] | None:
        """What this client learnt of the supervisor `serving` when it answered, while
        that is the run the pid file's last look found (a successor with its pid is not
        it); else None."""
        front = self._front
        if front is None or serving is None or front[0][0] != serving:
            return None
        return front if front[0] == self._holder.run else None

    def _served_run(self) -> tuple[int, int, int] | None:
        """The run the pid file's last look found, if it said that supervisor has bound its
        sockets: who answers is learnt only of such a one (`_front`). Before it binds, a
        connection made reaches whatever file is at the path (the supervisor stepping
        down, which has not seen yet that it lost the home), whose answer would be taken
        for the new holder's, and `_left_by` would then keep that connection."""
        return self._holder.run if self._holder.serving else None

    def serving_pid(self) -> int | None:
        """The pid of the supervisor that holds the home now (-1 when unreadable), or None:
        a look at the pid file this client keeps open."""
        return self._holder.pid()

    def close(self, linger_ms: int = 0) -> None:
        """Close the socket and the pid file; `linger_ms` lets queued casts leave first. A
        context of its own (`own_context`) is ended here, which waits for them up to the
        linger (kint/client_context.py); on the shared one it holds while the process does."""
        if self._sock is not None:
            self._sock.close(linger=linger_ms)
            self._sock = None
        self._connected = self._front = None
        self._holder.close()
        if self._own_context:  # last: a stop signal that raises in its wait finds all closed
            end_context(self._zctx)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def socket_exists(self, serving: int | None = None) -> bool:
        """Whether the front socket is there, in a private folder. `serving` is the pid of
        the supervisor that holds the home: when it has answered this client before, the
        folder it answered from is checked without being looked up again."""
        known = self._front_of(serving)
        if known is not None:
            _, folder_text, front, _ = known
        else:
            folder = socket_dir(self.home)
            folder_text, front = str(folder), str(folder / FRONT_SOCKET)
        return is_private_dir(folder_text) and os.path.exists(front)

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
