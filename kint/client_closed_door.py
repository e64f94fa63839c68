"""What a client does about a supervisor's closed front door (kint/front_closed.py): the
half of `kint.client.Client` that reads the note, kept apart from the ordinary call path,
which never reads it while the socket file is there.

A supervisor short of open files, or stopping, moves its socket file aside: a connection
made before that is still served, one made after reaches nobody (ZeroMQ queues the
request for whichever supervisor binds there next). So the client remembers when, and to
which supervisor, its socket was connected while the file was there (`_connected_at`),
and with that and the note tells a request the supervisor will answer from one it never
sees: refused at once, naming the door, instead of waiting out the deadline.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from kint.client_errors import NO_SUPERVISOR_HINT, KintError, SupervisorUnavailable
from kint.front_closed import FrontClosed, Moment, moment, read_note, read_stepped_down_note
from kint.paths import run_dir
from kint.socket_paths import socket_dir
from kint.supervisor.pidlock import PID_FILE

if TYPE_CHECKING:
    import zmq

# How much earlier than a front door's closing a client's connect must have returned to
# count as accepted: ZeroMQ connects (and reconnects, every 100 ms) after connect() returns.
CONNECT_SLACK_S = 0.5


class ClosedDoorChecks:
    """A mixin of `Client`: the checks that read a closed door's note. `Client` owns the
    socket and what it was connected to; these read them."""

    # Client's own (`_drop_socket`: LivenessChecks'), declared for the type checker.
    home: Path
    _sock: "zmq.Socket | None"
    _connected: tuple[str, str] | None
    _drop_socket: Callable[[], None]
    _front_of: Callable[[int | None], "tuple[tuple[int, int, int], str, str, Moment] | None"]

    def __init__(self) -> None:
        # (when, the pid of the supervisor serving then) `_sock` was connected,
        # or last sent on, to a socket file that was there: that supervisor, if it closed
        # its front door later (kint/front_closed.py), accepted it. ZeroMQ reconnects the
        # same socket by itself, so a stamp is another supervisor's proof of nothing: one
        # with the same pid too, which took the home after the stamp.
        self._connected_at: tuple[Moment, int | None] | None = None

    def _stamp(self, serving: int | None) -> None:
        """Note when, and to which supervisor, `_sock` was last connected (or a request
        sent) while its socket file was there: a stat, once a socket or once a supervisor."""
        there = self._connected is not None and os.path.exists(self._connected[1])
        self._connected_at = (moment(), serving) if there else None

    def _refuse_if_no_file(self, serving: int | None, op: str) -> None:
        """Before `op` goes out on a socket just made with no socket file to connect to:
        ZeroMQ would queue it and deliver it to whichever supervisor binds there next (a
        `sup.stop` meant for the one whose door closed for its stop would stop the next).
        Refused now, nothing sent, where the door is closed or no supervisor runs; a
        supervisor holding the home that has not bound yet (still starting) gets it once
        it binds, as before."""
        if self._connected_at is not None:
            return
        self._refuse_if_closed(serving, op, sent=False)
        if serving is None:
            self._drop_socket()
            self._refuse_if_stepped_down(op)
            raise SupervisorUnavailable(f"no supervisor is running for {self.home} "
                                        f"({op} was not sent)", NO_SUPERVISOR_HINT)

    def _refuse_if_stepped_down(self, op: str) -> None:
        """No supervisor holds the home: one that stepped down may still be stopping
        (`stepped_down_note`): said so (SUPERVISOR_UNAVAILABLE, call again once it has, or
        how to resume it where it is stopped), not that none runs."""
        closed = self.stepped_down_note()
        if closed is not None:
            said = closed.refusal()  # stopped too: said so, and how to resume it
            raise KintError(said.code, f"{said.message} ({op} was not sent)", said.hint)

    def stepped_down_note(self) -> FrontClosed | None:
        """With no supervisor holding the home and its pid file missing: the note of one
        whose pid file was removed, which steps down and stops (its workers first, up to
        a minute), its door closed for its stop on its own socket file. Its note names no
        pid file's supervisor, so `_refuse_if_closed` does not read it. Looked for only
        where no holder was found: the ordinary call's path reads no more.

        Read in the home's socket folder now, not where a socket of this client connected:
        it is asked only with a socket just made there (`_refuse_if_no_file`) or with none
        (`kint supervisor status`), so the two are one folder. A supervisor that stepped
        down in a fresh folder whose record went with run/ leaves its note where no new
        client looks; only a client whose request went there knows it (`_note_of`)."""
        if os.path.exists(run_dir(self.home) / PID_FILE):
            return None
        return read_stepped_down_note(socket_dir(self.home))

    def answered_by(self, pid: int | None, closed: FrontClosed | None = None) -> bool:
        """Whether this client holds a connection the supervisor `pid` has answered on:
        one it still serves when it takes no new clients (kint/front_closed.py). With its
        note (`closed`, which says when that supervisor took its home), an answer from
        before then was another's with the same pid."""
        front = self._front_of(pid)
        return (self._sock is not None and front is not None
                and (closed is None or closed.started_by(front[3])))

    def let_in_by(self, pid: int | None, closed: FrontClosed) -> bool:
        """Whether this client's connection is one the supervisor `pid`, whose door is
        closed (`closed`, its note), let in: answered on it, or connected to its file
        before its door closed. Such a connection is served (a first request slower than
        a liveness look is no refusal); never one made before it took the home: that was
        another supervisor's, even with its pid."""
        stamp = self._connected_at
        return self.answered_by(pid, closed) or (
            self._sock is not None and stamp is not None and stamp[1] == pid
            and closed.started_by(stamp[0])
            and closed.closed_after(stamp[0], CONNECT_SLACK_S))

    def _refuse_if_closed(self, pid: int | None, op: str, *, sent: bool) -> bool:
        """Whether the supervisor `pid` has closed its socket to new clients
        (kint/front_closed.py) while this client holds a connection it accepted (which it
        still serves: one it answered on, or made to its socket file while it served, half
        a second before the door closed); BUSY, naming the open-file limit, when this
        client has none (SUPERVISOR_UNAVAILABLE, saying it stops, where the door closed as
        its stop began): a connect now finds no socket file, and waiting would only run
        out the deadline."""
        closed = self._note_of(pid, sent=sent)
        if closed is None:
            return False
        stamp = self._connected_at
        if closed.stopping and sent and stamp is not None:
            # Sent to a supervisor that stops, on a socket connected while its file was
            # there: it answers the clients it let in (`kint supervisor stop` its own stop,
            # sent a moment before the door closed), and its exit, seen at the next look,
            # ends the wait of one it did not. A socket that connected to no file (made as
            # the stop began) delivers nothing: refused at once, not after the whole stop.
            return True
        if self.let_in_by(pid, closed):
            return True
        self._drop_socket()  # connecting to a path that is gone: stop trying
        unsent = (f"; whether {op} reached it is unknown"
                  if sent and not (closed.stopping and stamp is None) else
                  f" ({op} was not sent)")
        said = closed.refusal()
        raise KintError(said.code, said.message + unsent, said.hint)

    def _drop_if_closed(self, pid: int | None) -> str:
        """At a deadline with no answer: when the supervisor `pid` takes no new clients,
        drop the socket, so a request queued on it for a connection never made is not
        run once the door opens again (a retried write would run twice); what to add to
        the refusal (the door), or nothing."""
        closed = self._note_of(pid, sent=True)
        if closed is None:
            return ""
        self._drop_socket()
        return f"; {closed.refusal().message}"

    def _note_of(self, pid: int | None, *, sent: bool) -> FrontClosed | None:
        """The note of the supervisor `pid`'s closed door (read_note). Of a request `sent`
        on this socket, looked for first where the socket connected: the supervisor it
        went to wrote it in its own folder, which for a long KINT_HOME may no longer be the
        home's (a run/ removed takes the record of its fresh folder with it, and the home's
        is the default again: tests/test_client_pid_file_gone.py); then in the home's
        folder now, the holder's. Before a send, only there: a socket kept from before may
        be connected in a predecessor's folder, which says nothing of the holder."""
        folder = socket_dir(self.home)
        if sent and self._connected is not None and self._connected[0] != str(folder):
            closed = read_note(Path(self._connected[0]), pid)
            if closed is not None:
                return closed
        return read_note(folder, pid)
