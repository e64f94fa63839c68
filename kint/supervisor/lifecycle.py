"""A worker's life as the supervisor runs it: spawn, stop (on command, idle, or recycled for
its memory), and judge it hung when it stops beating; what follows its exit (the restart,
one_for_one, or the quarantine after too many crashes) is its base `WorkerExit`'s
(worker_exit.py). A mixin of `Supervisor` (kint/supervisor/daemon.py), which owns the
sockets, the poller and the handles these methods act on: `home`, `settings`, `spawner`,
`poller`, `handles`, `back`, `back_address`, `shutting_down`, `_by_route`,
`_retired_routes` (which `LastWords` keeps, a base through WorkerExit: last_words.py),
`_held_exits` (`ExitHold`'s, a base through WorkerExit: exit_hold.py) and `exits`;
`_answer` is `ClientRouting`'s (kint/supervisor/routing.py, declared in WorkerExit).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from typing import Any

import zmq

from kint.open_files import out_of_files
from kint.protocol import ErrorCode, worker_wire
from kint.protocol.envelope import error_reply
from kint.supervisor.last_words import RetiredRoute
from kint.supervisor.worker_exit import WorkerExit
from kint.supervisor.workers import WorkerHandle, live_sessions
from kint.tenant_worker.config import WorkerConfig
from kint.tenant_worker.own_memory import QUIET_SECONDS

log = logging.getLogger("kint.supervisor")

class WorkerLifecycle(WorkerExit):
    spawner: Any
    # The front socket's door (front_door.py): told of descriptors its monitor does not see.
    door: Any
    front_path: Any
    poller: Any
    back: Any
    back_address: str
    run_id: str
    predecessor_run: str
    _by_route: dict[bytes, WorkerHandle]
    # Routes of workers declared down or exited (`_retire_route`, last_words.py).
    _retired_routes: dict[bytes, RetiredRoute]
    # Spaces whose worker's exit waits for its reason (`_hold_exit`, exit_hold.py).
    _held_exits: dict[str, WorkerHandle]
    # Spaces whose worker was asked for before the forkserver was ready (`spawn`), each
    # with whether it was asked for itself (sessions handed over), not for requests.
    _awaiting_forkserver: dict[str, tuple[WorkerHandle, bool]]

    def spawn(self, handle: WorkerHandle) -> None:
        if not self.spawner.ready:
            # The forkserver is still importing (spawner.py): this worker starts once it
            # is done (`on_forkserver_ready`); its requests wait as for any starting one.
            # A spawn asked with no request waiting is for the worker itself (an upgrade's
            # sessions handed over: `resume_after_upgrade`); no worker has run before the
            # forkserver was ready, so no crash or recycle asks for one here.
            handle.state = "starting"
            _, for_itself = self._awaiting_forkserver.get(handle.space_id, (handle, False))
            self._awaiting_forkserver[handle.space_id] = (
                handle, for_itself or not handle.pending)
            return
        if not self._room_for(handle):  # the supervisor's open files (room.py)
            return
        config = WorkerConfig(space_id=handle.space_id, label=handle.label, tenant=handle.tenant,
                              db=handle.db, kint_home=str(self.home),
                              back_address=self.back_address,
                              supervisor_pid=os.getpid(), supervisor_run=self.run_id,
                              predecessor_run=self.predecessor_run,
                              idle_beat_s=worker_wire.idle_beat_seconds(
                                  self.settings.heartbeat_timeout_s))
        now = time.monotonic()
        handle.stop_reason = None
        handle.stop_deadline = None
        handle.kill_at = None
        handle.hung_reason = None
        handle.fatal_reason = None
        handle.start_refused = None
        handle.hello_at = None
        handle.last_beat_at = None
        handle.beat = {}
        handle.sent = 0
        handle.spawned_at = now
        handle.excused_until = None
        token = worker_wire.new_token()
        try:
            proc = self.spawner.spawn(config, token)
        except Exception as err:
            if out_of_files(err):  # the count above raced another descriptor's opening
                self._no_room(handle, f"no room to start the worker of space "
                                      f"{handle.space16}: {err}")
                return
            log.exception("space %s: spawning a worker failed", handle.space16)
            self._crashed(handle, now, f"could not spawn: {err}")
            return
        handle.no_room = None
        handle.no_room_seen = None
        handle.process = proc
        handle.pid = proc.pid
        handle.token = token
        handle.route = worker_wire.route_for(token)
        self._by_route[handle.route] = handle
        handle.state = "starting"
        self.exits.watch(proc.sentinel, handle)
        self.door.recount()  # three descriptors no client's event tells (open_files.py)
        log.info("space %s: worker %d spawned for %s", handle.space16, proc.pid, handle.db)

    def on_forkserver_ready(self) -> None:
        """The forkserver's preload is done: say what it could not import, then start the
        workers asked for meanwhile, unless the supervisor is stopping (their requests
        were refused) or a stop or restart settled the space since. A worker asked for
        by requests only starts only while one of them still waits: those all answered
        meanwhile (TIMEOUT, on a box slow to import) would leave a worker no one waits
        for, which sat idle until its idle exit. The loop is one thread: a request that
        arrived for such a space before now is waiting in it, and one that comes after
        finds the space idle and starts its worker as any request does."""
        missing = self.spawner.take_ready()
        if not self.spawner.ready:
            return
        self.poller.unregister(self.spawner.ready_fd())
        # The warm-up's descriptors are no longer held out of the door's margin.
        self.door.recount()
        self.door.look(self.front_path)
        if missing:
            log.warning("the worker forkserver could not import %s: workers start "
                        "without what it would have set up", "; ".join(missing))
        waiting, self._awaiting_forkserver = self._awaiting_forkserver, {}
        for handle, for_itself in waiting.values():
            if self.shutting_down or handle.alive or handle.state != "starting":
                continue
            if handle.pending or for_itself:
                self.spawn(handle)
            else:
                handle.state = "idle"
                log.info("space %s: its requests were answered before the worker "
                         "forkserver was ready; no worker started", handle.space16)

    def stop_worker(self, handle: WorkerHandle, reason: str, now: float) -> None:
        handle.stop_reason = reason  # type: ignore[assignment]
        handle.stop_deadline = now + self.settings.stop_grace_s
        handle.state = "stopping"
        if handle.route is None:
            handle.terminate()
            return
        try:
            self.back.send_multipart(
                [handle.route, *worker_wire.encode({"kind": "stop", "reason": reason})],
                zmq.NOBLOCK)
        except zmq.ZMQError:
            handle.terminate()

    def end_workers_left(self) -> None:
        """After the loop: end every worker still running, SIGTERM then SIGKILL after the
        kill grace. A clean stop leaves none; a loop that raised leaves them all, and
        `multiprocess` joins its children when the interpreter exits, so without this
        the supervisor, and its workers (whose parent still lives), never exit."""
        left = [h for h in self.handles.values() if h.alive]
        if not left:
            return
        log.error("the supervisor's loop ended with %d worker(s) running; ending them",
                  len(left))
        for handle in left:
            handle.terminate()
        deadline = time.monotonic() + self.settings.kill_grace_s
        for handle in left:
            proc = handle.process
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.exitcode is None:
                log.warning("space %s: worker %s did not exit; SIGKILL", handle.space16,
                            handle.pid)
                proc.kill()
                proc.join(timeout=self.settings.kill_grace_s)
            handle.process = None
            handle.pid = None
            handle.state = "stopped"

    def silent_past_limit(self, handle: WorkerHandle, now: float) -> float | None:
        """How long a serving worker has been silent by `now`, when that is past what it
        is allowed (the heartbeat timeout, or the start timeout before its hello); None
        otherwise, and for a worker already being stopped or killed, which is waited on
        by its grace rather than judged on its silence."""
        if handle.kill_at is not None or handle.state == "stopping":
            return None
        s = self.settings
        silent = handle.silent_for(now)
        # A worker spawned before a reload shortened the timeout may beat less often than
        # the new timeout allows: it is given two of its beats (its next spawn follows it).
        limit = (max(s.heartbeat_timeout_s, 2 * handle.beat_every_s())
                 if handle.last_beat_at is not None else s.start_timeout_s)
        return silent if silent is not None and silent > limit else None

    def _check_alive(self, handle: WorkerHandle, now: float) -> None:
        if handle.held_until is not None:
            return  # it exited: its exit is handled once its reason is read (exit_hold.py)
        s = self.settings
        if handle.kill_at is not None:
            if handle.grace_over(handle.kill_at, s.kill_grace_s, now):
                log.warning("space %s: worker %s did not exit; SIGKILL", handle.space16,
                            handle.pid)
                handle.signal(signal.SIGKILL)
                # Until its exit is read, a hung worker is only waited on (and killed again
                # after another grace): judging it hung anew would send a second SIGTERM and
                # overwrite why it was first found hung with a longer, later silence.
                handle.kill_at = now + s.kill_grace_s
            return
        if handle.state == "stopping":
            if (handle.stop_deadline is not None
                    and handle.grace_over(handle.stop_deadline, s.stop_grace_s, now)):
                handle.signal(signal.SIGKILL)
                handle.stop_deadline = None
            return
        silent = self.silent_past_limit(handle, now)
        if silent is not None:
            self._declare_down(handle, now, f"no heartbeat for {silent:.0f}s")
            return
        # A beat older than the last request or answer is no ground for a stop: it may not
        # show a session that request attached (`beat_tells_after_work`).
        if (handle.state != "ready" or handle.pending or handle.beat.get("has_work")
                or self.shutting_down or not handle.beat_tells_after_work()):
            return
        quiet = handle.quiet_for(now)
        sessions = live_sessions(handle.beat)
        if quiet >= s.idle_s and not sessions:
            log.info("space %s: idle for %.0fs; stopping its worker", handle.space16, quiet)
            self.stop_worker(handle, "idle", now)
        elif quiet >= QUIET_SECONDS and self._over_memory(handle, now):
            then = (f"its successor starts now with the {sessions} session(s) attached"
                    if sessions else "the next request starts a fresh one")
            log.info("space %s: worker %s holds %.1f MiB of its own "
                     "(KINT_WORKER_RECYCLE_MIB %g) after %.0fs idle; stopping it, %s",
                     handle.space16, handle.pid, handle.beat["own_mib"], s.recycle_mib,
                     quiet, then)
            handle.recycled_at = now
            self.stop_worker(handle, "recycle", now)

    def _declare_down(self, handle: WorkerHandle, now: float, why: str) -> None:
        """The worker is hung: it is no longer the space's worker, from now, not from its
        exit. The requests it was sent are answered WORKER_DOWN at once (a stopped worker
        may never answer them, and one continued by its SIGTERM would answer, or start,
        what its clients were already told is lost); its route is retired, so nothing it
        sends from here on (a beat, a late reply, an answer it forwards on its way out)
        is believed or reaches a client. Requests still queued wait for the next worker.
        Then SIGTERM with a SIGCONT (`terminate`), SIGKILL after the kill grace."""
        s = self.settings
        handle.hung_reason = why
        handle.state = "hung"
        log.warning("space %s: worker %s is hung (%s); SIGTERM, SIGKILL in %.0fs",
                    handle.space16, handle.pid, why, s.kill_grace_s)
        self._retire_route(handle)
        for pending in [p for p in handle.pending.values() if p.forwarded]:
            self._answer(handle, pending, error_reply(
                None, ErrorCode.WORKER_DOWN,
                f"the worker of space {handle.space16} is hung ({why}) with {pending.op} "
                f"sent to it; it is being replaced, and whether {pending.op} ran is unknown"))
        handle.terminate()
        handle.kill_at = now + s.kill_grace_s

    def _over_memory(self, handle: WorkerHandle, now: float) -> bool:
        """Whether the worker's last memory figure (read after its last work, once quiet)
        is over KINT_WORKER_RECYCLE_MIB, and the space was not recycled in the last
        `recycle_every_s`: a worker big from birth is not restarted at every quiet spell."""
        s = self.settings
        own = handle.beat.get("own_mib")
        return (s.recycle_mib > 0 and own is not None and own > s.recycle_mib
                and (handle.recycled_at is None
                     or now - handle.recycled_at >= s.recycle_every_s))
