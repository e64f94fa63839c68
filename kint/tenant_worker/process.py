"""The worker process's loop: one worker per space, spawned by the supervisor from its
forkserver; how the process starts, takes its space's worker lock and says a start that
failed is kint.tenant_worker.worker_start.

The main thread owns the DEALER socket: it receives requests, hands them to a small
thread pool (kint.tenant_worker.op_pool: the thread that went idle last runs the next
op), forwards the pool's replies (kint.tenant_worker.op_replies: encoded by the pool
thread, queued for the main thread, with a byte on the wake pipe the loop already polls),
and beats with what it is doing (kint.tenant_worker.heartbeat).
The only handlers it runs itself are the plain `status` from its cached counts (a few
stats; a store changed since is counted on a thread of its own, never queued behind the
pool's ops) and `note_write`, so a slow op never
stops the heartbeat: slow is *busy*, not *hung*. This module is the loop, the stop (a
grace for the work in flight) and the hand-over of the attached sessions to a successor.

The worker dies with its supervisor: PR_SET_PDEATHSIG (set as it starts) and, on every
beat, a check here that the supervisor's pid is still alive. Until it has, or for good
while it is stopped, it holds its space's worker lock (taken as it starts, before anything
else of the space).

It proves who it is with the token its supervisor made for this spawn (passed as an
argument, through the spawn's pipe): its DEALER identity is the route derived from it, and
every message it sends carries it (kint.protocol.worker_wire).
"""

from __future__ import annotations

import collections
import logging
import signal
import threading
import time
from typing import Any

import zmq
from zmq import zmq_poll

from kint.envsettings import pid_alive
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol import worker_wire
from kint.protocol.envelope import error_reply
from kint.protocol.server_codec import decode_request
from kint.tenant_worker import stop_grace
from kint.tenant_worker.config import WorkerConfig
from kint.tenant_worker.head_lock import SETTLEMENT
from kint.tenant_worker.heartbeat import Heartbeat
from kint.tenant_worker.op_pool import OpPool
from kint.tenant_worker.op_replies import InFlight, OpReplies, runs_inline
from kint.tenant_worker.own_memory import MemoryReading
from kint.tenant_worker.request_deadline import Deadline
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.store import StoreReader
from kint.tenant_worker.store_sharers import LaterLooks
from kint.tenant_worker.wake_pipe import WakePipe
from kint.zmq_frames import recv_frames, send_frames

log = logging.getLogger("kint.worker")

# The in-flight id of the push journal's settling at start (no request carries it).
_PENDING_AT_START = "pending-at-start"
# While stopping, the loop turns every 0.2 s at most: a turn later than this after the one
# before means the worker itself did not run (stopped with its whole process group, say),
# and its grace is given whole again from then.
STOPPED_TURN_S = 1.0


class Worker(Heartbeat, OpReplies):
    """One space's worker: the loop on its socket; its beats and its ops' answers are
    the parts it inherits (kint.tenant_worker.heartbeat, kint.tenant_worker.op_replies)."""

    def __init__(self, config: WorkerConfig, token: bytes) -> None:
        self.config = config
        self._token = worker_wire.token_text(token)
        self.ctx = SpaceContext(config=config, store=StoreReader(config.db, config.tenant))
        # Every message carries the pid: the one the space's context asked for once.
        self._pid = self.ctx.pid
        self.inflight = InFlight()
        self.memory = MemoryReading()
        self.zctx = zmq.Context()
        self.dealer = self.zctx.socket(zmq.DEALER)
        self.dealer.setsockopt(zmq.ROUTING_ID, worker_wire.route_for(token))
        self.dealer.setsockopt(zmq.LINGER, 2000)
        self.pool = OpPool(config.threads, f"kint-{config.space16}")
        # The plain status whose store changed since its last count, on a thread of its
        # own: on the pool it waited behind every op there (four pushes on their receipts,
        # pulls behind the head lock) for one to end, where a status is answered at once.
        # Started at its first such status only (OpPool starts threads on demand).
        self.counts = OpPool(1, f"kint-{config.space16}-count")
        # The pool's answers, each the back-socket message to send, in the order they were
        # made; each comes with a byte on the wake pipe. Not an inproc socket: one more
        # ZeroMQ socket in the loop's poll cost every turn a look at its mailbox (a system
        # call), a plain status's included, which never uses it.
        self._answers: collections.deque[list[bytes]] = collections.deque()
        self.stopping = False
        # Why the supervisor stopped it: a "recycle", a "restart" or an "upgrade" hands
        # the attached sessions over. The last stop message's, as the supervisor keeps it
        # (lifecycle.stop_worker): that one decides whether a successor starts to take them
        # (worker_exit.py). The lines name the first (HeadTurn.stop), the reason the worker
        # began to stop for.
        self.stop_reason: str | None = None
        self.stop_requested = threading.Event()
        # A signal writes a byte here (signal.set_wakeup_fd), as does a pool thread with
        # an answer, which wakes the loop's poll: so an idle worker sleeps until its next
        # beat, not a second at a time, and still stops at once on SIGTERM.
        # Safe to wake after the worker closed it (wake_pipe.py).
        self.wake_pipe = WakePipe()
        # When a request last went to the pool or a reply came back (main thread only).
        self._active_at = time.monotonic()
        # When the next beat is due (monotonic).
        self._next_beat = self._active_at
        # Set from any thread (`beat_soon`) when work ended that no answer marks: the loop
        # beats at once on the wake pipe's byte.
        self._beat_wanted = False
        self.ctx.beat_soon = self.beat_soon
        # Requests read from the supervisor so far (main thread only), told in every beat:
        # the supervisor counts those it sent, and judges a stop only on a beat that has
        # taken them all.
        self._taken = 0
        # Another KINT_HOME's worker on this store, looked for again while this one runs.
        self.sharing = LaterLooks(config.db, config.home, config.space16, self._active_at)

    # -- sending ---------------------------------------------------------------------------

    def _send(self, message: dict[str, Any], flags: int = 0) -> None:
        message["pid"] = self._pid
        message["token"] = self._token
        send_frames(self.dealer, worker_wire.encode(message), block=not flags & zmq.NOBLOCK)

    # -- receiving -------------------------------------------------------------------------

    def _on_wake(self) -> None:
        """The wake pipe's bytes (a signal, the pool's answers, a beat asked for): read
        first, so a byte written after this look wakes the next poll."""
        self.wake_pipe.drain()
        if self._beat_wanted:
            self._beat_wanted = False
            self._next_beat = min(self._next_beat, time.monotonic())
        self._forward_answers()

    def settle_at_start(self) -> None:
        """A push journal or a rekey journal left by the last worker, settled before
        anything else, counted in flight: the heartbeat says so, beats every second, and a
        stop waits for it."""
        from kint.tenant_worker.rekey_settle import settle_at_start

        self.inflight.start(_PENDING_AT_START, SETTLEMENT)  # its name in a BUSY too
        try:
            settle_at_start(self.ctx)
        finally:
            self.inflight.finish(_PENDING_AT_START)
            self.beat_soon()  # no answer marks its end

    def _dispatch(self, frames: list[zmq.Frame]) -> None:
        try:
            if len(frames) != 2:
                raise ProtocolError(ErrorCode.BAD_REQUEST, f"{len(frames)} frames, not 2")
            head, body = frames[0].bytes, frames[1].bytes
            msg = worker_wire.decode_from_supervisor(head, body)
        except ProtocolError as err:
            log.warning("dropped a bad message from the supervisor: %s", err.message)
            return
        if msg["kind"] == "stop":
            self.stopping = True
            self.stop_reason = msg.get("reason")
            # The space's turn stopped before the line (the loop's next turn does it again,
            # for a SIGTERM too): what reads "stop requested" finds an exit push that will
            # start no further epoch, not one that may still start it before the loop turns.
            began = self.ctx.head_ops.stopped
            self.ctx.head_ops.stop(self.stop_reason)
            if began is None:
                log.info("stop requested (%s)", msg.get("reason"))
            else:  # named as a second one: "stop requested (stop)" read as another stop
                log.info("stop requested again (%s): %s already", msg.get("reason"), began)
            return
        internal_id = msg["id"]
        # Counted before anything else of it: this thread makes the beats, so each beat
        # from here on was made with this request in flight, answered or refused.
        self._taken += 1
        request = None
        try:
            # The supervisor checked it before routing it; a worker trusts no socket.
            request = decode_request(body)
            # When the supervisor answers it TIMEOUT, checked as well: what the op may
            # still start is bound by it (request_deadline.py).
            deadline = Deadline(worker_wire.req_deadline(msg, request.timeout_ms,
                                                         time.monotonic()),
                                request.timeout_ms / 1000.0)
        except ProtocolError as err:
            send_frames(self.dealer, self._reply_message(internal_id, error_reply(
                request.id if request is not None else err.request_id, err.code,
                err.message, err.hint)), block=True)
            return
        if self.stopping or self.stop_requested.is_set():
            # The SIGTERM's flag too: a worker continued after a SIGSTOP runs its handler
            # and then reads what reached it while it was stopped, in the same turn of the
            # loop, before the loop looks at the flag. The supervisor has declared it down
            # and answered those requests already; it starts none of them (a push here
            # would sign and send with nobody waiting for it).
            log.info("refused %s (%s): the worker is stopping", request.op, internal_id)
            send_frames(self.dealer, self._reply_message(internal_id, error_reply(
                request.id, ErrorCode.WORKER_DOWN, "the worker is stopping")), block=True)
            return
        pool = self.pool
        if runs_inline(request):
            # Not counted in flight: it runs on the thread that beats, so no beat sees it.
            # None: it would read the store, which may wait seconds on a lock: the count's
            # own thread then, counted in flight like a pool's op, never behind one.
            reply = self.run_inline(request)
            if reply is not None:
                send_frames(self.dealer, self._reply_message(internal_id, reply, request.op),
                            block=True)
                # As after a pool's answer, the next beat comes within a second: the
                # supervisor stops an idle worker only on a beat read after its last
                # answer, and one due at the idle cadence (up to 3 s) would hold that stop
                # past a short KINT_WORKER_IDLE_SECONDS. Not activity: the cadence stays idle.
                self._next_beat = min(self._next_beat,
                                      time.monotonic() + worker_wire.BEAT_SECONDS)
                return
            pool = self.counts
        self.inflight.start(internal_id, request.op)
        self._busy_now()
        pool.submit(self._run_in_pool, internal_id, request, deadline,
                    then=self._send_reply)

    # -- the loop --------------------------------------------------------------------------

    def serve(self) -> int:
        cfg = self.config
        self.dealer.connect(cfg.back_address)
        self._send({"kind": "hello", "space": cfg.space16})
        poller = zmq.Poller()
        poller.register(self.dealer, zmq.POLLIN)
        poller.register(self.wake_pipe.read_fd, zmq.POLLIN)
        # What every turn uses, looked up once (a turn comes with every request); `zmq_poll`
        # is what `Poller.poll` calls, without its argument checks.
        dealer, items, dispatch, monotonic = self.dealer, poller.sockets, self._dispatch, \
            time.monotonic
        stop_deadline: float | None = None
        last_turn = monotonic()
        while True:
            now = monotonic()
            late, last_turn = now - last_turn > STOPPED_TURN_S, now
            if now >= self._next_beat:
                if not pid_alive(cfg.supervisor_pid):
                    log.warning("supervisor %d is gone; exiting", cfg.supervisor_pid)
                    return 0
                self._beat(now)
            if self.stop_requested.is_set():
                self.stopping = True
            if self.stopping:
                count, _, _ = self.inflight.snapshot()
                if stop_deadline is None or late:
                    # A stop that stopped the worker too (a Ctrl-Z of a foreground
                    # supervisor's process group) is no time its ops had to finish: the
                    # grace counts from the resume, as the supervisor's own does
                    # (WorkerHandle.grace_over), not cut at once on the clock's jump.
                    # Read at the stop, not bound at import: a test lengthens it
                    # (tests/support/kint_test_timings.py) in a forkserver that may have
                    # imported this module first.
                    stop_deadline = now + stop_grace.STOP_GRACE_SECONDS
                    # The space's turn: stopped in `_dispatch` for a stop message, here
                    # for a SIGTERM (HeadTurn.stop: an exit push waiting its turn ends,
                    # logged). The store watcher stops here: no push of its starts in the
                    # grace, nor does it tick on in a worker on its way out (Watcher.stop).
                    self.ctx.head_ops.stop(self.stop_reason)
                    if self.ctx.watcher is not None:
                        self.ctx.watcher.stop(self.ctx.head_ops.stopped)
                # A push the store watcher started is no request in flight, but it holds
                # the space's head op (head_lock.head_op) until it ends: a stop (a recycle,
                # a restart, the supervisor's) waits for it too rather than cut it between
                # its send and its receipt, leaving its journal to the next worker.
                if (count == 0 and self.ctx.head_op_began is None) or now >= stop_deadline:
                    self._forward_answers()  # an op answered since the last poll
                    self._hand_over()
                    return 0
            timeout = max(0.0, self._next_beat - monotonic())
            if self.stopping:
                timeout = min(timeout, 0.2)
            # One message per ready socket per turn: the next poll returns at once while
            # more wait, and draining until Again cost an exception per wake-up.
            for sock, _ in zmq_poll(items, int(timeout * 1000)):
                if sock is dealer:
                    try:
                        frames = recv_frames(sock)
                    except zmq.Again:
                        continue
                    dispatch(frames)
                else:
                    self._on_wake()

    def _hand_over(self) -> None:
        """A worker recycled for its memory, restarted, or stopped for an upgrade of kint
        leaves its attached sessions to the next one (session_handoff.py), which the
        supervisor (after an upgrade, the next one) starts at once; without the file they
        attach again at their keepalive."""
        if self.stop_reason not in ("recycle", "restart", "upgrade"):
            return
        from kint.tenant_worker.session_handoff import hand_over

        try:
            hand_over(self.ctx)
        except Exception:  # noqa: BLE001 - a full disk, say: the keepalive is the way back
            log.warning("space %s: the attached sessions could not be handed over",
                        self.config.space16, exc_info=True)

    def close(self) -> None:
        signal.set_wakeup_fd(-1)
        self.pool.shutdown()
        self.counts.shutdown()
        self.wake_pipe.close()
        self.dealer.close()
        self.zctx.term()
