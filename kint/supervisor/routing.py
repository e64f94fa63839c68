"""Clients' requests, from the front socket to their space's worker and back.

Every request is validated before it is routed (`server_codec`), then queued for its
space's worker as the bytes the client sent, with one monotonic deadline computed when it
arrives; the supervisor's own ops (`commands`) are answered here instead. A space is one
store of one tenant: a second store or tenant asking for it is refused SPACE_CONFLICT,
except that a space bound to a store that does not exist (a mistyped --db) moves to an
existing one. Every request gets exactly one answer: the worker's reply frame passed on
as it is, or the supervisor's own (TIMEOUT, WORKER_DOWN, QUARANTINED, BUSY), both through
the `Outbox`.

Kept apart from the loop (kint/supervisor/daemon.py) so the path a request takes is read
in one place. A mixin of `Supervisor`, which owns the sockets, the handles and the
bindings these methods act on.
"""

from __future__ import annotations

import heapq
import logging
import os
import time
from pathlib import Path
from typing import Any, Callable

import zmq

from kint.front_closed import STOPPING_HINT
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.envelope import Reply, error_reply, reply_from_error
from kint.protocol.limits import MAX_WAITING_PER_SPACE
from kint.protocol.ops import OPS
from kint.protocol.server_codec import decode_request, encode_reply
from kint.seconds_text import seconds_text
from kint.spaces import space_id as compute_space_id
from kint.spaces import STORE_HINT, space_label, store_problem
from kint.supervisor.bindings import Binding, Bindings
from kint.supervisor.workers import SERVING_STATES, Pending, WorkerHandle

log = logging.getLogger("kint.supervisor")

# Space ids remembered by label; past this many the memory starts again (a client that
# sends many labels costs keccaks, never memory).
MAX_REMEMBERED_LABELS = 4096


class ClientRouting:
    settings: Any
    handles: dict[str, WorkerHandle]
    bindings: Bindings
    outbox: Any
    shutting_down: bool
    _space_ids: dict[str, str]
    _deadlines: list[tuple[float, str, str]]
    _ids: Any
    # TimedWork's and WorkerLifecycle's own methods, declared for the type checker.
    _forward: Callable[[WorkerHandle, Pending], bool]
    spawn: Callable[[WorkerHandle], None]
    stop_worker: Callable[[WorkerHandle, str, float], None]

    def _send_front(self, identity: bytes, reply: Reply, op: str | None = None) -> None:
        self.outbox.send(identity, encode_reply(reply, op))

    def _on_front(self, frames: list[zmq.Frame]) -> None:
        identity = frames[0].bytes
        if len(frames) != 2:
            self._send_front(identity, error_reply(
                None, ErrorCode.BAD_REQUEST, "a request is exactly one frame"))
            return
        body = frames[1].bytes
        try:
            request = decode_request(body)
        except ProtocolError as err:
            self._send_front(identity, reply_from_error(err))
            return
        spec = OPS[request.op]
        try:
            if spec.target == "supervisor":
                from kint.supervisor.commands import COMMANDS

                reply = COMMANDS[request.op](self, identity, request)
                if reply is not None:
                    self._send_front(identity, reply, request.op)
            else:
                self._route(identity, request, body)
        except ProtocolError as err:
            err.request_id = request.id
            if not request.cast:
                self._send_front(identity, reply_from_error(err))
        except Exception:
            log.exception("supervisor failed on %s", request.op)
            if not request.cast:
                self._send_front(identity, error_reply(
                    request.id, ErrorCode.INTERNAL, f"the supervisor failed on {request.op}"))

    def _handle_for(self, request: Any) -> WorkerHandle:
        assert request.tenant is not None and request.db is not None
        label = request.space or space_label(request.tenant, Path(request.db))
        sid = self._space_id(label)
        handle = self.handles.get(sid)
        if handle is None or handle.db != request.db:
            # A worker is started on (or a space moved to) only a path that can be a store:
            # one on a folder or a file that is not SQLite fails at every start, and its
            # space would stay quarantined for the real store until the supervisor stops.
            # The command line refuses such a path before sending it; this is for every
            # other client. A store already served was checked when its worker started.
            problem = store_problem(request.db)
            if problem is not None:
                raise ProtocolError(ErrorCode.BAD_REQUEST, f"store {request.db} {problem}",
                                    STORE_HINT)
        if handle is not None:
            if (handle.db != request.db and os.path.exists(request.db)
                    and not os.path.exists(handle.db)):
                self._move_space(handle, request)  # a typo's store never blocks the real one
            _same_store(sid, label, handle.db, handle.tenant, request)
            if not self.bindings.holds(sid, label, handle.tenant, handle.db):
                self.bindings.bind_if_exists(sid, Binding(label, handle.tenant, handle.db))
            return handle
        bound = self.bindings.get(sid)  # from before this supervisor started
        if bound is not None:
            _same_store(sid, label, bound.db, bound.tenant, request)
        handle = WorkerHandle(space_id=sid, label=label, tenant=request.tenant, db=request.db)
        self.handles[sid] = handle
        self.bindings.bind_if_exists(sid, Binding(label, request.tenant, request.db))
        return handle

    def _space_id(self, label: str) -> str:
        """The label's space id, remembered: a keccak costs more than the rest of routing."""
        sid = self._space_ids.get(label)
        if sid is None:
            if len(self._space_ids) >= MAX_REMEMBERED_LABELS:
                self._space_ids.clear()
            sid = self._space_ids[label] = compute_space_id(label)
        return sid

    def _move_space(self, handle: WorkerHandle, request: Any) -> None:
        """The space's worker serves a store that does not exist (a mistyped --db) and an
        existing store asks for the space: the space moves to it. A worker still running a
        request for the missing store keeps it until that request is answered (BUSY)."""
        if any(p.forwarded for p in handle.pending.values()):
            raise ProtocolError(ErrorCode.BUSY,
                                f"space {handle.space16} is finishing a request for "
                                f"{handle.db}, a store that does not exist; it moves to "
                                f"{request.db} once that is answered")
        log.info("space %s: its store %s does not exist; the space moves to %s",
                 handle.space16, handle.db, request.db)
        handle.db, handle.tenant = request.db, request.tenant
        if handle.alive:
            self.stop_worker(handle, "restart", time.monotonic())

    def _route(self, identity: bytes, request: Any, body: bytes) -> None:
        """Queue `request` for its space's worker; `body` is its frame as the client sent
        it, which the worker gets as it is (worker_wire)."""
        if self.shutting_down:
            raise ProtocolError(ErrorCode.WORKER_DOWN, "the supervisor is stopping",
                                STOPPING_HINT)
        handle = self._handle_for(request)
        now = time.monotonic()
        if handle.state == "quarantined":
            raise ProtocolError(ErrorCode.QUARANTINED, self._quarantine_message(handle, now))
        if handle.waiting() >= MAX_WAITING_PER_SPACE:
            # Those waiting for an exited worker's last replies count too (last_words.py):
            # a stop or restart with requests in flight frees no place for a second.
            parked = (f" ({handle.parked} of them for the last replies of its worker that "
                      f"exited)" if handle.parked else "")
            raise ProtocolError(
                ErrorCode.BUSY,
                f"space {handle.space16} already has {handle.waiting()} requests "
                f"waiting{parked}",
            )
        internal_id = str(next(self._ids))
        deadline = now + request.timeout_ms / 1000.0
        pending = Pending(internal_id=internal_id, client=None if request.cast else identity,
                          client_id=request.id, op=request.op, deadline=deadline,
                          timeout_ms=request.timeout_ms, body=body)
        handle.pending[internal_id] = pending
        heapq.heappush(self._deadlines, (deadline, handle.space_id, internal_id))
        handle.worked(now)
        if handle.state in ("idle", "stopped") and not handle.alive:
            self.spawn(handle)
        elif handle.state in SERVING_STATES:
            self._forward(handle, pending)

    def _answer(self, handle: WorkerHandle, pending: Pending, reply: Reply) -> None:
        """Answer `pending` with the supervisor's own reply (a TIMEOUT, a WORKER_DOWN)."""
        handle.pending.pop(pending.internal_id, None)
        if pending.client is not None:
            reply.id = pending.client_id
            self._send_front(pending.client, reply)

    def _pass_on(self, handle: WorkerHandle, pending: Pending, body: Any) -> None:
        """Answer `pending` with the worker's reply frame, as the worker encoded it."""
        handle.pending.pop(pending.internal_id, None)
        if pending.client is not None:
            self.outbox.send(pending.client, body)

    def _quarantine_message(self, handle: WorkerHandle, now: float) -> str:
        retry = max(0.0, (handle.quarantined_until or now) - now)
        return (f"space {handle.space16} is quarantined after {len(handle.crash_times)} "
                f"restarts in {seconds_text(self.settings.restart_window_s)}; last exit: "
                f"{handle.last_exit}; next retry in {seconds_text(retry)}")


def _same_store(sid: str, label: str, db: str, tenant: str, request: Any) -> None:
    """A space is one store of one tenant: anything else asking for it is refused. A store
    that is gone asking for the space its worker moved from (`_move_space`: a kint-server
    started over the store before it was moved, whose keepalive and tools name it still)
    is told where the space is now, and that the server reads its store at its start."""
    if db != request.db:
        if not os.path.exists(request.db) and os.path.exists(db):
            raise ProtocolError(
                ErrorCode.SPACE_CONFLICT,
                f"space {sid[:16]} ({label}) is served from the store {db}: {request.db} "
                f"does not exist (the store moved, or the path is mistyped)",
                f"point SIBYL_MEMORY_DB (or --db) at {db}; a kint-server reads it at its "
                f"start, so restart the agent's session")
        raise ProtocolError(
            ErrorCode.SPACE_CONFLICT,
            f"space {sid[:16]} ({label}) is bound to the store {db}; "
            f"{request.db} cannot share it",
        )
    if tenant != request.tenant:
        raise ProtocolError(
            ErrorCode.SPACE_CONFLICT,
            f"space {sid[:16]} ({label}) belongs to tenant {tenant}, not {request.tenant}",
        )
