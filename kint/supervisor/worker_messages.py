"""What the workers send on the back socket (`workers.sock`): hellos, beats, replies and
fatal reasons, each believed only from the worker the supervisor spawned.

A message counts only when it comes on the route of a worker this supervisor spawned and
carries that spawn's token (`worker_wire`), and a hello only from the pid spawned, where
the kernel says it (`peer`); anything else is dropped, and logged once per route up to a
bound, since an impostor may send many. A worker's exit whose reason is still to come
waits for it (exit_hold.py): the reason, read on the route, has the exit handled at once.
A worker's route is retired when the worker is declared down (hung) or its exit handled:
what still comes on it with its token is its last words (last_words.py): a late reason for
its exit, and a reply its request still waits for after a clean exit (a stop's, or a
user's SIGTERM), the only ones of them that count. A reply is passed on to its client as
the bytes the worker encoded, never decoded here; one whose request was already answered
(a TIMEOUT) is dropped by id, and one larger than a client reads is answered TOO_LARGE.

Kept apart from the loop (kint/supervisor/daemon.py) and from the clients' side
(`routing`) because it is the supervisor's trust boundary towards its workers. A mixin of
`Supervisor`, which owns the routes and handles these methods act on.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable

import zmq

from kint.protocol import ProtocolError, worker_wire
from kint.protocol.server_codec import too_large_reply
from kint.socket_paths import BACK_SOCKET
from kint.supervisor.last_words import RetiredRoute
from kint.supervisor.peer import peer_credentials
from kint.supervisor.workers import SERVING_STATES, Pending, StartRefusal, WorkerHandle

log = logging.getLogger("kint.supervisor")

# Routes of unknown peers logged at most this many times (an impostor may flood).
MAX_REFUSED_LOGGED = 32


class WorkerMessages:
    _by_route: dict[bytes, WorkerHandle]
    _retired_routes: dict[bytes, RetiredRoute]
    _refused_routes: set[bytes]
    # ClientRouting's and TimedWork's own methods, declared for the type checker.
    _pass_on: Callable[[WorkerHandle, Pending, Any], None]
    _forward: Callable[[WorkerHandle, Pending], bool]
    _answer: Callable[[WorkerHandle, Pending, Any], None]
    # LastWords' own (last_words.py, a base of WorkerLifecycle).
    _heard_after: Callable[[bytes, RetiredRoute, dict[str, Any], Any], None]
    _reason_heard: Callable[[WorkerHandle], None]

    def _refuse_peer(self, route: bytes, why: str) -> None:
        """Drop a back-socket message from a peer that is not a worker of this supervisor;
        logged once per route (up to a bound), since an impostor may send many."""
        if route in self._refused_routes or len(self._refused_routes) >= MAX_REFUSED_LOGGED:
            return
        self._refused_routes.add(route)
        log.warning("refused a message on %s from route %r: %s", BACK_SOCKET,
                    route[:32], why)

    def _on_back(self, frames: list[zmq.Frame]) -> None:
        route = frames[0].bytes
        handle = self._by_route.get(route)
        retired = self._retired_routes.get(route) if handle is None else None
        if handle is None and retired is None:
            self._refuse_peer(route, "not the route of any worker this supervisor spawned")
            return
        space16 = handle.space16 if handle is not None else retired.handle.space16
        if len(frames) != 3:
            log.warning("space %s: worker message of %d frames dropped", space16,
                        len(frames) - 1)
            return
        try:
            msg = worker_wire.decode_from_worker(frames[1].bytes, frames[2])
        except ProtocolError as err:
            log.warning("space %s: bad worker message dropped: %s", space16, err.message)
            return
        token = handle.token if handle is not None else retired.token
        if not worker_wire.token_matches(msg, token):
            self._refuse_peer(route, f"the token of space {space16}'s worker is missing "
                              "or wrong")
            return
        if handle is None:
            # Its worker was declared down (hung) or exited: its last words (last_words.py).
            self._heard_after(route, retired, msg, frames[2])
            return
        now = time.monotonic()
        kind = msg["kind"]
        if kind == "reply":
            # Late or not, an answer is work done: the beats that follow it are the first
            # to show what it left (a session attached), which an idle stop waits for.
            handle.worked(now)
            pending = handle.pending.get(msg["id"])
            if pending is None:
                log.info("space %s: late reply %s dropped", handle.space16, msg["id"])
                return
            self._deliver(handle, pending, frames[2])
            return
        if msg["pid"] != handle.pid:
            return  # a worker that was already replaced
        if kind == "fatal":
            handle.fatal_reason = msg["reason"]
            if msg.get("code") is not None:  # a start refused, not a crash (`_exited`)
                handle.start_refused = StartRefusal(msg["code"], msg["hint"],
                                                    msg.get("holder_pid"))
            self._reason_heard(handle)  # its exit, held for this reason, is handled now
        elif kind == "hello":
            refusal = self._hello_refusal(handle, frames[1])
            if refusal is not None:
                self._refuse_peer(route, refusal)
                return
            handle.hello_at = now
            handle.heard(now)
            if handle.state == "starting":
                handle.state = "ready"
            for pending in handle.queued():  # in order; a full pipe keeps the rest queued
                if not self._forward(handle, pending):
                    break
        elif kind == "beat":
            handle.beat = msg["state"]
            handle.heard(now)
            if handle.state in SERVING_STATES:
                handle.state = "busy" if handle.beat.get("inflight") else "ready"

    def _deliver(self, handle: WorkerHandle, pending: Pending, body: zmq.Frame) -> None:
        """A worker's reply to `pending`, to its client: the frame as the worker encoded
        it, or TOO_LARGE for one over what a client reads (the worker refuses its own
        oversized answers; this one got past it: its client gets TOO_LARGE now rather
        than a frame it refuses, or a TIMEOUT). A live worker's, or an exited one's last
        (last_words.py)."""
        if worker_wire.reply_too_large(body):
            size = len(body)
            log.warning("space %s: a %s reply of %d bytes is over the limit; answered "
                        "TOO_LARGE", handle.space16, pending.op, size)
            self._answer(handle, pending, too_large_reply(None, pending.op, size))
            return
        self._pass_on(handle, pending, body)

    @staticmethod
    def _hello_refusal(handle: WorkerHandle, frame: zmq.Frame) -> str | None:
        """Why a hello with the right token is still refused, or None: the kernel says the
        connection is another user's, or another process's than the one spawned."""
        peer = peer_credentials(frame)
        if peer is None:
            return None  # the OS gives no credentials here: the token alone decides
        if peer.uid != os.getuid():
            return f"the peer runs as uid {peer.uid}, not {os.getuid()}"
        if peer.pid is not None and peer.pid != handle.pid:
            return (f"the peer is pid {peer.pid}, not the worker {handle.pid} spawned for "
                    f"space {handle.space16}")
        return None
