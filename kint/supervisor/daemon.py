"""The supervisor's event loop: two ROUTER sockets and the workers' exit sentinels under
one `zmq.Poller`, in a single thread that never waits on a worker.

Front (`kint.sock`): clients' requests in, replies out. Back (`workers.sock`): workers'
hellos, beats and replies in, requests and stops out. Every request is validated before
it is routed; every request carries one monotonic deadline, computed when it arrives;
when it passes the client gets TIMEOUT naming what the worker is doing, the work goes on,
and the late reply is dropped by id.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import zmq

from kint import __version__
from kint.logs import log_max_bytes, rotate_if_large, rotated_logs
from kint.paths import (atomic_write, back_address, ensure_private_dir, front_address,
                        run_dir, socket_dir)
from kint.protocol import ErrorCode, ProtocolError, decode_request
from kint.protocol import worker_wire
from kint.protocol.envelope import Reply, encode_reply, error_reply, ok_reply, reply_from_error
from kint.protocol.limits import MAX_WAITING_PER_SPACE, SOCKET_MAX_MESSAGE_BYTES
from kint.protocol.ops import OPS
from kint.spaces import space_id as compute_space_id
from kint.spaces import space_label
from kint.supervisor.bindings import Binding, Bindings
from kint.supervisor.code_watch import EXIT_UPGRADED, code_signature
from kint.supervisor.settings import Settings
from kint.supervisor.spawner import Spawner
from kint.supervisor.workers import Pending, WorkerHandle, describe_exit
from kint.tenant_worker.config import WorkerConfig

log = logging.getLogger("kint.supervisor")

HOUSEKEEPING_EVERY_S = 5.0  # how often the supervisor checks its logs' size and kint's files


class Supervisor:
    def __init__(self, home: Path, settings: Settings, spawner: Spawner | None = None) -> None:
        self.home = home
        self.settings = settings
        self.spawner = spawner or Spawner()
        self.handles: dict[str, WorkerHandle] = {}
        self.bindings = Bindings(home)
        self._by_identity: dict[bytes, WorkerHandle] = {}
        self._sentinels: dict[int, WorkerHandle] = {}
        self._deadlines: list[tuple[float, str, str]] = []
        self._ids = itertools.count(1)
        self.started_at = time.monotonic()
        self.log_max_bytes = log_max_bytes()
        self._code = code_signature()
        # Set once kint's installed files changed: stop when nothing is in flight.
        self.upgraded = False
        self.exit_code = 0
        self._housekeeping_at = self.started_at
        self._log_rotate_failed = False
        self.shutting_down = False
        self._stop_waiters: list[tuple[bytes, str]] = []
        self._stop_signalled = False
        self.zctx = zmq.Context()
        self.front = self.zctx.socket(zmq.ROUTER)
        self.back = self.zctx.socket(zmq.ROUTER)
        self.poller = zmq.Poller()

    # -- set-up ----------------------------------------------------------------------------

    def bind(self) -> None:
        ensure_private_dir(run_dir(self.home))
        sockets = ensure_private_dir(socket_dir(self.home))
        if sockets != run_dir(self.home):
            atomic_write(run_dir(self.home) / "socket-dir", f"{sockets}\n".encode())
        self.front.setsockopt(zmq.LINGER, 0)
        self.front.setsockopt(zmq.MAXMSGSIZE, SOCKET_MAX_MESSAGE_BYTES)
        self.back.setsockopt(zmq.LINGER, 0)
        self.back.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.back.setsockopt(zmq.ROUTER_HANDOVER, 1)
        old_umask = os.umask(0o077)
        try:
            self.front.bind(front_address(self.home))
            self.back.bind(back_address(self.home))
        finally:
            os.umask(old_umask)
        self.poller.register(self.front, zmq.POLLIN)
        self.poller.register(self.back, zmq.POLLIN)

    def request_stop(self, *_: Any) -> None:
        """Signal handler: begin a clean stop at the next turn of the loop."""
        self._stop_signalled = True

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> None:
        log.info("supervisor %d serving %s (kint %s)", os.getpid(), front_address(self.home),
                 __version__)
        while True:
            if self._stop_signalled and not self.shutting_down:
                self.begin_shutdown()
            if self.shutting_down and not any(h.alive for h in self.handles.values()):
                break
            timeout = self.settings.tick_s
            if self._deadlines:
                timeout = max(0.0, min(timeout, self._deadlines[0][0] - time.monotonic()))
            for sock, _ in self.poller.poll(timeout * 1000):
                if sock is self.front:
                    self._drain(self.front, self._on_front)
                elif sock is self.back:
                    self._drain(self.back, self._on_back)
                elif isinstance(sock, int) and sock in self._sentinels:
                    self._on_exit(self._sentinels[sock])
            self.tick(time.monotonic())
        for identity, rid in self._stop_waiters:
            self._send_front(identity, ok_reply(rid, {"stopped": True}))
        log.info("supervisor %d stopped", os.getpid())

    def close(self) -> None:
        self.front.close(linger=500)
        self.back.close(linger=0)
        self.zctx.term()
        for address in (front_address(self.home), back_address(self.home)):
            try:
                os.unlink(address.removeprefix("ipc://"))
            except FileNotFoundError:
                pass

    @staticmethod
    def _drain(sock: zmq.Socket, handler: Any) -> None:
        for _ in range(1000):  # bounded, so one busy client cannot starve the other socket
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            handler(frames)

    # -- front: clients --------------------------------------------------------------------

    def _send_front(self, identity: bytes, reply: Reply) -> None:
        try:
            self.front.send_multipart([identity, encode_reply(reply)], zmq.NOBLOCK)
        except zmq.ZMQError as err:
            log.info("could not answer a client (%s); dropped", err)

    def _on_front(self, frames: list[bytes]) -> None:
        identity = frames[0]
        if len(frames) != 2:
            self._send_front(identity, error_reply(
                None, ErrorCode.BAD_REQUEST, "a request is exactly one frame"))
            return
        try:
            request = decode_request(frames[1])
        except ProtocolError as err:
            self._send_front(identity, reply_from_error(err))
            return
        spec = OPS[request.op]
        try:
            if spec.target == "supervisor":
                from kint.supervisor.commands import COMMANDS

                reply = COMMANDS[request.op](self, identity, request)
                if reply is not None:
                    self._send_front(identity, reply)
            else:
                self._route(identity, request)
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
        sid = compute_space_id(label)
        handle = self.handles.get(sid)
        if handle is not None:
            _same_store(sid, label, handle.db, handle.tenant, request)
            return handle
        bound = self.bindings.get(sid)  # from before this supervisor started
        if bound is not None:
            _same_store(sid, label, bound.db, bound.tenant, request)
        handle = WorkerHandle(space_id=sid, label=label, tenant=request.tenant, db=request.db)
        self.handles[sid] = handle
        self._by_identity[handle.space16.encode()] = handle
        self.bindings.bind(sid, Binding(label, request.tenant, request.db))
        return handle

    def _route(self, identity: bytes, request: Any) -> None:
        if self.shutting_down:
            raise ProtocolError(ErrorCode.WORKER_DOWN, "the supervisor is stopping",
                                "try again once it has stopped; the next call starts a new one")
        handle = self._handle_for(request)
        now = time.monotonic()
        if handle.state == "quarantined":
            raise ProtocolError(ErrorCode.QUARANTINED, self._quarantine_message(handle, now))
        if handle.waiting() >= MAX_WAITING_PER_SPACE:
            raise ProtocolError(
                ErrorCode.BUSY,
                f"space {handle.space16} already has {handle.waiting()} requests waiting",
            )
        internal_id = str(next(self._ids))
        message = request.to_dict()
        message["id"] = internal_id
        deadline = now + request.timeout_ms / 1000.0
        pending = Pending(internal_id=internal_id, client=None if request.cast else identity,
                          client_id=request.id, op=request.op, deadline=deadline,
                          timeout_ms=request.timeout_ms, message=message)
        handle.pending[internal_id] = pending
        heapq.heappush(self._deadlines, (deadline, handle.space_id, internal_id))
        handle.last_activity = now
        if handle.state in ("idle", "stopped") and not handle.alive:
            self.spawn(handle)
        elif handle.state in ("ready", "busy"):
            self._forward(handle, pending)

    def _forward(self, handle: WorkerHandle, pending: Pending) -> None:
        try:
            self.back.send_multipart(
                [handle.space16.encode(),
                 worker_wire.encode({"kind": "req", "request": pending.message})],
                zmq.NOBLOCK)
            pending.forwarded = True
        except zmq.ZMQError as err:
            log.info("space %s: worker not reachable yet (%s); request stays queued",
                     handle.space16, err)

    def _answer(self, handle: WorkerHandle, pending: Pending, reply: Reply) -> None:
        handle.pending.pop(pending.internal_id, None)
        if pending.client is not None:
            reply.id = pending.client_id
            self._send_front(pending.client, reply)

    def _quarantine_message(self, handle: WorkerHandle, now: float) -> str:
        retry = max(0.0, (handle.quarantined_until or now) - now)
        return (f"space {handle.space16} is quarantined after {len(handle.crash_times)} "
                f"restarts in {self.settings.restart_window_s:.0f}s; last exit: "
                f"{handle.last_exit}; next retry in {retry:.0f}s")

    # -- back: workers ---------------------------------------------------------------------

    def _on_back(self, frames: list[bytes]) -> None:
        if len(frames) != 2:
            return
        identity, raw = frames
        handle = self._by_identity.get(identity)
        if handle is None:
            log.warning("message from unknown worker identity %r dropped", identity[:32])
            return
        try:
            msg = worker_wire.decode_from_worker(raw)
        except ProtocolError as err:
            log.warning("space %s: bad worker message dropped: %s", handle.space16, err.message)
            return
        now = time.monotonic()
        kind = msg["kind"]
        if kind == "reply":
            reply_obj = msg["reply"]
            pending = handle.pending.get(reply_obj["id"])
            if pending is None:
                log.info("space %s: late reply %s dropped", handle.space16, reply_obj["id"])
                return
            if reply_obj["ok"]:
                result = reply_obj.get("result")
                reply = ok_reply(None, result if isinstance(result, dict) else {})
            else:
                code = reply_obj.get("error")
                try:
                    code = ErrorCode(code)
                except ValueError:
                    code = ErrorCode.INTERNAL
                reply = error_reply(None, code, str(reply_obj.get("message") or ""),
                                    reply_obj.get("hint") if isinstance(reply_obj.get("hint"),
                                                                        str) else None)
            self._answer(handle, pending, reply)
            return
        if msg["pid"] != handle.pid:
            return  # a worker that was already replaced
        if kind == "fatal":
            handle.fatal_reason = msg["reason"]
        elif kind == "hello":
            handle.hello_at = now
            handle.last_beat_at = now
            if handle.state == "starting":
                handle.state = "ready"
            for pending in handle.queued():
                self._forward(handle, pending)
        elif kind == "beat":
            handle.beat = msg["state"]
            handle.last_beat_at = now
            if handle.state in ("ready", "busy"):
                handle.state = "busy" if handle.beat.get("inflight") else "ready"

    # -- lifecycle -------------------------------------------------------------------------

    def spawn(self, handle: WorkerHandle) -> None:
        config = WorkerConfig(space_id=handle.space_id, label=handle.label, tenant=handle.tenant,
                              db=handle.db, kint_home=str(self.home),
                              back_address=back_address(self.home),
                              supervisor_pid=os.getpid())
        now = time.monotonic()
        handle.stop_reason = None
        handle.stop_deadline = None
        handle.kill_at = None
        handle.hung_reason = None
        handle.fatal_reason = None
        handle.hello_at = None
        handle.last_beat_at = None
        handle.beat = {}
        handle.spawned_at = now
        try:
            proc = self.spawner.spawn(config)
        except Exception as err:
            log.exception("space %s: spawning a worker failed", handle.space16)
            self._crashed(handle, now, f"could not spawn: {err}")
            return
        handle.process = proc
        handle.pid = proc.pid
        handle.state = "starting"
        self._sentinels[proc.sentinel] = handle
        self.poller.register(proc.sentinel, zmq.POLLIN)
        log.info("space %s: worker %d spawned for %s", handle.space16, proc.pid, handle.db)

    def _on_exit(self, handle: WorkerHandle) -> None:
        proc = handle.process
        self.poller.unregister(proc.sentinel)
        del self._sentinels[proc.sentinel]
        proc.join(timeout=1.0)
        exitcode = proc.exitcode
        try:
            proc.close()
        except Exception:
            pass
        now = time.monotonic()
        pid = handle.pid
        handle.process = None
        handle.pid = None
        reason = handle.fatal_reason or describe_exit(exitcode)
        if handle.hung_reason:
            reason = f"hung ({handle.hung_reason}); {describe_exit(exitcode)}"
        for pending in [p for p in handle.pending.values() if p.forwarded]:
            self._answer(handle, pending, error_reply(
                None, ErrorCode.WORKER_DOWN,
                f"the worker of space {handle.space16} {reason} while running {pending.op}"))
        stop_reason = handle.stop_reason
        log.info("space %s: worker %s %s%s", handle.space16, pid, reason,
                 f" (commanded: {stop_reason})" if stop_reason else "")
        if stop_reason == "idle":
            handle.state = "idle"
            if handle.pending and not self.shutting_down:
                self.spawn(handle)
        elif stop_reason == "stop" or self.shutting_down:
            handle.state = "stopped"
        elif stop_reason == "restart":
            self.spawn(handle)
        else:
            self._crashed(handle, now, reason)

    def _crashed(self, handle: WorkerHandle, now: float, reason: str) -> None:
        recent = handle.record_crash(now, reason, self.settings.restart_window_s)
        if recent > self.settings.max_restarts_in_window:
            s = self.settings
            handle.backoff_s = (s.backoff_initial_s if handle.backoff_s is None
                                else min(handle.backoff_s * 2, s.backoff_max_s))
            handle.quarantined_until = now + handle.backoff_s
            handle.state = "quarantined"
            log.warning("space %s quarantined for %.0fs after %d crashes in %.0fs: %s",
                        handle.space16, handle.backoff_s, recent, s.restart_window_s, reason)
            message = self._quarantine_message(handle, now)
            for pending in list(handle.pending.values()):
                self._answer(handle, pending, error_reply(None, ErrorCode.QUARANTINED, message))
            return
        handle.state = "restarting"
        self.spawn(handle)

    def stop_worker(self, handle: WorkerHandle, reason: str, now: float) -> None:
        handle.stop_reason = reason  # type: ignore[assignment]
        handle.stop_deadline = now + self.settings.stop_grace_s
        handle.state = "stopping"
        try:
            self.back.send_multipart(
                [handle.space16.encode(), worker_wire.encode({"kind": "stop", "reason": reason})],
                zmq.NOBLOCK)
        except zmq.ZMQError:
            handle.signal(signal.SIGTERM)

    def begin_shutdown(self) -> None:
        self.shutting_down = True
        now = time.monotonic()
        log.info("supervisor stopping %d worker(s)",
                 sum(1 for h in self.handles.values() if h.alive))
        for handle in self.handles.values():
            if handle.alive:
                self.stop_worker(handle, "stop", now)
            else:
                handle.state = "stopped"
            for pending in list(handle.pending.values()):
                self._answer(handle, pending, error_reply(
                    None, ErrorCode.WORKER_DOWN, "the supervisor is stopping"))

    def add_stop_waiter(self, identity: bytes, rid: str) -> None:
        self._stop_waiters.append((identity, rid))

    # -- the tick: deadlines, heartbeats, quarantine retries, idle exits -------------------

    def tick(self, now: float) -> None:
        while self._deadlines and self._deadlines[0][0] <= now:
            _, sid, internal_id = heapq.heappop(self._deadlines)
            handle = self.handles.get(sid)
            pending = handle.pending.get(internal_id) if handle else None
            if handle is None or pending is None:
                continue
            self._answer(handle, pending, error_reply(
                None, ErrorCode.TIMEOUT,
                f"{pending.op} on space {handle.space16} did not finish within "
                f"{pending.timeout_ms} ms: the worker is {handle.doing(now)}"))
        s = self.settings
        for handle in self.handles.values():
            if handle.alive:
                self._check_alive(handle, now)
            elif (handle.state == "quarantined" and handle.quarantined_until is not None
                  and now >= handle.quarantined_until and not self.shutting_down):
                log.info("space %s: quarantine retry", handle.space16)
                handle.retry_started_at = now
                self.spawn(handle)
            if (handle.backoff_s is not None and handle.state in ("ready", "busy")
                    and handle.retry_started_at is not None and handle.hello_at is not None
                    and now - handle.hello_at >= s.stable_after_s):
                handle.backoff_s = None
                handle.retry_started_at = None
        if now >= self._housekeeping_at:
            self._housekeeping_at = now + HOUSEKEEPING_EVERY_S
            self._rotate_log()
            self._check_upgrade()
        if (self.upgraded and not self.shutting_down
                and not any(h.pending for h in self.handles.values())):
            log.info("nothing in flight: stopping for the new version of kint")
            self.begin_shutdown()

    def _check_upgrade(self) -> None:
        if self.upgraded or self.shutting_down or code_signature() == self._code:
            return
        self.upgraded = True
        self.exit_code = EXIT_UPGRADED
        log.warning("kint's installed files changed (an upgrade): stopping once the requests "
                    "in flight finish, so that the next call starts the new version")

    def _rotate_log(self) -> None:
        """The supervisor alone rotates the shared log; every process reopens it itself."""
        try:
            for path in rotated_logs(self.home):
                if rotate_if_large(path, self.log_max_bytes):
                    log.info("%s was over %d bytes: its older lines are in %s.1",
                             path.name, self.log_max_bytes, path.name)
            self._log_rotate_failed = False
        except OSError as exc:
            if not self._log_rotate_failed:  # once, not every few seconds into that log
                log.warning("could not rotate the log: %s", exc)
            self._log_rotate_failed = True

    def _check_alive(self, handle: WorkerHandle, now: float) -> None:
        s = self.settings
        if handle.kill_at is not None:
            if now >= handle.kill_at:
                log.warning("space %s: worker %s did not exit; SIGKILL", handle.space16,
                            handle.pid)
                handle.signal(signal.SIGKILL)
                handle.kill_at = None
            return
        if handle.state == "stopping":
            if handle.stop_deadline is not None and now >= handle.stop_deadline:
                handle.signal(signal.SIGKILL)
                handle.stop_deadline = None
            return
        silent_since = handle.last_beat_at if handle.last_beat_at is not None else handle.spawned_at
        limit = s.heartbeat_timeout_s if handle.last_beat_at is not None else s.start_timeout_s
        if silent_since is not None and now - silent_since > limit:
            handle.hung_reason = f"no heartbeat for {now - silent_since:.0f}s"
            handle.state = "hung"
            log.warning("space %s: worker %s is hung (%s); SIGTERM, SIGKILL in %.0fs",
                        handle.space16, handle.pid, handle.hung_reason, s.kill_grace_s)
            handle.signal(signal.SIGTERM)
            handle.kill_at = now + s.kill_grace_s
            return
        if (handle.state == "ready" and not handle.pending and not handle.beat.get("has_work")
                and now - handle.last_activity >= s.idle_s and not self.shutting_down):
            log.info("space %s: idle for %.0fs; stopping its worker", handle.space16,
                     now - handle.last_activity)
            self.stop_worker(handle, "idle", now)


def _same_store(sid: str, label: str, db: str, tenant: str, request: Any) -> None:
    """A space is one store of one tenant: anything else asking for it is refused."""
    if db != request.db:
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
