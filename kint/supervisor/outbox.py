"""Replies to clients, never dropped in silence.

A ROUTER drops a message when the pipe to its peer is full (the peer's high-water mark),
and says nothing. A client that sends thousands of requests before it reads a reply (a
flood, a script) would then lose answers: up to a quarter of a 10,000-request flood went
unanswered that way. The front socket therefore runs with ROUTER_MANDATORY, which turns
that silent drop into EAGAIN, and a reply that cannot leave yet waits here, in order, for
the client's pipe to drain. What is still dropped is said:

- a client that went away (EHOSTUNREACH): nobody is left to answer; counted.
- a client that has `max_waiting` replies waiting and reads none: the oldest waiting
  reply gives way, with a warning in the log, and counted; memory stays bounded
  whatever a client does.
"""

from __future__ import annotations

import collections
import logging

import zmq

from kint.zmq_frames import send_frames

log = logging.getLogger("kint.supervisor")

# Per client: far more than any flood a well-behaved client reads back (a reply is a few
# hundred bytes, so this is tens of MB at worst).
MAX_WAITING_PER_CLIENT = 100_000


class Outbox:
    def __init__(self, sock: zmq.Socket, max_waiting: int = MAX_WAITING_PER_CLIENT) -> None:
        self.sock = sock
        self.max_waiting = max_waiting
        self._waiting: dict[bytes, collections.deque[bytes]] = {}
        self.gone = 0  # replies to clients that had disconnected
        self.dropped = 0  # replies dropped for a client that reads nothing

    def waiting(self) -> int:
        return sum(len(q) for q in self._waiting.values())

    def backlogged(self) -> bool:
        return bool(self._waiting)

    def send(self, identity: bytes, data: bytes) -> None:
        queue = self._waiting.get(identity)
        if queue is None:
            if self._try(identity, data):
                return
            queue = self._waiting[identity] = collections.deque()
        if len(queue) >= self.max_waiting:
            queue.popleft()
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 10_000 == 0:
                log.warning("a client has %d replies waiting and reads none; dropped the "
                            "oldest (%d dropped so far)", len(queue), self.dropped)
        queue.append(data)

    def flush(self) -> None:
        """Send what waits, per client in order, until each client's pipe is full again."""
        for identity in list(self._waiting):
            queue = self._waiting[identity]
            while queue and self._try(identity, queue[0]):
                queue.popleft()
            if not queue:
                del self._waiting[identity]

    def _try(self, identity: bytes, data: bytes) -> bool:
        """Send now if the client's pipe has room. True when the reply is dealt with (sent,
        or its client is gone); False when it must wait."""
        try:
            send_frames(self.sock, (identity, data))
            return True
        except zmq.Again:
            return False
        except zmq.ZMQError as err:
            if err.errno != zmq.EHOSTUNREACH:
                raise
            self.gone += 1
            if self.gone == 1 or self.gone % 1000 == 0:
                log.info("a client went away before its reply (%d such replies so far)",
                         self.gone)
            return True
