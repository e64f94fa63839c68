"""What a client does, while it waits on a reply, about the supervisor holding its request:
the half of `kint.client.Client` that looks, once a second, whether that supervisor still
runs, still answers and is not stopped, kept apart from the send and the receive.

A dead supervisor answers nothing, and waiting out the deadline (up to half an hour)
would only hide that: a supervisor that exited mid-request is reported within a second or
so, one stopped (SIGSTOP) within the bound a command's start gives one, each naming the
pid that held the request and that whether it ran is unknown.

The pid file is how a client finds the supervisor, not whether the one it sent to still
runs: removed (`run/` cleaned, an upgrade's tooling), that supervisor steps down and drains
the requests it holds before it exits, and a successor may take the home meanwhile. So a
client whose pid file no longer names the supervisor it sent to waits on as long as that
process is there and is that supervisor (`began_by`: a reused pid's process began later),
and says it exited once it has; where nothing proves the request reached it (`_reached`:
a socket connected to no file of its, or as its door closed, or a successor holding the
home that cleared its note), the socket is dropped at once as before, and the refusal
says that supervisor no longer holds the home, not that it exited, while it is there.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from kint.client_closed_door import ClosedDoorChecks
from kint.client_errors import (EXITED_HINT, NO_SUPERVISOR_HINT, UNREACHED_HINT,
                                SupervisorUnavailable)
from kint.client_request import reply_among, waiting
from kint.front_closed import boot_time, process_began, read_stepped_down_note
from kint.protocol import Reply
from kint.socket_paths import FRONT_SOCKET, socket_dir

if TYPE_CHECKING:
    from kint.front_closed import Moment
    from kint.supervisor.pidlock import HolderWatch


class LivenessChecks(ClosedDoorChecks):
    """A mixin of `Client`: the looks at the supervisor holding a request. `Client` owns
    the socket, the pid file it keeps open and what it saw stopped; these read them, and
    drop the socket or note the stop when the supervisor is gone (`_drop_socket`, which
    ClosedDoorChecks calls too, `_refuse_if_stopped`)."""

    # Client's own, declared for the type checker.
    _holder: "HolderWatch"
    _front: "tuple[tuple[int, int, int], str, str, Moment] | None"
    _stopped_since: tuple[int, float] | None
    # When (time.monotonic()) the pid file last named, before the request went, the
    # supervisor it went to: that process began by then (`_named_since`).
    _named_at: float
    # The pid of the supervisor the request being waited on went to, as its stepping-down
    # note proved at a look (`_reached`); forgotten at each send (`_sent_now`). Not where
    # `_check_serving` names the supervisor anew (serving None): a request proved to have
    # reached one is waited on with that one's pid, never None, to its end.
    _reached_by: int | None
    # What had arrived on the socket when it was dropped: every drop keeps it
    # (`_drop_socket`), only the wait's is read, for the reply to the request sent last
    # (`_taken`); emptied at each send and at the wait's end.
    _dropped_with: list[bytes]

    def _sent_now(self) -> None:
        """A request goes out now: the supervisor the pid file names is the one it goes to
        from here (`_named_at`), nothing proves yet that it reached one that steps down
        (`_reached_by`), nor has that one been seen stopped (`_stopped_since`)."""
        self._stopped_since = None
        self._named_at = time.monotonic()
        self._reached_by = None
        self._dropped_with = []

    def _check_serving(self, serving: int | None, op: str) -> int:
        """While waiting on `op`: the pid of the supervisor that holds the request, or
        SupervisorUnavailable when it exited (or none ever ran): a dead supervisor answers
        nothing, and waiting out the deadline would only hide that. One the pid file no
        longer names (removed, or another's) is waited on while it is there (`began_by`)
        and the request reached it (`_reached`): it steps down, and answers what it holds
        first."""
        now = self._holder.pid()
        if now is None and serving is None:
            self._drop_socket()  # queued for no one: the next supervisor must not get it
            raise SupervisorUnavailable(f"no supervisor is running for {self.home}",
                                        NO_SUPERVISOR_HINT)
        if now is None or (serving not in (None, -1) and now != serving):
            assert serving is not None  # both None: refused above
            there = serving > 0 and began_by(serving, self._named_since())
            if not (there and self._reached(serving)):
                # A request still queued on the socket (never delivered: the door closed
                # for a stop) would go to the next supervisor to bind there, a minute on.
                self._drop_socket()
                if there:
                    # -1: a pid file held but not read, maybe still that supervisor's.
                    holds = ("may no longer hold" if now == -1 else "no longer holds")
                    why = " (its pid file cannot be read)" if now == -1 else ""
                    raise SupervisorUnavailable(
                        f"the supervisor (pid {serving}) {holds} {self.home}{why} and "
                        f"{op} may not have reached it; whether {op} ran is unknown",
                        UNREACHED_HINT)
                raise SupervisorUnavailable(
                    f"the supervisor (pid {serving}) exited before answering {op}; whether "
                    f"{op} ran is unknown", EXITED_HINT)
            holding = serving
        elif serving is None:
            holding = now
            self._named_at = time.monotonic()  # the request's supervisor named from now
        else:
            holding = serving
        if holding > 0:
            self._refuse_if_stopped(holding, op)
            self._refuse_if_closed(holding, op, sent=True)
        return holding

    def _reached(self, pid: int) -> bool:
        """Whether there is proof that the request went to the supervisor `pid`, which the
        pid file named when it went and names no more, on a connection it let in: one it
        answered on (`_answered_on`); or, if its door has closed for its stop, one made to
        its socket file before that (`let_in_by`); or, no note of a closed door, one made
        to a socket file that is still there. Such a request it answers as it steps down.
        Without proof the request may be queued still (a socket connected to no file of
        its, or connected as its door closed) and is not waited on: it would reach the
        next supervisor to bind there. The next one also clears the old one's note as it
        takes the home (kint.front_closed.clear_left_behind): no note of its is no proof
        that its door is open, only the socket file is.
        The socket file is looked at before the note, as the files change: a door closing
        writes its note, then moves the socket file aside (kint.supervisor.front_door_stop),
        so a socket file found gone has its note there already; looked at after, a note
        read with the socket file still there (so read as none) and the file moved before
        the look at it dropped a request the supervisor had let in. A successor clears the
        note, then binds: there too, a look that finds neither saw a moment that was."""
        stamp = self._connected_at
        if self._sock is None:
            return False
        if self._reached_by == pid or self._answered_on(pid):
            return True
        if stamp is None or stamp[1] != pid:
            return False
        # Where the socket was connected: a successor with a long KINT_HOME may bind in a
        # fresh folder, so today's socket folder may not be the one the request went to.
        folder = Path(self._connected[0]) if self._connected else socket_dir(self.home)
        if os.path.exists(folder / FRONT_SOCKET):
            # Its door still open (a later look reads the note if it closes), or a
            # successor's socket file: where a request still queued would go, the
            # supervisor's own (it connects there within ZeroMQ's reconnect interval) or a
            # successor's (which has it already: dropping the socket would undo nothing,
            # and lose the answer).
            return True
        closed = read_stepped_down_note(folder)
        if closed is None or closed.pid != pid or not self.let_in_by(pid, closed):
            # No socket file, and no note of its (none, or cleared as a successor takes
            # the home) or one whose door closed before the connection: no proof.
            return False
        self._reached_by = pid  # let in: the note cannot unsay it
        return True

    def _left_by(self, serving: int | None) -> bool:
        """Before a request on a kept socket: whether the supervisor that last answered on
        it (`_front`) is not the one the pid file names now (`serving`): another pid, or
        its pid given to a process that began after that answer (`began_by`, a
        container's successor). One that no longer holds the home is stepping down
        (kint.supervisor.housekeeping, within a second of losing its pid file) and
        refuses what comes on the connections it still has (WORKER_DOWN, the supervisor
        is stopping): its socket path is the holder's now, which binds it, so it takes no
        new clients. One that is gone left a connection that ZeroMQ makes again by itself
        to whatever is at the path. Either way the request must go on a new connection,
        to the holder's socket. False with no answer yet, or no pid file naming a
        supervisor (None) or naming one unread (-1): nobody to follow; and where the
        same process still holds the home, its pid file rewritten since the look that
        sent what it answered (it marks itself serving once it has bound)."""
        if self._front is None or serving is None or serving <= 0:
            return False
        return not self._answered_on(serving)

    def _answered_on(self, pid: int) -> bool:
        """Whether the supervisor `pid` has answered on this client's socket: an answer
        came from pid `pid` (`_front`, forgotten with the socket) and the process on that
        pid now was there by then (`began_by`), so it was that process that answered, on a
        connection it still serves."""
        front = self._front
        return front is not None and front[0][0] == pid and began_by(pid, front[3].boot)

    def _named_since(self) -> float:
        """`_named_at` on the clock /proc's start times count (`boot_time`, which counts
        the time the machine slept, as monotonic time does not), worked out at a look
        rather than read at every send: read there, CLOCK_BOOTTIME measured 0.13 against
        0.09 us for time.monotonic() on a busy box (0.114 against 0.100 on another), a
        cost on every call of a client that calls often, for a case that needs a reused
        pid and a suspend. A sleep since the send makes it later than the moment was,
        never earlier: the supervisor it named always passes `began_by`, and a process
        given its pid after it exited passes only had the machine slept, after that
        process began, longer than it was awake between the send and that start."""
        return boot_time() - (time.monotonic() - self._named_at)

    def _drop_socket(self) -> None:
        """Close the socket at once (linger 0): nothing queued on it is delivered later.
        What had arrived on it is kept first (`_dropped_with`), for the wait to take its
        reply from (`_taken`): a supervisor that stops answers what it holds, then removes
        its socket file and note and exits, and a look in the gap between a receive that
        timed out and that answer's arrival found it gone and lost an answer it gave."""
        if self._sock is not None:
            self._dropped_with.extend(waiting(self._sock))
            self._sock.close(linger=0)
            self._sock = None
        self._connected = self._connected_at = None

    def _taken(self, request_id: str) -> Reply | None:
        """The reply to `request_id` among the frames that had arrived on the socket when a
        look dropped it during the wait (`_drop_socket`), or None: the call's answer, where
        the refusal the drop came with (the supervisor exited, or no longer holds the
        home) would call a request it answered unknown."""
        return reply_among(request_id, self._dropped_with)

    def _refuse_if_stopped(self, pid: int, op: str) -> None:
        """SupervisorUnavailable, naming `pid` and how to resume it, once the supervisor
        holding `op` has been stopped (SIGSTOP) for UNREACHABLE_AFTER_S: it answers nothing
        until someone continues it, which a command cannot tell from the outside. The same
        bound and words as a command's start finds one stopped (kint.supervisor.autostart),
        where waiting out the request's whole deadline (up to 100 s for an agent's tool
        call) said only that no answer came."""
        from kint.proc_stat import process_stopped
        from kint.supervisor.autostart import UNREACHABLE_AFTER_S
        from kint.supervisor.start_refusals import silent_supervisor

        if not process_stopped(pid):
            self._stopped_since = None
            return
        now = time.monotonic()
        if self._stopped_since is None or self._stopped_since[0] != pid:
            self._stopped_since = (pid, now)
            return
        if now - self._stopped_since[1] >= UNREACHABLE_AFTER_S:
            silent = silent_supervisor(self.home, pid)
            raise SupervisorUnavailable(f"{silent}; it holds {op}, and whether {op} ran is "
                                        f"unknown", silent.hint)


def began_by(pid: int, since: float) -> bool:
    """Whether the process `pid` is there (not a zombie: an exited supervisor not reaped
    yet answers nothing) and began by `since` (seconds after boot, `boot_time`'s clock):
    the supervisor a look at that moment named, and not a process given its pid after it
    exited. False where /proc does not say (a client there says the supervisor exited as
    soon as its pid file stops naming it, as before). When it began is read where a
    closed door's note is checked against it too (`process_began`)."""
    if since <= 0:
        return False
    began = process_began(pid, live=True)
    return began is not None and began <= since
