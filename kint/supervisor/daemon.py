"""The supervisor's event loop: two ROUTER sockets and the workers' exit sentinels (behind
one descriptor, `exits`) under one `zmq.Poller`, in a single thread that never waits on a
worker.

Front (`kint.sock`): clients' requests in, replies out (`routing`). Back (`workers.sock`):
workers' hellos, beats and replies in (`worker_messages`), requests and stops out. The
supervisor routes on the back socket's small header (`worker_wire`) and never decodes a
reply's body. What the loop does between messages (deadlines and refused forwards at
every turn, the sweep over every space once per tick) is `timed`'s; a worker's spawn,
stop and hang are `lifecycle`'s, its exit `worker_exit`'s; the supervisor's checks on
itself (its home, its config, its log, an upgrade) are `housekeeping`'s.

This module holds what ties those together: the state they share, the loop, and a clean
stop (the sockets, bound at start and again when `housekeeping` finds them removed, are
`sockets`' to bind). Every request gets exactly one answer: a reply the client's pipe
cannot take yet waits in the `Outbox` instead of being dropped by the ROUTER. A turn of
the loop that came late is the supervisor's own pause, not its workers' silence (`pause`).
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import time
from pathlib import Path
from typing import Any

import zmq
from zmq import zmq_poll

from kint import __version__
from kint import settings as kint_settings
from kint.front_closed import STOPPING_HINT
from kint.protocol import ErrorCode
from kint.protocol.envelope import error_reply, ok_reply
from kint.supervisor.bindings import Bindings
from kint.supervisor.code_watch import code_signature
from kint.supervisor.exits import ExitWatch
from kint.supervisor.front_door import FrontDoor
from kint.supervisor.front_listeners import FrontListeners
from kint.zmq_frames import readable, recv_frames
from kint.supervisor.housekeeping import Housekeeping
from kint.supervisor.last_words import RetiredRoute
from kint.supervisor.lifecycle import WorkerLifecycle
from kint.supervisor.outbox import Outbox
from kint.supervisor.ownership import Ownership
from kint.supervisor.pause import ScheduleWatch
from kint.supervisor.routing import ClientRouting
from kint.supervisor.settings import Settings
from kint.supervisor.sockets import SupervisorSockets
from kint.supervisor.spawner import Spawner
from kint.supervisor.succession import hand_on, take_up
from kint.supervisor.timed import TimedWork
from kint.supervisor.worker_messages import WorkerMessages
from kint.supervisor.workers import WorkerHandle, live_sessions

log = logging.getLogger("kint.supervisor")


class Supervisor(ClientRouting, WorkerMessages, WorkerLifecycle, TimedWork, Housekeeping,
                 SupervisorSockets):
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
        self._retired_routes: dict[bytes, RetiredRoute] = {}
        self._unreplied: dict[bytes, RetiredRoute] = {}
        self._held_exits: dict[str, WorkerHandle] = {}
        self._space_ids: dict[str, str] = {}
        self._refused_routes: set[bytes] = set()
        self._room_wanted: list[str] = []
        self._evicting: set[str] = set()
        self._settle_seen: dict[str, float] = {}
        self._room_turn: str | None = None
        self.exits: ExitWatch[WorkerHandle] = ExitWatch()
        self._awaiting_forkserver: dict[str, tuple[WorkerHandle, bool]] = {}
        self._deadlines: list[tuple[float, str, str]] = []
        self._stalled: set[str] = set()
        self._ids = itertools.count(1)
        self.started_at = time.monotonic()
        # This supervisor's own id among every start of one (see WorkerConfig.supervisor_run).
        self.run_id = secrets.token_hex(8)
        # The run id of the supervisor this one took over from on an upgrade, if it did
        # (`resume_after_upgrade`): its workers' session handoffs are taken too.
        self.predecessor_run = ""
        # Set by `kint supervisor stop` or a signal: the sessions end with this supervisor,
        # even during an upgrade's drain, and nothing is left to the next one.
        self.stop_commanded = False
        # The spaces whose workers were stopped for an upgrade with sessions attached.
        self._handed_spaces: list[str] = []
        self._code = code_signature()
        # Set once kint's installed files changed: stop when nothing is in flight.
        self.upgraded = False
        self.exit_code = 0
        self.stepped_down = False
        self._sweep_at = self.started_at
        self._housekeeping_at = self.started_at
        self._ownership_at = self.started_at
        self._log_rotate_failed = False
        self._schedule = ScheduleWatch(settings.tick_s,
                                       lambda: self.settings.heartbeat_timeout_s)
        self.shutting_down = False
        self._stop_waiters: list[tuple[bytes, str]] = []
        self._stop_signalled = False
        self.zctx = zmq.Context()
        self.front = self.zctx.socket(zmq.ROUTER)
        self.back = self.zctx.socket(zmq.ROUTER)
        self.outbox = Outbox(self.front)
        # Its margin holds what the forkserver's warm-up may yet open (front_door.margin_for).
        # Built once its pid lock is held: `time.time()` here is when it took the home.
        self.door = FrontDoor(self.front, lambda: not self.spawner.ready, time.time(),
                              self.ownership)
        self.listeners = FrontListeners(self.front)
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

    def request_stop(self, *_: Any) -> None:
        """Signal handler: begin a clean stop at the next turn of the loop."""
        self._stop_signalled = True
        self.stop_commanded = True

    def resume_after_upgrade(self) -> None:
        """Take up what the supervisor before this one left as it exited for an upgrade
        (kint/supervisor/succession.py), once, before serving: its run id, whose workers'
        session handoffs this one's workers take, and a worker started now for each space
        that had sessions, as a recycle starts its successor at once. A space without a
        binding to an existing store is left to its sessions' next call."""
        succession = take_up(self.home)
        if succession is None:
            return
        self.predecessor_run = succession.run
        started = []
        for sid in succession.spaces:
            bound = self.bindings.get(sid)
            if sid in self.handles or bound is None or not os.path.exists(bound.db):
                continue
            handle = self.handles[sid] = WorkerHandle(space_id=sid, label=bound.label,
                                                      tenant=bound.tenant, db=bound.db)
            self.spawn(handle)
            started.append(handle.space16)
        log.info("took over from supervisor run %s (an upgrade); started the worker of %s, "
                 "which had sessions attached", succession.run,
                 ", ".join(started) or "no space")

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> None:
        log.info("supervisor %d serving %s (kint %s)", os.getpid(), self.front_address,
                 __version__)
        # What every turn uses, looked up once: a turn comes with every request and every
        # reply. The sockets are bound again in place (`_bind_sockets`), never replaced,
        # and the poll's items are registered once (`bind`); `zmq_poll` is what
        # `Poller.poll` calls, without its argument checks.
        front, back, items = self.front, self.back, self.poller.sockets
        forkserver_ready = self.spawner.ready_fd()
        door, monitor = self.door, self.door.monitor
        drain, on_front, on_back = self._drain, self._on_front, self._on_back
        turn, monotonic = self._schedule.turn, time.monotonic
        # Whether each socket was ready at the last turn (see `_drain`).
        front_busy = back_busy = False
        while True:
            if self._stop_signalled and not self.shutting_down:
                self.begin_shutdown()
            # Nor while an exited worker's last replies are waited for (last_words.py): at
            # most their grace, what is left answered at the turn it falls due (`tick`).
            if (self.shutting_down and not any(h.alive for h in self.handles.values())
                    and not self._unreplied):
                break
            events = zmq_poll(items, self.poll_timeout_ms(monotonic()))
            now = monotonic()
            paused = turn(now)
            if paused:
                self._after_pause(paused, now)
            front_ready = back_ready = False
            for sock, _ in events:
                if sock is front:
                    drain(front, on_front, front_busy)
                    front_ready = True
                elif sock is back:
                    drain(back, on_back, back_busy)
                    back_ready = True
                elif sock == forkserver_ready:
                    self.on_forkserver_ready()
                elif sock is monitor:  # a client connected or left (the first event)
                    door.on_events(self.front_path)
                else:  # the exit watch's descriptor: a worker exited
                    # What its workers sent before they exited is read first, all of
                    # it: a refused start's `fatal` queued behind another worker's beat
                    # (one message is read a turn) was dropped as a retired route's, and
                    # the refusal taken for a crash.
                    drain(back, on_back)
                    for handle in self.exits.exited():
                        self._on_exit(handle)
            front_busy, back_busy = front_ready, back_ready
            if self.outbox.backlogged():
                self.outbox.flush()
            # The turn's own clock, the one its pause was judged on: a clock read here,
            # after the messages, would count a stop that fell among them as the
            # workers' silence, and declare them hung before the next turn saw the pause.
            self.tick(now)
        if self._handing_on():
            try:
                hand_on(self.home, self.run_id, self._handed_spaces)
            except OSError as err:  # a full disk: the sessions' keepalive is the way back
                log.warning("could not leave the sessions to the next supervisor: %s", err)
        for identity, rid in self._stop_waiters:
            self._send_front(identity, ok_reply(rid, {"stopped": True}))
        self.outbox.flush()
        log.info("supervisor %d stopped", os.getpid())

    def close(self) -> None:
        """End the workers left, then the sockets, then the door's files. The replies handed
        to ZeroMQ are only sure to be written out once the front socket's linger and the
        context's end have run: removing the moved socket file and the note before them
        let a client's look in that gap find no file, no note, and refuse a request whose
        answer was still on its way. The monitor stops first, before the context ends
        (a monitor left running can hang it, zeromq/libzmq#3575); `shut` uses no ZeroMQ
        after that, only files and the lock."""
        self.end_workers_left()
        self.door.unwatch()
        self.front.close(linger=500)
        self.back.close(linger=0)
        self.zctx.term()
        self.door.shut(self.front_path)
        self.exits.close()
        self.spawner.close()
        for path in self.ownership.release():
            log.info("left %s alone: it is no longer this supervisor's", path)

    @staticmethod
    def _drain(sock: zmq.Socket, handler: Any, busy: bool = True) -> None:
        """Handle what waits on `sock`. A socket that was ready at the last turn too is
        busy (requests and replies arrive faster than turns): it is read until nothing
        waits, asking it after each message, up to a bound, so one busy client cannot
        starve the other socket. Otherwise one message is read, and the next turn's poll
        says whether another waits: a client that sends its next request on reading the
        answer (a status loop, an agent) has one waiting at a time, and the look after it
        (ZeroMQ's EVENTS: a system call or two) found none, twice a call."""
        for _ in range(1000 if busy else 1):
            try:
                frames = recv_frames(sock)
            except zmq.Again:
                return
            handler(frames)
            if not busy or not readable(sock):
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

    # -- a clean stop ----------------------------------------------------------------------

    def _handing_on(self) -> bool:
        """Whether this supervisor stops for an upgrade, its sessions going on in the next
        one: not when it was stopped on command, nor once its home is no longer its own
        (it stepped down, or its lock was lost since its last look: the next supervisor is
        not its to name)."""
        return (self.upgraded and not self.stop_commanded and not self.stepped_down
                and self.ownership.holds_lock())

    def begin_shutdown(self) -> None:
        self.shutting_down = True
        # New clients are told it stops, first: nothing counts them from here on.
        self.door.close_for_stop(self.front_path)
        monitor = self.door.unwatch()  # a stop counts no clients (front_door_stop.unwatch)
        if monitor is not None:
            self.poller.unregister(monitor)
        now = time.monotonic()
        log.info("supervisor stopping %d worker(s)",
                 sum(1 for h in self.handles.values() if h.alive))
        # An upgrade's workers hand their sessions over (session_handoff.py), for the
        # workers of the next supervisor (succession.py); a stop's end them.
        reason = "upgrade" if self._handing_on() else "stop"
        for handle in self.handles.values():
            if handle.alive:
                # A beat older than the worker's last work may not show a session that
                # work attached (`beat_tells_after_work`): such a space is counted in,
                # at worst the cost of a worker started for nothing, which exits idle.
                if reason == "upgrade" and (live_sessions(handle.beat)
                                            or not handle.beat_tells_after_work()):
                    self._handed_spaces.append(handle.space_id)
                self.stop_worker(handle, reason, now)
            else:
                handle.state = "stopped"
            for pending in list(handle.pending.values()):
                # A request the worker runs already is answered by the worker, which
                # finishes it within its stop grace before it exits (a push it anchors is
                # said to be anchored), or else by its exit (`_on_exit`). Only one it
                # never got is refused here.
                if handle.alive and pending.forwarded:
                    continue
                self._answer(handle, pending, error_reply(
                    None, ErrorCode.WORKER_DOWN,
                    f"the supervisor is stopping: {pending.op} was not sent to the worker "
                    f"of space {handle.space16}", STOPPING_HINT))

    def add_stop_waiter(self, identity: bytes, rid: str) -> None:
        self._stop_waiters.append((identity, rid))
