"""The front door at the supervisor's stop (front_door.py keeps it for want of open files):
closed to new clients as the stop begins, for the note to tell them it stops
(kint/front_closed.py), its monitor ended before the context is, and the moved socket and
the note removed at the end while they are the supervisor's own.

Apart from the door's count and margin: a stop counts no clients, and what it may touch is
decided by whose home it is, not by the descriptors free. A supervisor that steps down
touches a socket file there only while it is still the one it bound and no other
supervisor holds the home (its pid file removed and nobody started since); once another
holds it, the file and the note there are that one's. That test (`_nobody_else`) is the
door's too: it asks it before it puts back the socket it moved aside for want of open
files (`FrontDoor._moved_is_own`). A look and a move are two steps, so the file moved is
looked at again once moved (`_move_aside`), at the stop and when the door closes for want
of open files alike. A base of `FrontDoor`, which keeps the state
these methods read.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Callable

import zmq

from kint.front_closed import CLOSED_SOCKET, FrontClosed, remove_own_note, write_note
from kint.open_files import open_files
from kint.supervisor.ownership import FileId, Ownership, file_id

log = logging.getLogger("kint.supervisor")


class FrontDoorStop:
    front: zmq.Socket
    ownership: Ownership | None
    monitor: zmq.Socket | None
    closed: FrontClosed | None
    _moved: FileId | None
    # FrontDoor's own methods, declared for the type checker.
    _note: Callable[..., FrontClosed]
    _moved_is_own: Callable[[Path], bool]
    _moved_is_ours: Callable[[Path], bool]

    def close_for_stop(self, front_path: Path | None) -> None:
        """As the supervisor begins to stop, before its monitor goes (`unwatch`): closed
        to new clients, for the note to tell them it stops (kint/front_closed.py). The
        stop takes up to STOP_BOUND_S (kint.supervisor.settings) with its workers while it
        runs, and with nothing watching the descriptors a crowd could take the last of them
        (libzmq's abort). The clients connected are served to the end (`kint supervisor
        stop`'s answer among them).
        Closed already for want of files, the note says the stop now. A supervisor that
        steps down touches a socket file there only while it is still the one it bound
        (its identity, as the ownership checks tell it) and no other supervisor holds the
        home: its pid file removed and nobody started since, it is still the supervisor
        every client of that socket reaches, and its stop's new clients must be told it
        stops; once another holds the home, a file there is that one's (its inode number
        may be the one this supervisor's unlinked file had), and so is its note."""
        if front_path is None:
            return
        if self.closed is not None and self._moved is None:
            self._note_stop_lost(front_path)
            return
        if not (self._moved_is_own(front_path) if self.closed is not None
                else self._nobody_else() and (self.ownership is None
                                              or self.ownership.socket_is_ours(front_path))):
            if self.closed is not None:
                self.closed = self.closed._replace(stopping=True)
            return
        closed = self._note(open_files(), stopping=True)
        try:
            write_note(front_path.parent, closed)
            moved = self.closed is not None or self._move_aside(front_path)
        except OSError as err:  # the socket file gone, or a full disk: served as before
            if self.closed is None:
                remove_own_note(front_path.parent, closed.pid, closed.started)
            else:
                self.closed = self.closed._replace(stopping=True)
            log.warning("could not close the front socket to new clients as the supervisor "
                        "stops: %s", err)
            return
        if not moved:
            remove_own_note(front_path.parent, closed.pid, closed.started)
            log.warning("%s is another supervisor's socket file now (it took the home as "
                        "this one's stop began): left to it", front_path)
            return
        self.closed = closed

    def _move_aside(self, front_path: Path) -> bool:
        """Move the front socket's file aside (`CLOSED_SOCKET`), only while it is the one
        this supervisor bound: whether it was. The look before (`_nobody_else` at the stop,
        `_ours` for want of files; the socket file's identity) and a rename are two steps,
        and its pid file removed (it steps down, `run/` cleaned), a successor can take the
        home and bind its own file at the path between them (binding an ipc path replaces
        the file there): the rename would move that one, its new clients finding no
        socket. So the file is looked at once
        moved: its identity the one bound here (this supervisor's listener still holds
        that inode, so no other file has its number), or else it goes back by a link that
        replaces nothing (a file bound at the path since then stays), or, the link refused
        (a full disk), as `_put_back` can. The aside name is then unlinked: a successor
        whose door closed for want of files in the microseconds between the link and the
        unlink would lose its own moved file there, and take it as any lost one
        (front_door.py's `lost`); not guarded, as a look before the unlink would only be
        one more step with its own gap (review39d N3)."""
        aside = front_path.parent / CLOSED_SOCKET
        os.rename(front_path, aside)
        if self.ownership is None or self.ownership.socket_is_ours(front_path, at=aside):
            self._moved = file_id(aside)
            return True
        try:
            os.link(aside, front_path)
        except FileExistsError:
            pass  # bound again there since: that file is the one clients reach
        except OSError as err:
            _put_back(aside, front_path, err)
            return False
        aside.unlink(missing_ok=True)
        return False

    def _note_stop_lost(self, front_path: Path) -> None:
        """Closed for want of files and its moved socket removed, not bound again yet
        (`lost`): no socket to move, and no rebind during the stop, but the note on disk
        still says closed for want of files, and for the whole stop its new clients would
        be told to raise `ulimit -n`, a start beside it refused at once where it should
        wait. The note says the stop now, while no other supervisor holds the home (else
        the note there is that one's)."""
        assert self.closed is not None
        closed = self._note(open_files(), stopping=True)
        if self._nobody_else():
            try:
                write_note(front_path.parent, closed)
            except OSError as err:  # the folder gone, or a full disk
                closed = self.closed._replace(stopping=True)
                log.warning("could not note that the supervisor stops: %s", err)
        else:
            closed = self.closed._replace(stopping=True)
        self.closed = closed

    def unwatch(self) -> zmq.Socket | None:
        """Stop the monitor, as soon as the supervisor begins to stop (a stop counts no
        clients), well before its context ends: libzmq can hang ending a context whose
        socket still has a monitor (zeromq/libzmq#3575). The monitor's socket, for the
        poller to forget; None when there was none."""
        monitor, self.monitor = self.monitor, None
        if monitor is not None:
            self.front.disable_monitor()
            monitor.close(linger=0)
        return monitor

    def shut(self, front_path: Path | None) -> None:
        """At the supervisor's stop: the moved socket and the note go with it, while they
        are its own: it holds its home, or the door closed for this stop on its own socket
        file (`close_for_stop`), still the one at the path (else they may be the next
        supervisor's)."""
        self.unwatch()
        if self.closed is not None and front_path is not None and self._moved is None:
            if self._nobody_else():  # its moved socket removed, not bound again (`lost`)
                remove_own_note(front_path.parent, self.closed.pid, self.closed.started)
        elif self.closed is not None and front_path is not None:
            if (self._moved_is_own(front_path) if self.closed.stopping
                    else self._moved_is_ours(front_path)):
                (front_path.parent / CLOSED_SOCKET).unlink(missing_ok=True)
                remove_own_note(front_path.parent, self.closed.pid, self.closed.started)
            self.closed = None
            self._moved = None

    def _nobody_else(self) -> bool:
        """Whether no other supervisor holds the home (ownership.py): the files there are
        still this one's to write and remove, its pid file removed or not."""
        return self.ownership is None or self.ownership.nobody_else_holds()


def _put_back(aside: Path, front_path: Path, err: OSError) -> None:
    """Another supervisor's socket file, moved aside by `_move_aside`, whose link back
    failed (`err`: a full disk, or the aside name gone): put back by a rename while
    nothing is at the path (a rename replaces what is there, so a file bound in the
    moment after the look would go: a narrower gap than the one it mends, and only on
    this rare path). Else the aside name is removed, for no stray `CLOSED_SOCKET` to be
    taken for a door's, and, the rename failing, the log says that supervisor's new
    clients find no socket until its check binds it again (housekeeping.py)."""
    if not os.path.exists(front_path):
        try:
            os.rename(aside, front_path)
            log.warning("%s, moved aside by this supervisor's door, could not be linked "
                        "back (%s): put back by a rename", front_path, err)
            return
        except OSError as again:
            log.warning("%s, another supervisor's socket file, was moved aside by this "
                        "supervisor's door and could not be put back (%s, then %s): "
                        "that supervisor's new clients find no socket until its check "
                        "binds it again", front_path, err, again)
    with contextlib.suppress(OSError):  # a folder that refuses it keeps it: nothing more
        aside.unlink(missing_ok=True)
