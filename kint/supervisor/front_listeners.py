"""The front socket's listeners: bound again beside the old one, never in its place.

When the front socket's file is removed or replaced under a running supervisor (its folder
cleaned, the file deleted, or moved aside by its door and that file removed), it binds the
socket again (kint/supervisor/housekeeping.py). Unbinding the old listener first ended
every connection made through it, and each of those clients reconnected ~0.1-0.2 s later
(ZeroMQ's reconnect interval and its jitter), all of them together and faster than one turn
of the loop that keeps the front door (front_door.py): under a low `ulimit -n` that burst
took the supervisor's last descriptors, and libzmq aborted it at the next accept (EMFILE,
`Too many open files (src/ipc_listener.cpp:297)`, SIGABRT, no log line), as flaky29 saw.

So the old listener stays bound while any connection made through it lives: its file is
gone, so it accepts nobody new, and its clients are served on as if nothing happened. The
new listener is bound under a name of its own (its endpoint, which the door's monitor
names in every accept and disconnect, must differ from the old one's, and an unbind by
name ends every listener of that name) and then renamed to where clients look for it:
the socket's path, or the moved-aside name while the door stays closed. An old listener
with no connection left is unbound (a descriptor each). Without the door's monitor (no
limit to count against) nothing tells its connections apart, and it is unbound at once,
as before.
"""

from __future__ import annotations

import itertools
import logging
import os
from pathlib import Path
from typing import Callable

import zmq

log = logging.getLogger("kint.supervisor")


class FrontListeners:
    """The endpoint the front socket listens on now, and the older ones still bound for
    the connections made through them."""

    def __init__(self, front: zmq.Socket) -> None:
        self.front = front
        self.endpoint: str | None = None
        self.retired: list[str] = []
        self._names = itertools.count(1)

    def bind(self, path: Path) -> None:
        """The first binding, at the socket's path."""
        self.front.bind(f"ipc://{path}")
        self.endpoint = self._last_endpoint()

    def bind_again(self, folder: Path, target: Path) -> None:
        """Bind a new listener, under a name of its own in `folder`, and move its file to
        `target`; the listener before it is retired, still bound (`unbind_idle`). Nothing
        changes when either step fails (OSError or ZMQError, for the caller to retry)."""
        temp = self._free_name(folder)
        self.front.bind(f"ipc://{temp}")
        endpoint = self._last_endpoint()
        try:
            os.rename(temp, target)
        except OSError:
            self._unbind(endpoint)
            temp.unlink(missing_ok=True)
            raise
        if self.endpoint is not None:
            self.retired.append(self.endpoint)
        self.endpoint = endpoint

    def unbind_idle(self, connections: Callable[[str], int] | None) -> None:
        """Unbind each retired listener that no connection uses any more, as the door's
        monitor counts them (`connections(endpoint)`); each one at once where there is no
        monitor (None)."""
        for endpoint in list(self.retired):
            if connections is None or connections(endpoint) == 0:
                self._unbind(endpoint)
                self.retired.remove(endpoint)

    def _free_name(self, folder: Path) -> Path:
        """A name in `folder` no listener bound now has, no longer than the back socket's
        (`workers.sock`): a socket folder is chosen so that those fit in an ipc address
        (kint.paths), and a longer name could fail to bind where the first did."""
        bound = {self.endpoint, *self.retired}
        while True:
            path = folder / f"kint.new{next(self._names) % 1000}"
            if f"ipc://{path}" not in bound:
                return path

    def _unbind(self, endpoint: str) -> None:
        try:
            self.front.unbind(endpoint)
        except zmq.ZMQError as err:
            log.info("could not unbind %s: %s", endpoint, err)

    def _last_endpoint(self) -> str:
        raw = self.front.getsockopt(zmq.LAST_ENDPOINT)
        return raw.decode() if isinstance(raw, bytes) else str(raw)
