"""The supervisor's two sockets, bound at its start and bound again when its checks find a
socket file removed or replaced under it (housekeeping.py): the front (`kint.sock`,
clients) and the back (`workers.sock`, its workers), each admitting only this user, and
the poll's items registered once. A mixin of `Supervisor` (kint/supervisor/daemon.py),
which owns the sockets, the door and the listeners these methods act on.

Apart from the loop: a socket bound again is bound in place, never replaced, so the loop's
items stay what they were. The front socket is bound again beside its old listener, whose
clients stay connected (front_listeners.py), and under the moved-aside name while its door
stays closed (front_door.py); a socket file is unlinked only while it is this supervisor's
(ownership.py).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import zmq

from kint.front_closed import CLOSED_SOCKET
from kint.protocol.limits import SOCKET_MAX_MESSAGE_BYTES
from kint.socket_paths import BACK_SOCKET, FRONT_SOCKET, prepare_socket_dir
from kint.supervisor.exits import ExitWatch
from kint.supervisor.front_door import FrontDoor
from kint.supervisor.front_listeners import FrontListeners
from kint.supervisor.ownership import Ownership
from kint.supervisor.peer import admit_only_this_user
from kint.supervisor.workers import WorkerHandle

log = logging.getLogger("kint.supervisor")


class SupervisorSockets:
    home: Path
    front: zmq.Socket
    back: zmq.Socket
    poller: zmq.Poller
    door: FrontDoor
    listeners: FrontListeners
    ownership: Ownership
    exits: ExitWatch[WorkerHandle]
    spawner: Any
    front_path: Path | None
    back_path: Path | None

    def bind(self) -> None:
        self.front.setsockopt(zmq.LINGER, 0)
        self.front.setsockopt(zmq.MAXMSGSIZE, SOCKET_MAX_MESSAGE_BYTES)
        # A reply the client's pipe cannot take raises EAGAIN instead of vanishing; the
        # outbox keeps it until the pipe drains.
        self.front.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.back.setsockopt(zmq.LINGER, 0)
        # Any process of the user can connect here too: a frame past what a worker ever
        # sends ends that connection before ZeroMQ holds it in this process's memory.
        self.back.setsockopt(zmq.MAXMSGSIZE, SOCKET_MAX_MESSAGE_BYTES)
        self.back.setsockopt(zmq.ROUTER_MANDATORY, 1)
        # No handover: a second connection claiming a worker's route is refused, never
        # handed the route (routes are secret anyway, see worker_wire.route_for).
        self.back.setsockopt(zmq.ROUTER_HANDOVER, 0)
        self.door.prepare()
        for sock, name in ((self.front, FRONT_SOCKET), (self.back, BACK_SOCKET)):
            if not admit_only_this_user(sock):
                log.warning("this libzmq cannot check a peer's user on %s; the socket "
                            "folder's mode alone keeps other users out", name)
        self._bind_sockets()
        # The door's monitor first: a turn's events come in this order, and the door
        # closes before the turn's requests are served.
        if self.door.monitor is not None:
            self.poller.register(self.door.monitor, zmq.POLLIN)
        self.poller.register(self.front, zmq.POLLIN)
        self.poller.register(self.back, zmq.POLLIN)
        self.poller.register(self.exits.fileno(), zmq.POLLIN)
        self.poller.register(self.spawner.ready_fd(), zmq.POLLIN)

    def _bind_sockets(self) -> None:
        """Bind (or bind again) each socket whose file is not the one this supervisor
        bound: at start, or after its socket folder or files were removed or replaced. The
        front socket is bound again beside its old listener, whose clients stay connected
        (front_listeners.py), and under the moved-aside name while its door stays closed
        (front_door.FrontDoor.lost)."""
        folder, refused = prepare_socket_dir(self.home)
        if refused:
            log.warning("%s; the sockets are in %s instead", refused, folder)
        for sock, name, attr in ((self.front, FRONT_SOCKET, "front_path"),
                                 (self.back, BACK_SOCKET, "back_path")):
            old: Path | None = getattr(self, attr)
            front = sock is self.front
            if front and self.door.closed is not None and not self.door.lost:
                continue  # moved aside on purpose (front_door): rebinding would drop clients
            path = folder / name
            if old == path and self.ownership.socket_is_ours(path) and not (
                    front and self.door.lost):
                continue
            if old is None:
                # The socket file is 0700 by the process umask (077), set once for the
                # whole process by run_foreground, the one builder of a Supervisor.
                if front:
                    self.listeners.bind(path)
                else:
                    sock.bind(f"ipc://{path}")
            elif front:
                self._bind_front_again(old, path)
            else:
                try:
                    sock.unbind(f"ipc://{old}")
                except zmq.ZMQError:
                    pass
                self._forget_socket(old)
                sock.bind(f"ipc://{path}")
            if old is not None and not (front and self.door.lost):  # else said by the door
                log.warning("%s was removed or replaced under the running supervisor; "
                            "bound it again at %s", old, path)
            setattr(self, attr, path)
            if front and self.door.lost:
                self.ownership.bound(path, path.parent / CLOSED_SOCKET)
                self.door.adopt(path)
            else:
                self.ownership.bound(path)

    def _bind_front_again(self, old: Path, path: Path) -> None:
        """The front socket's new listener, its file at `path` (at the moved-aside name
        while the door stays closed); the one bound at `old` keeps its clients until they
        leave (`unbind_idle_listeners`)."""
        target = path.parent / CLOSED_SOCKET if self.door.lost else path
        self.listeners.bind_again(path.parent, target)
        self._forget_socket(old)
        self.unbind_idle_listeners()

    def _forget_socket(self, old: Path) -> None:
        if self.ownership.socket_is_ours(old):  # the folder moved: leave no stale file
            old.unlink(missing_ok=True)
        self.ownership.forget(old)

    def unbind_idle_listeners(self) -> None:
        """Unbind the front socket's old listeners that no client uses any more."""
        door = self.door
        self.listeners.unbind_idle(door.connections_through if door.monitor is not None
                                   else None)
