"""A worker's life as the supervisor runs it: spawn, stop, notice its exit, restart it
(one_for_one) or quarantine it after too many crashes, and judge it hung when it stops
beating. A mixin of `Supervisor` (kint/supervisor/daemon.py), which owns the sockets, the
poller and the handles these methods act on: `home`, `settings`, `spawner`, `poller`,
`handles`, `back`, `back_address`, `shutting_down`, `_by_route`, `_retired_routes` (which
its base `LastWords` keeps: last_words.py), `_held_exits` (its base `ExitHold`'s:
exit_hold.py) and `exits`; `_answer` and `_quarantine_message` are `ClientRouting`'s
(kint/supervisor/routing.py).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from typing import Any, Callable

import zmq

from kint.paths import worker_lock_path
from kint.protocol import ErrorCode, worker_wire
from kint.protocol.envelope import error_reply
from kint.supervisor.exit_hold import ExitHold
from kint.supervisor.exits import ExitWatch
from kint.supervisor.last_words import LastWords, RetiredRoute, worker_down_reply
from kint.open_files import SYSTEM_FILES_HINT, WORKER_ROOM_HINT, open_files, out_of_files
from kint.supervisor.room import WorkerRoom
from kint.supervisor.workers import (STOPPED_MID_OP_HINT, StartRefusal, WorkerHandle,
                                    describe_exit, live_sessions)
from kint.tenant_worker.config import WorkerConfig
from kint.tenant_worker.own_memory import QUIET_SECONDS
from kint.tenant_worker.worker_lock import unnamed_holder_hint

log = logging.getLogger("kint.supervisor")

class WorkerLifecycle(WorkerRoom, LastWords, ExitHold):
    home: Any
    settings: Any
    spawner: Any
    # The front socket's door (front_door.py): told of descriptors its monitor does not see.
    door: Any
    front_path: Any
    poller: Any
    back: Any
    back_address: str
    run_id: str
    predecessor_run: str
    shutting_down: bool
    handles: dict[str, WorkerHandle]
    _by_route: dict[bytes, WorkerHandle]
    # Routes of workers declared down or exited (`_retire_route`, last_words.py).
    _retired_routes: dict[bytes, RetiredRoute]
    # Spaces whose worker's exit waits for its reason (`_hold_exit`, exit_hold.py).
    _held_exits: dict[str, WorkerHandle]
    exits: ExitWatch[WorkerHandle]
    # Spaces whose worker was asked for before the forkserver was ready (`spawn`), each
    # with whether it was asked for itself (sessions handed over), not for requests.
    _awaiting_forkserver: dict[str, tuple[WorkerHandle, bool]]
    # ClientRouting's own methods, declared for the type checker (the mixin has no body of
    # its own for them).
    _answer: Callable[[WorkerHandle, Any, Any], None]
    _quarantine_message: Callable[[WorkerHandle, float], str]

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

    def _on_exit(self, handle: WorkerHandle) -> None:
        """The exit watch says the worker exited. Handled now, or, when its exit code says
        it sent a reason not read yet, once that reason is read or its hold is over
        (`_hold_exit`, exit_hold.py): what the exit answers and records says the reason."""
        proc = handle.process
        self.exits.forget(proc.sentinel)
        proc.join(timeout=1.0)
        if not self._hold_exit(handle, proc.exitcode, time.monotonic()):
            self._exited(handle)

    def _exited(self, handle: WorkerHandle) -> None:
        """Handle the worker's exit: answer its requests in flight, then restart the space,
        quarantine it, leave it idle or stopped, as the exit and the commands say."""
        proc = handle.process
        exitcode = proc.exitcode
        try:
            proc.close()
        except Exception:
            pass
        now = time.monotonic()
        pid = handle.pid
        stopped_for_room = handle.space_id in self._evicting
        self._evicting.discard(handle.space_id)
        retired = self._retire_route(handle)  # with the pid, which its late words carry
        handle.process = None
        handle.pid = None
        reason = handle.fatal_reason or describe_exit(exitcode)
        if handle.hung_reason:
            reason = f"hung ({handle.hung_reason}); {describe_exit(exitcode)}"
        elif exitcode == worker_wire.EXIT_REFUSED and handle.start_refused is None:
            reason = self._refused_unheard(handle)
        elif exitcode == worker_wire.EXIT_NO_FILES:
            reason = (f"the worker of space {handle.space16} could not start: it ran out of "
                      f"open files (the limit it inherited, ulimit -n)")
            files = open_files()
            handle.start_refused = StartRefusal(ErrorCode.BUSY.value, WORKER_ROOM_HINT, None,
                                                files.limit if files is not None else None)
        elif exitcode == worker_wire.EXIT_NO_SYSTEM_FILES:
            reason = (f"the worker of space {handle.space16} could not start: it ran out of "
                      f"open files (the system's table of them is full)")
            handle.start_refused = StartRefusal(ErrorCode.BUSY.value, SYSTEM_FILES_HINT, None)
        stop_reason = handle.stop_reason
        # Read before the branch below, which may spawn (and clear it): whether the worker's
        # reason came in time, or a late one may still mend what this exit writes.
        told = handle.fatal_reason is not None
        # Stopped with the supervisor, it is not being restarted (the code's usual hint).
        hint = STOPPED_MID_OP_HINT if stop_reason == "stop" else None
        if exitcode == 0 and handle.hung_reason is None and retired is not None:
            # A clean exit, on command or on a user's SIGTERM: the answers it sent before it
            # may still be on their way, behind its exit (last_words.py). They are waited
            # for, not refused.
            self._await_replies(retired, handle, reason, hint, now)
        for pending in [p for p in handle.pending.values() if p.forwarded]:
            self._answer(handle, pending, worker_down_reply(handle.space16, reason,
                                                            pending.op, hint))
        log.info("space %s: worker %s %s%s", handle.space16, pid, reason,
                 f" (commanded: {stop_reason})" if stop_reason else "")
        if stop_reason in ("idle", "recycle"):
            handle.state = "idle"
            # A worker recycled with sessions attached left them for its successor
            # (kint/tenant_worker/session_handoff.py), which starts now: their watcher
            # and notes go on without waiting for a request.
            handed = stop_reason == "recycle" and live_sessions(handle.beat)
            if stopped_for_room and handle.pending and not self.shutting_down:
                # Asked for while it was stopped to make room: its requests wait their
                # turn behind the spaces the room was made for (room.py).
                self._queue_for_room(handle)
            elif (handle.pending or handed) and not self.shutting_down:
                self.spawn(handle)
        elif stop_reason in ("stop", "upgrade") or self.shutting_down:
            # One stopped for an upgrade handed its sessions over, if it had any, to the
            # next supervisor's worker (kint/supervisor/succession.py).
            handle.state = "stopped"
        elif stop_reason == "restart":
            # Its sessions too were handed to the successor (session_handoff.py), unless
            # the space moved to another store, which that successor serves.
            self.spawn(handle)
        else:
            if handle.start_refused is not None:
                self._start_refused(handle, now, reason, handle.start_refused)
            else:
                self._crashed(handle, now, reason)
            if not told:  # its `fatal` may still come, later than the hold: what to mend
                self.record_unheard(retired, reason)

    def _refused_unheard(self, handle: WorkerHandle) -> str:
        """The worker exited EXIT_REFUSED and its `fatal`, which names the holder, has not
        been read (lost, or later than the exit's hold for it, exit_hold.py, and then names
        the holder from when it comes: last_words.py). The code says as much as the message would
        have, bar the holder: a refusal, never a crash (which restarted the space and
        counted towards a quarantine). Returns the reason, and sets `start_refused` for
        `_exited`."""
        path = worker_lock_path(self.home, handle.space16)
        handle.start_refused = StartRefusal(ErrorCode.WORKER_DOWN.value,
                                            unnamed_holder_hint(path), None)
        return (f"the worker of space {handle.space16} refused to start: another worker of "
                f"the space holds its worker lock {path}; no second worker is started "
                f"beside it on the same store")

    def _start_refused(self, handle: WorkerHandle, now: float, reason: str,
                       refusal: StartRefusal) -> None:
        """The worker refused to start, for one of two causes, neither a crash (a restart
        would only be refused again, and a quarantine would outlast the cause):
        - an older worker of the space, left by a supervisor that died, still runs
          (stopped or stuck) and holds the space's worker lock
          (kint.tenant_worker.worker_lock): WORKER_DOWN naming the holder; the sweep
          drops the refusal once the lock is free (timed.py);
        - it began short of open files, under its limit (worker_wire.EXIT_NO_FILES) or
          the system's table full (worker_wire.EXIT_NO_SYSTEM_FILES, ENFILE): BUSY, as
          an op that runs out is, with that cause's hint; the sweep forgets the refusal
          once the supervisor's limit rose or the table has room (room.py).
        The requests waiting for it are answered with the refusal's code and hint, the
        space is left idle with the reason as its last exit and the refusal in its row
        (`kint supervisor status`: degraded, `idle (held by pid N)` or `idle (no open
        files)`), and the next request starts a worker again.

        Refused at a quarantine's retry, the space stays quarantined, its backoff as it
        was, the next retry one backoff from now: the refusal says nothing of the crashes
        the quarantine is for (neither that they are mended, which lifting it would
        assume, every request then starting a worker at once, nor that one more happened,
        which doubling the backoff would count)."""
        code, hint = refusal.code, refusal.hint
        if handle.backoff_s is not None and handle.retry_started_at is not None:
            handle.quarantined_until = now + handle.backoff_s
            handle.state = "quarantined"
        else:
            handle.state = "idle"
        handle.last_exit = reason
        log.warning("space %s: the worker refused to start: %s", handle.space16, reason)
        for pending in list(handle.pending.values()):
            self._answer(handle, pending, error_reply(None, ErrorCode(code), reason, hint))

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
