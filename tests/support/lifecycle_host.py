"""The part of `Supervisor` that `WorkerLifecycle._check_alive` reads (its settings,
whether it is stopping, and the routes a hung worker's is retired among), for tests that judge a
worker's silence turn by turn with explicit monotonic times.

The real `Supervisor` is not built for them: constructing it makes its ZeroMQ context and
sockets, and marks the test process as the daemon's (`kint.settings.configure(daemon=True)`),
which tests/support/hermetic.py puts back only after the test.
"""

from __future__ import annotations

from kint.supervisor.lifecycle import WorkerLifecycle
from kint.supervisor.settings import Settings


class LifecycleHost(WorkerLifecycle):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.shutting_down = False
        self._by_route = {}
        self._retired_routes = {}
        self._unreplied = {}
        self._held_exits = {}
        self._room_wanted = []
        self._evicting = set()
        self._settle_seen = {}
        self._room_turn = None
