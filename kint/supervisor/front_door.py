"""The front socket's door: closed to new clients before they take the supervisor's last
open files, open again once enough of them left (kint/front_closed.py says why a door is
needed at all: libzmq aborts the process where an accept meets EMFILE).

ZeroMQ accepts clients in its own I/O thread, so the supervisor cannot refuse one
connection; it can only keep new ones from arriving. It watches its front socket's
accepts and disconnects (a ZeroMQ socket monitor, one more item in its poll) and counts
its descriptors at each; when fewer than `margin` are left free it moves the socket file
aside and leaves the note, and when `reopen_at` are free again it moves it back. The
margin holds what can still arrive after the door closes: the connections already in the
kernel's listen queue (the front socket's backlog, set here to fit the limit) and those
accepted while the loop was busy, plus what the supervisor needs for itself (a spawn, its
log, a config read), and, while the worker forkserver still starts, what its warm-up
takes in a thread of the supervisor beside the loop (WARM_UP_FDS, less what it opened
since it began: those counted twice, once open and once in the margin, left no room at
`ulimit -n` 49-52, and the door closed on the CLI's own wait for the start). One closing
is one episode: logged once as it starts and once as it ends, and shown by `kint
supervisor status`.

The count is not listed at every accept and disconnect (two per CLI command, on the
loop, a listing of every open descriptor: bench/bench_front_door.py). The door keeps
the count it listed last and moves it by the clients the monitor told since; it lists
again only when that estimate comes within twice the margin of the limit, when the
listing is older than RECOUNT_S, or when the supervisor opened descriptors the
monitor does not tell (a worker spawned, `recount`). Far from the limit, as a box
under its raised soft limit always is, a connect costs no listing.

The door moves only a socket file that is its supervisor's, and, for want of open files,
only while that one holds its home's pid lock (kint/supervisor/ownership.py): one that lost
its home (`run/` removed, another supervisor serving there now) and steps down would
otherwise move, and at its stop unlink, the next one's socket and note. At its stop it
closes the door on its own socket file (its identity) whether it holds the lock or not,
while no other supervisor does: its pid file removed and nobody started since, its socket
still reaches it alone, and tells its stop's new clients so (front_door_stop.py).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Callable

import zmq
from zmq.utils.monitor import recv_monitor_message

from kint.front_closed import (CLOSED_SOCKET, FrontClosed, boot_time, remove_own_note,
                               write_note)
from kint.open_files import WARM_UP_FDS, OpenFiles, open_files
from kint.supervisor.front_door_stop import FrontDoorStop
from kint.supervisor.ownership import FileId, Ownership, file_id

log = logging.getLogger("kint.supervisor")

_EVENTS = zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED
# The longest a listed count is moved by the monitor's events alone before it is listed
# again: a bound on what the events miss (a monitor that dropped some in a crowd).
RECOUNT_S = 1.0


def backlog_for(limit: int) -> int:
    """The front socket's listen backlog under `limit`: ZeroMQ's 100, or less under a low
    limit, since every queued connection is accepted even after the door closes."""
    return max(4, min(100, limit // 16))


def margin_for(limit: int, warm_up_left: int = 0) -> int:
    """The free descriptors below which the door closes: the backlog, a burst accepted
    before the loop looks, and the supervisor's own needs; and while the forkserver
    warms up, the descriptors its warm-up may yet open (`warm_up_left`), which the loop's
    listing does not see coming: a crowd let in to the usual margin then left the
    warm-up too few, and the next accept met EMFILE (libzmq's abort)."""
    return backlog_for(limit) + 8 + limit // 32 + warm_up_left


def reopen_at(files: OpenFiles, warm_up_left: int = 0) -> int:
    """The free descriptors at which a closed door opens again: twice the margin, for a
    gap that keeps it from flapping, but never more than the reserve. The workers may
    take every descriptor but the reserve (kint/open_files.py), and under a limit below
    about 1600 twice the margin is more than that (28 against 24 at 64): a door waiting
    for it stayed closed for good once the workers filled their room, with no client
    left. The margin is below the reserve at every limit, so the door closes only for
    clients, and opens once they leave. While the forkserver warms up, above that margin,
    what the warm-up may yet open included: no sooner than the door would close again."""
    margin = margin_for(files.limit, warm_up_left)
    return max(margin + 1, min(2 * margin, files.reserve))


class FrontDoor(FrontDoorStop):
    """The door of the supervisor's front socket. While `closed`, the socket's file is
    moved aside on purpose: the rebinding checks leave it so."""

    def __init__(self, front: zmq.Socket, warming: Callable[[], bool] = lambda: False,
                 started: float = 0.0, ownership: Ownership | None = None) -> None:
        self.front = front
        # When this supervisor took its home (unix time, and on front_closed.boot_time),
        # for the note (FrontClosed).
        self.started = started
        self.started_boot = boot_time()
        # Its pid lock and socket files (None: code that embeds a door, no lock to lose).
        self.ownership = ownership
        # The identity of the socket file the door moved aside: only that one is moved
        # back, or unlinked at the stop.
        self._moved: FileId | None = None
        # The descriptors the supervisor held, its clients' left out, as the forkserver's
        # warm-up began (`before_warm_up`): what the warm-up opened since is above it.
        self._warm_base: int | None = None
        # Whether the worker forkserver still warms up (Spawner.ready not yet set).
        self.warming = warming
        self.monitor: zmq.Socket | None = None
        self.closed: FrontClosed | None = None
        self.episodes = 0
        # The connections of the clients connected now, by descriptor, as the monitor told
        # their accepts and disconnects (`clients`), each with the endpoint of the listener
        # that took it (front_listeners.py: an old one stays bound while they live).
        self._connected: dict[int, str] = {}
        self._limit: int | None = None
        # (open descriptors, clients, time.monotonic()) at the last listing; None: list
        # at the next look.
        self._listed: tuple[int, int, float] | None = None
        # How many listings the door made: what it costs the loop (bench_front_door.py).
        self.listings = 0

    def prepare(self) -> None:
        """Before the front socket binds: a backlog that fits the limit, and the monitor
        (where there is a limit to keep under). Started after the bind, it missed the
        accept of a client that connected in between (`kint supervisor start`'s own wait
        for its answer) but told that client's disconnect: `clients` stayed one short."""
        files = open_files()
        if files is not None:
            self._limit = files.limit
            self.front.setsockopt(zmq.BACKLOG, backlog_for(files.limit))
            self.monitor = self.front.get_monitor_socket(_EVENTS)

    def on_events(self, front_path: Path | None) -> None:
        """Read what the monitor has, then look at the count."""
        self._count()
        self.look(front_path)

    @property
    def clients(self) -> int:
        """Clients connected now, as the monitor told their accepts and disconnects."""
        return len(self._connected)

    def connections_through(self, endpoint: str) -> int:
        """The connections the listener bound at `endpoint` took that are still there, as
        the monitor has told them to the door's last look (front_listeners.py unbinds an
        old listener once it has none). Its events are not read here: read outside
        `on_events`, a burst of accepts would be counted with no look after them to close
        the door. A disconnect not yet read only keeps an old listener a second longer;
        one whose file is gone takes no new connection to miss."""
        return sum(1 for through in self._connected.values() if through == endpoint)

    def _count(self) -> None:
        """Each event names its connection's descriptor: a disconnect is counted only for
        a connection the door counted in. A plain tally took every disconnect off, those
        of connections an unbind had already forgotten too, and went below zero for good.
        The monitor tells events in order, so a descriptor that a new connection reuses is
        told disconnected for the old one before it is told accepted for the new one."""
        while self.monitor is not None:
            try:
                told = recv_monitor_message(self.monitor, zmq.NOBLOCK)
            except zmq.Again:
                break
            if told["event"] == zmq.EVENT_ACCEPTED:
                endpoint = told.get("endpoint", b"")
                self._connected[int(told["value"])] = (
                    endpoint.decode(errors="replace") if isinstance(endpoint, bytes)
                    else str(endpoint))
            else:
                self._connected.pop(int(told["value"]), None)

    def recount(self) -> None:
        """The supervisor opened descriptors no monitor event tells (a worker spawned, the
        forkserver ready): the next look lists them."""
        self._listed = None

    @property
    def lost(self) -> bool:
        """Closed for want of open files, and the socket it moved aside removed since
        (`_lost`): the supervisor binds its front socket again under the moved-aside name
        (`adopt`)."""
        return self.closed is not None and not self.closed.stopping and self._moved is None

    def adopt(self, front_path: Path) -> None:
        """The front socket bound again while the door is closed (`lost`), its file put at
        the moved-aside name beside `front_path`: the door's again, the note written again
        (the folder may have gone with the socket), and reopened by the usual look once
        enough descriptors are free."""
        assert self.closed is not None
        self._moved = file_id(front_path.parent / CLOSED_SOCKET)
        self._listed = None
        try:
            write_note(front_path.parent, self.closed)
        except OSError as err:
            log.warning("could not write %s again: %s", front_path.parent, err)

    def _far_from_margin(self, limit: int, margin: int) -> bool:
        """Whether the count listed last, moved by the clients told since, leaves at least
        twice `margin` free, and is younger than RECOUNT_S: the door, open, stays open
        without a listing."""
        listed = self._listed
        if listed is None or self.closed is not None:
            return False
        open_now = listed[0] + self.clients - listed[1]
        return limit - open_now >= 2 * margin and time.monotonic() - listed[2] < RECOUNT_S

    def _holds(self) -> bool:
        return self.ownership is None or self.ownership.holds_lock()

    def _ours(self, path: Path) -> bool:
        """Whether the socket file at `path` is the one its supervisor bound, while it holds
        its home: the only one the door may move aside."""
        return self.ownership is None or (self.ownership.holds_lock()
                                          and self.ownership.socket_is_ours(path))

    def _moved_is_ours(self, path: Path) -> bool:
        """Whether the file moved aside beside `path` is still the one the door moved, while
        its supervisor holds its home."""
        return self._holds() and self._moved_is_own(path)

    def _moved_is_own(self, path: Path) -> bool:
        """Whether the file moved aside beside `path` is still the one the door moved (its
        identity), while no other supervisor holds the home, the lock its own or nobody's
        (its pid file removed): what a stop closes and clears (`close_for_stop`)."""
        return (self._moved is not None
                and file_id(path.parent / CLOSED_SOCKET) == self._moved
                and self._nobody_else())

    def before_warm_up(self) -> None:
        """Just before the forkserver's warm-up begins, its sockets bound: what the
        supervisor holds then, its clients' connections left out, is where the warm-up's
        descriptors are counted from (`_warm_up_left`)."""
        # The clients told first, then the listing: one accepted in between is in the
        # listing and not yet told, and counted the supervisor's own keeps more room for
        # the warm-up, never less (told after the listing, one accepted after it was taken
        # off a count that never had it: the warm-up seen further along than it was).
        self._count()
        files = open_files()
        if files is not None:
            self._warm_base = files.open - self.clients

    def _warm_up_left(self, open_now: int) -> int:
        """What the forkserver's warm-up may yet open: WARM_UP_FDS less what the supervisor
        opened since it began (`before_warm_up`; its clients' connections left out, and a
        worker is spawned only once it is ready). Counted from the first listing instead
        where nobody said when it began: that one may count some of the warm-up's own
        already, and then more is kept than it needs, never less."""
        held = open_now - self.clients
        if self._warm_base is None:
            self._warm_base = held
        return max(0, WARM_UP_FDS - max(0, held - self._warm_base))

    def _note(self, files: OpenFiles | None, stopping: bool = False) -> FrontClosed:
        count, limit = (files.open, files.limit) if files is not None else (0, 0)
        return FrontClosed(os.getpid(), count, limit, self.clients, time.time(), self.started,
                           stopping, boot_time(), self.started_boot)

    def look(self, front_path: Path | None) -> None:
        """Close or open the door by the descriptors free now."""
        if self._limit is None or front_path is None or (self.closed is not None
                                                         and self.closed.stopping):
            return  # no limit to keep under, or closed for the stop: for good
        if self.lost:
            return  # for the supervisor to bind its front socket again, closed (`adopt`)
        if (self.closed is not None
                and file_id(front_path.parent / CLOSED_SOCKET) != self._moved):
            # Gone or replaced: no door left that `_open` would take for its own.
            self._lost(front_path)
            return
        warming = self.warming()
        # Before a listing, all the warm-up's count: the listing says what it opened.
        if self._far_from_margin(self._limit,
                                 margin_for(self._limit, WARM_UP_FDS if warming else 0)):
            return
        files = open_files()
        self.listings += 1
        if files is None:
            return
        self._listed = (files.open, self.clients, time.monotonic())
        left = self._warm_up_left(files.open) if warming else 0
        free = files.limit - files.open
        if self.closed is None and free < margin_for(files.limit, left):
            # Else gone or another's: for the ownership check to bind, or to step down.
            if os.path.exists(front_path) and self._ours(front_path):
                self._close(front_path, files)
        elif self.closed is not None and free >= reopen_at(files, left):
            self._open(front_path, files)

    def _close(self, path: Path, files: OpenFiles) -> None:
        """Note, then move the socket file aside. The look that found it the supervisor's
        (`_ours`) and the move are two steps, as at the stop: the move looks at the file it
        moved and puts back one another supervisor bound in between (`_move_aside`)."""
        closed = self._note(files)
        try:
            write_note(path.parent, closed)
            moved = self._move_aside(path)
        except OSError as err:
            remove_own_note(path.parent, closed.pid, closed.started)
            log.warning("could not close the front socket to new clients at %d of %d open "
                        "files: %s", files.open, files.limit, err)
            return
        if not moved:
            remove_own_note(path.parent, closed.pid, closed.started)
            log.warning("%s is another supervisor's socket file now (it took the home as "
                        "this one's door closed): left to it", path)
            return
        self.closed = closed
        self.episodes += 1
        log.warning("%d of %d open files (ulimit -n) in use, %d by clients: new clients are "
                    "refused until some close (%s moved aside); the clients connected are "
                    "served", files.open, files.limit, self.clients, path)

    def _open(self, path: Path, files: OpenFiles) -> None:
        """Move the socket file back to its path. A rename replaces what is there, which
        while its supervisor holds the home's lock (`_moved_is_ours`) is no other
        supervisor's (one binds only once it holds the lock): a stray file, which the
        supervisor's check would replace by binding too. Only a successor started in the
        microseconds after that look could lose its file, which needs this one's pid file
        removed as well; not guarded."""
        if not self._moved_is_ours(path):
            return  # no longer its home: the ownership check steps it down
        try:
            os.rename(path.parent / CLOSED_SOCKET, path)
        except OSError as err:
            log.warning("could not open the front socket to new clients again: %s", err)
            return
        assert self.closed is not None
        remove_own_note(path.parent, self.closed.pid, self.closed.started)
        self._moved = None
        log.info("%d of %d open files in use: taking new clients again after %.0fs",
                 files.open, files.limit, time.time() - self.closed.since)
        self.closed = None

    def _lost(self, path: Path) -> None:
        """The moved socket file is gone (its folder removed, or the file): there is no
        door left to open. Said once; the door stays closed, and the supervisor's check of
        its sockets binds the front socket again under the moved-aside name (`lost`,
        `adopt`), its clients' connections kept (front_listeners.py). Forgotten and bound
        again at the socket's path, it let every client the unbind had ended reconnect at
        once, with those it had kept out: a burst faster than the loop, and libzmq's
        abort under a low limit."""
        log.warning("%s (the front socket moved aside for want of open files) was removed; "
                    "binding the front socket again, still closed to new clients",
                    path.parent / CLOSED_SOCKET)
        self._moved = None

    def as_json(self) -> dict[str, Any]:
        return {"closed": self.closed._asdict() if self.closed is not None else None,
                "episodes": self.episodes, "clients": self.clients}
