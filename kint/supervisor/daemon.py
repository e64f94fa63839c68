"""The supervisor's event loop: two ROUTER sockets and the workers' exit sentinels (behind
one descriptor, `exits`) under one `zmq.Poller`, in a single thread that never waits on a
worker.

Front (`kint.sock`): clients' requests in, replies out. Back (`workers.sock`): workers'
hellos, beats and replies in, requests and stops out. Every request is validated before
it is routed, then goes to its worker as the bytes the client sent, and the worker's
reply comes back to the client as the bytes the worker encoded: the supervisor routes on
the back socket's small header (`worker_wire`) and never decodes a reply's body. Every
request carries one monotonic deadline, computed when it arrives; when it passes the
client gets TIMEOUT naming what the worker is doing, the work goes on, and the late reply
is dropped by id. What the loop does between messages (deadlines and refused forwards at
every turn, the sweep over every space once per tick) is `timed`'s.

Every request gets exactly one answer: a reply the client's pipe cannot take yet waits in
the `Outbox` instead of being dropped by the ROUTER. A worker is believed only on its
spawn's token and route (`worker_wire`), and its hello only from the pid the supervisor
spawned, where the kernel says it (`peer`). The supervisor checks every second that the
home is still its own (`ownership`): it binds a removed socket again, steps down when its
pid lock was taken from it, and unlinks only sockets it still owns. A turn of its loop
that came late is its own pause, not its workers' silence (`pause`).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import time
from pathlib import Path
from typing import Any

import zmq

from kint import __version__
from kint import settings as kint_settings
from kint.logs import rotate_if_large, rotated_logs
from kint.paths import BACK_SOCKET, FRONT_SOCKET, is_private_dir, prepare_socket_dir
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol import worker_wire
from kint.protocol.envelope import Reply, error_reply, ok_reply, reply_from_error
from kint.protocol.limits import MAX_WAITING_PER_SPACE, SOCKET_MAX_MESSAGE_BYTES
from kint.protocol.ops import OPS
from kint.protocol.server_codec import decode_request, encode_reply
from kint.spaces import space_id as compute_space_id
from kint.spaces import space_label
from kint.supervisor.bindings import Binding, Bindings
from kint.supervisor.code_watch import EXIT_UPGRADED, code_signature
from kint.supervisor.exits import ExitWatch
from kint.supervisor.frames import readable, recv_frames
from kint.supervisor.lifecycle import WorkerLifecycle
from kint.supervisor.outbox import Outbox
from kint.supervisor.ownership import Ownership
from kint.supervisor.pause import ScheduleWatch
from kint.supervisor.peer import peer_credentials
from kint.supervisor.settings import Settings
from kint.supervisor.spawner import Spawner
from kint.supervisor.timed import TimedWork
from kint.supervisor.workers import SERVING_STATES, Pending, WorkerHandle

log = logging.getLogger("kint.supervisor")

HOUSEKEEPING_EVERY_S = 5.0  # how often the supervisor checks its logs' size and kint's files
OWNERSHIP_EVERY_S = 1.0  # how often it checks that its pid lock and sockets are still its own
# Exit code of a supervisor that stepped down because its pid lock was taken: "start me
# again" (EX_TEMPFAIL), so a service manager's restart finds whoever holds the home now.
EXIT_STEPPED_DOWN = 75
# Routes of unknown peers logged at most this many times (an impostor may flood).
MAX_REFUSED_LOGGED = 32
# Space ids remembered by label; past this many the memory starts again (a client that
# sends many labels costs keccaks, never memory).
MAX_REMEMBERED_LABELS = 4096


class Supervisor(WorkerLifecycle, TimedWork):
    def __init__(self, home: Path, settings: Settings, spawner: Spawner | None = None,
                 ownership: Ownership | None = None) -> None:
        self.home = home
        # This process is the daemon: its environment is the "daemon environment" of every
        # setting, and its config file is this home's.
        kint_settings.configure(home=home, daemon=True)
        self.settings = settings
        self.spawner = spawner or Spawner()
        self.ownership = ownership or Ownership()
        self.handles: dict[str, WorkerHandle] = {}
        self.bindings = Bindings(home)
        self._by_route: dict[bytes, WorkerHandle] = {}
        self._space_ids: dict[str, str] = {}
        self._refused_routes: set[bytes] = set()
        self.exits: ExitWatch[WorkerHandle] = ExitWatch()
        self._deadlines: list[tuple[float, str, str]] = []
        self._stalled: set[str] = set()
        self._ids = itertools.count(1)
        self.started_at = time.monotonic()
        self._code = code_signature()
        # Set once kint's installed files changed: stop when nothing is in flight.
        self.upgraded = False
        self.exit_code = 0
        self._sweep_at = self.started_at
        self._housekeeping_at = self.started_at
        self._ownership_at = self.started_at
        self._log_rotate_failed = False
        self._schedule = ScheduleWatch(settings.tick_s,
                                       min(1.0, settings.heartbeat_timeout_s / 4))
        self.shutting_down = False
        self._stop_waiters: list[tuple[bytes, str]] = []
        self._stop_signalled = False
        self.zctx = zmq.Context()
        self.front = self.zctx.socket(zmq.ROUTER)
        self.back = self.zctx.socket(zmq.ROUTER)
        self.outbox = Outbox(self.front)
        self.poller = zmq.Poller()
        self.front_path: Path | None = None
        self.back_path: Path | None = None

    @property
    def front_address(self) -> str:
        return f"ipc://{self.front_path}"

    @property
    def back_address(self) -> str:
        return f"ipc://{self.back_path}"

    # -- set-up ----------------------------------------------------------------------------

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
        self._bind_sockets()
        self.poller.register(self.front, zmq.POLLIN)
        self.poller.register(self.back, zmq.POLLIN)
        self.poller.register(self.exits.fileno(), zmq.POLLIN)

    def _bind_sockets(self) -> None:
        """Bind (or bind again) each socket whose file is not the one this supervisor
        bound: at start, or after its socket folder or files were removed or replaced."""
        folder, refused = prepare_socket_dir(self.home)
        if refused:
            log.warning("%s; the sockets are in %s instead", refused, folder)
        for sock, name, attr in ((self.front, FRONT_SOCKET, "front_path"),
                                 (self.back, BACK_SOCKET, "back_path")):
            old: Path | None = getattr(self, attr)
            path = folder / name
            if old == path and self.ownership.socket_is_ours(path):
                continue
            if old is not None:
                try:
                    sock.unbind(f"ipc://{old}")
                except zmq.ZMQError:
                    pass
                if self.ownership.socket_is_ours(old):  # the folder moved: leave no stale file
                    old.unlink(missing_ok=True)
                self.ownership.forget(old)
                log.warning("%s was removed or replaced under the running supervisor; "
                            "bound it again at %s", old, path)
            old_umask = os.umask(0o077)
            try:
                sock.bind(f"ipc://{path}")
            finally:
                os.umask(old_umask)
            setattr(self, attr, path)
            self.ownership.bound(path)

    def request_stop(self, *_: Any) -> None:
        """Signal handler: begin a clean stop at the next turn of the loop."""
        self._stop_signalled = True

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> None:
        log.info("supervisor %d serving %s (kint %s)", os.getpid(), self.front_address,
                 __version__)
        while True:
            if self._stop_signalled and not self.shutting_down:
                self.begin_shutdown()
            if self.shutting_down and not any(h.alive for h in self.handles.values()):
                break
            events = self.poller.poll(self.poll_timeout_ms(time.monotonic()))
            now = time.monotonic()
            paused = self._schedule.turn(now)
            if paused:
                self._after_pause(paused, now)
            for sock, _ in events:
                if sock is self.front:
                    self._drain(self.front, self._on_front)
                elif sock is self.back:
                    self._drain(self.back, self._on_back)
                else:  # the exit watch's descriptor: a worker exited
                    for handle in self.exits.exited():
                        self._on_exit(handle)
            if self.outbox.backlogged():
                self.outbox.flush()
            self.tick(time.monotonic())
        for identity, rid in self._stop_waiters:
            self._send_front(identity, ok_reply(rid, {"stopped": True}))
        self.outbox.flush()
        log.info("supervisor %d stopped", os.getpid())

    def close(self) -> None:
        self.front.close(linger=500)
        self.back.close(linger=0)
        self.zctx.term()
        self.exits.close()
        for path in self.ownership.release():
            log.info("left %s alone: it is no longer this supervisor's", path)

    @staticmethod
    def _drain(sock: zmq.Socket, handler: Any) -> None:
        for _ in range(1000):  # bounded, so one busy client cannot starve the other socket
            try:
                frames = recv_frames(sock)
            except zmq.Again:
                return
            handler(frames)
            if not readable(sock):
                return

    def _after_pause(self, paused: float, now: float) -> None:
        """The loop did not run for `paused` seconds, until `now`: nobody read the workers'
        beats, so their silence counts from now, once the beats that did arrive are read."""
        level = logging.WARNING if paused >= self.settings.heartbeat_timeout_s else logging.INFO
        log.log(level, "the supervisor did not run for %.1fs (stopped or starved); worker "
                "silence is counted from now, not from before the pause", paused)
        for handle in self.handles.values():
            handle.excuse_silence(now)
        self._drain(self.back, self._on_back)

    # -- front: clients --------------------------------------------------------------------

    def _send_front(self, identity: bytes, reply: Reply) -> None:
        self.outbox.send(identity, encode_reply(reply))

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
                    self._send_front(identity, reply)
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
        if handle is not None:
            if (handle.db != request.db and os.path.exists(request.db)
                    and not os.path.exists(handle.db)):
                self._move_space(handle, request)  # a typo's store never blocks the real one
            _same_store(sid, label, handle.db, handle.tenant, request)
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
        deadline = now + request.timeout_ms / 1000.0
        pending = Pending(internal_id=internal_id, client=None if request.cast else identity,
                          client_id=request.id, op=request.op, deadline=deadline,
                          timeout_ms=request.timeout_ms, body=body)
        handle.pending[internal_id] = pending
        heapq.heappush(self._deadlines, (deadline, handle.space_id, internal_id))
        handle.last_activity = now
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
                f"restarts in {self.settings.restart_window_s:.0f}s; last exit: "
                f"{handle.last_exit}; next retry in {retry:.0f}s")

    # -- back: workers ---------------------------------------------------------------------

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
        if handle is None:
            self._refuse_peer(route, "not the route of any worker this supervisor spawned")
            return
        if len(frames) != 3:
            log.warning("space %s: worker message of %d frames dropped", handle.space16,
                        len(frames) - 1)
            return
        try:
            msg = worker_wire.decode_from_worker(frames[1].bytes, frames[2])
        except ProtocolError as err:
            log.warning("space %s: bad worker message dropped: %s", handle.space16, err.message)
            return
        if not worker_wire.token_matches(msg, handle.token):
            self._refuse_peer(route, f"the token of space {handle.space16}'s worker is missing "
                              "or wrong")
            return
        now = time.monotonic()
        kind = msg["kind"]
        if kind == "reply":
            pending = handle.pending.get(msg["id"])
            if pending is None:
                log.info("space %s: late reply %s dropped", handle.space16, msg["id"])
                return
            self._pass_on(handle, pending, frames[2])
            return
        if msg["pid"] != handle.pid:
            return  # a worker that was already replaced
        if kind == "fatal":
            handle.fatal_reason = msg["reason"]
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

    # -- lifecycle -------------------------------------------------------------------------

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

    # -- housekeeping, from the sweep (kint/supervisor/timed.py) -------------------------

    def _housekeeping(self, now: float) -> None:
        """The supervisor's own checks, each on its own period: is the home still its own,
        did the config file change, is the log too large, was kint upgraded."""
        if now >= self._ownership_at:
            self._ownership_at = now + OWNERSHIP_EVERY_S
            self._check_ownership()
            self.check_config()
        if now >= self._housekeeping_at:
            self._housekeeping_at = now + HOUSEKEEPING_EVERY_S
            self._rotate_log()
            self._check_upgrade()
        if (self.upgraded and not self.shutting_down
                and not any(h.pending for h in self.handles.values())):
            log.info("nothing in flight: stopping for the new version of kint")
            self.begin_shutdown()

    def _check_ownership(self) -> None:
        """Is KINT_HOME still this supervisor's? Its pid lock replaced or removed: another
        supervisor may run (or start any moment), so this one steps down. Its sockets gone
        or replaced while it holds the lock: it binds them again, so that clients reach it
        instead of waiting on a supervisor they cannot see."""
        if self.shutting_down:
            return
        if not self.ownership.holds_lock():
            log.warning("%s is no longer the lock this supervisor holds (removed or "
                        "replaced): stepping down, so that one supervisor serves %s",
                        self.ownership.lock_path, self.home)
            self.exit_code = EXIT_STEPPED_DOWN
            self.begin_shutdown()
            return
        paths = (self.front_path, self.back_path)
        if any(p is None or not is_private_dir(p.parent) or not self.ownership.socket_is_ours(p)
               for p in paths):
            try:
                self._bind_sockets()
            except (OSError, zmq.ZMQError) as err:
                log.warning("could not bind the sockets again: %s; retrying", err)

    def check_config(self, force: bool = False) -> kint_settings.ConfigError | None:
        """Read $KINT_HOME/config.toml again when its stat changed (`force`: now, for
        `kint supervisor reload`): the tunables follow it without a restart. A file that is
        refused (named with its key in the log and the returned error) leaves the last good
        configuration in force. Workers read the file themselves, on every request."""
        watch = kint_settings.watch(self.home)
        before = watch.generation
        _, error = watch.reload() if force else watch.current()
        if watch.generation != before:
            new = Settings.load()
            if new != self.settings:
                changed = [f"{name} {getattr(self.settings, name)} -> {getattr(new, name)}"
                           for name in new.__dataclass_fields__
                           if getattr(new, name) != getattr(self.settings, name)]
                log.info("settings changed: %s", ", ".join(changed))
                self.settings = new
        return error

    @property
    def log_max_bytes(self) -> int:
        return self.settings.log_max_bytes

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
