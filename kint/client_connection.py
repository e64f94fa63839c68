"""A client's connection to the supervisor holding its home (`kint.client.Client`'s base):
which socket it talks on, to which supervisor, and when to drop it for another. A socket
is connected only in a folder that is this user's alone, never for a relative KINT_HOME,
and followed to a successor (or a folder the supervisor moved to) before a request goes
out. What a request does on it, its send and its wait, is kint.client's.

A client that calls often (kint-server, a benchmark) pays for those looks on every call,
so they are kept cheap: the pid file stays open (`HolderWatch`), the socket's folder is
resolved once per supervisor (`_front`), and a supervisor that has answered on the socket
and still holds the home costs no look at all (`_front_of`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import zmq

from kint.client_context import end_context
from kint.client_errors import SupervisorUnavailable
from kint.client_liveness import LivenessChecks
from kint.front_closed import Moment, moment
from kint.paths import RELATIVE_HOME_HINT, RELATIVE_PROBLEM, is_private_dir, kint_home
from kint.socket_paths import FRONT_SOCKET, socket_dir
from kint.supervisor.pidlock import HolderWatch


class ClientConnection(LivenessChecks):
    """The socket of a client of the supervisor holding its home, and what it learnt of
    the supervisor that answered on it (`kint.client.Client` makes its calls on it)."""

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

    def close(self, linger_ms: int = 0) -> bool:
        """Close the socket and the pid file; `linger_ms` lets queued casts leave first. A
        context of its own (`own_context`) is ended here, which waits for them up to the
        linger (kint/client_context.py); on the shared one it holds while the process does.
        Whether what was queued has left this process (written to the supervisor's
        connection: in its socket's buffer, not yet read by it, which a supervisor killed
        before it reads loses): known only of a context of its own, and only by the time
        its end took. libzmq ends a closed socket as soon as its queue is written, or drops
        the queue once the linger runs out, and returns alike, saying neither; its linger
        counts from the close, which comes after `began`, so an end sooner than the linger
        from `began` means the linger did not run out: nothing was dropped for want of
        time. (What libzmq drops at once, unsaid, on a peer that fails its handshake, a
        listener at the path that is no supervisor, it cannot tell.) Later, it may have
        dropped some (or a loaded box ran the end late): False, as on the shared context,
        whose queue nobody waits for, and as on a second close, whose end waits for
        nothing."""
        began = time.monotonic()
        ended = self._zctx.closed
        if self._sock is not None:
            self._sock.close(linger=linger_ms)
            self._sock = None
        self._connected = self._front = None
        self._holder.close()
        if not self._own_context or ended:
            return False
        end_context(self._zctx)  # last: a stop signal that raises in its wait finds all closed
        return time.monotonic() - began < linger_ms / 1000

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
