"""MCP progress for a long kint call: while a `memory_pull` or `memory_push` whose request
carries a `progressToken` waits on the worker, each new progress line the worker publishes
("pull: applying epoch 7 (3 of 12)", "push: epoch 1 of 2 (40 rows)") goes to the client as
a `notifications/progress`, the line as its `message`.

The line is the one `kint pull`/`kint push` show on a terminal (kint.commands.common): the
worker's heartbeat carries it and the supervisor's status gives it (kint.supervisor.status),
so reading it never waits on the worker. It is read once a second on a socket of its own,
since the session's is held by the very call it reports on, and sent only when it is the
call's own (its op, begun since the call started: kint.client.Client.progress_line), not
the last line of an earlier op that the supervisor still shows. `progress` counts the lines
sent (it must only grow); no `total` is given, because the worker's line is the only
measure there is and its epochs are not known up front (a pull walks back to find them).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Awaitable, Callable

import anyio
import anyio.to_thread

from kint.client import Client

log = logging.getLogger("kint.server")

# The tools whose calls report progress, with the worker's op each runs: the two that
# apply or anchor epochs one by one.
REPORTED = {"memory_pull": "pull", "memory_push": "push"}
POLL_S = 1.0


class ProgressLines:
    """The worker's progress line for one space, from the supervisor's status."""

    def __init__(self, home: Path, space16: str) -> None:
        self.home, self.space16 = home, space16
        self._client: Client | None = None
        self._lock = threading.Lock()  # one thread at a time on a ZeroMQ socket

    def line(self, op: str, sent_at: float) -> str | None:
        """The line of the space's `op` begun since `sent_at` (time.monotonic()), or None."""
        with self._lock:
            if self._client is None:
                self._client = Client(self.home, autostart=False)
            return self._client.progress_line(self.space16, op, sent_at)

    def close(self) -> None:
        """Close the socket, unless a read still uses it (the server exits anyway)."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            if self._client is not None:
                self._client.close()
                self._client = None
        finally:
            self._lock.release()


async def report(read: Callable[[], str | None],
                 send: Callable[[float, str], Awaitable[None]]) -> None:
    """Send each new line `read` gives, once a second, until cancelled. A line that cannot
    be sent ends the reports, never the call they report on."""
    shown: str | None = None
    sent = 0
    while True:
        await anyio.sleep(POLL_S)
        try:
            # Not waited for once the call is answered: the read ends within its 2 s.
            line = await anyio.to_thread.run_sync(read, abandon_on_cancel=True)
            if not line or line == shown:
                continue
            sent += 1
            shown = line
            await send(float(sent), line)
        except Exception as err:  # noqa: BLE001 - a closed transport, a client gone
            log.info("progress not sent (%s); the call goes on without it", err)
            return
