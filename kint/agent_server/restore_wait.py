"""A restore (`memory_pull` with `discard_local`) that may outlast its tool call, followed to
its end by a thread of its own.

A restore moves the store aside and rebuilds it, which can take longer than any client
waits for a tool call (Codex gives up at the `tool_timeout_sec` `kint setup` writes, 180 s;
Hermes at 120 s). So the tool call waits for it only up to the bound every kint tool keeps
(kint.agent_server.tools.TOOL_WAIT_S) and then answers RESTORE_RUNNING, while the server
keeps its client closed, so nothing opens the store under the restore: the tools that need
the store are refused RESTORE_RUNNING meanwhile (kint.agent_server.wrapped_client), the
others are served.

The restore's request is sent by a `RestoreUnderWay` thread on a socket of its own, which
waits for the worker's answer as `kint pull` does (RESTORE_WAIT_S), not for the tool call's
bound. Why a thread that waits, rather than a look at the worker's beat at each later tool
call (what this module did first): the answer comes when the restore has ended, so the
store is opened then, at once and by that thread, and the agent's next call, Sibyl's or
kint's, finds it open. A beat is up to a second old and reads "still pulling" for that
second, so a call just after the end was refused once more, and nothing opened the store
until some tool was called. The thread opens it under the shared client's lock; no Sibyl
call can be running then (every one is refused while the restore is followed, and only
memory_pull, behind the one-call gate, starts one), so opening it races nothing. The
answer is kept (`outcome`) for memory_status: an agent told RESTORE_RUNNING learns there
whether the restore it asked for went through.

A supervisor that exits while it holds the restore's request takes its worker with it (the
worker dies with its supervisor: kint.tenant_worker.worker_start), so no answer ever comes: the
thread hears so from its client (SupervisorUnavailable) within about a second. It then
waits until that worker has exited (it holds the space's worker lock for its whole life,
with its supervisor's pid: kint.agent_server.old_worker, so it is known however early its
supervisor died, with no status needed) and no process holds the space's head lock (the
dying worker's restore has stopped, however far it got; a worker still alive keeps the
store open, and the restore sent again would be refused over it) and sends the same
restore again, which starts a supervisor and carries the agent's request out: the
store ends as the chain has it whether the first one was cut before its move, during its
rows or after its last. Only then is the store opened. Before, Sibyl's tools stayed refused
until some kint tool happened to start a supervisor.

A worker outlives its supervisor by its own stop grace and a beat at most
(OLD_WORKER_GONE_S, kint.tenant_worker.stop_grace); one still there then is stopped
(SIGSTOP, a debugger) or stuck, and from then on the refusals and memory_status name its
pid and how to end it. The store stays closed while it lives, however long: a stopped
worker that resumes runs its restore on for its stop grace, and would move the store aside
under a client opened over it. (It was once opened after the supervisor's stop and kill
graces, 20 s, which bound a stop the supervisor commands, not a worker left alone.) Once it
is gone the restore is sent again. (Its pid was once learnt from the supervisor's status
while the call waited, and a worker no status had named looked for among the processes
holding the head lock: one stopped before it took that lock, its supervisor dead within
the look's half second, was found by neither.) The head lock held that long by a process
other than that worker (another kint process's push or pull), counted from that worker's
exit, ends the restore BUSY instead, the store opened as it stands. A supervisor that
still holds the home and does not answer (stopped, or starved) has a worker that may still
be restoring: the thread then looks at its status (the worker's beat) until it no longer
runs the pull, or the supervisor is gone after all.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable

from kint.client import PROGRESS_AGE_SLACK_S, Client, KintError, SupervisorUnavailable
from kint.agent_server.old_worker import head_lock_free, old_worker
from kint.protocol import ErrorCode
from kint.seconds_text import seconds_text
from kint.space_row import read_space_row
from kint.lock_table import TableReader
from kint.tenant_worker.stop_grace import ORPHAN_EXIT_S

log = logging.getLogger("kint.server")

RESTORE_RUNNING = "RESTORE_RUNNING"
RESTORE_RUNNING_HINT = ("call memory_status in a minute: `restore_running` says whether it "
                        "still runs and `restore_outcome` how it ended; until it ends, "
                        "Sibyl's tools, memory_verify and memory_push answer RESTORE_RUNNING, "
                        "and this server opens the restored store as soon as it ends")
# How long the thread waits for the restore's answer: `kint pull`'s own bound.
RESTORE_WAIT_S = 1800.0
# How often the thread looks again while the supervisor is gone or silent.
LOOK_EVERY_S = 0.5
# How long after the restore's supervisor is found gone its worker is expected to have
# exited: the longest a worker outlives its supervisor (its own stop grace for the op in
# flight, and a beat's slack: kint.tenant_worker.stop_grace). One still there then is
# stopped or stuck: the refusals name it, and the store stays closed until it is gone. The
# head lock still held then by another process ends the restore BUSY.
OLD_WORKER_GONE_S = ORPHAN_EXIT_S


class RestoreUnderWay:
    """One restore, sent and waited for by a thread of its own (see the module's
    docstring). `send(client, timeout_s)` sends the restore's request on `client` and
    returns its result; `ended(self)` is called on that thread once the restore has ended
    and the tool call stopped waiting for it (the shared client opens the store)."""

    def __init__(self, home: Path, space16: str,
                 send: Callable[[Client, float], dict[str, Any]],
                 ended: Callable[["RestoreUnderWay"], None],
                 reattach: Callable[[], None]) -> None:
        self.home, self.space16 = home, space16
        self._send, self._ended, self._reattach = send, ended, reattach
        self.sent_at = time.monotonic()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._handed_over = False  # the tool call stopped waiting: the thread opens
        self.result: dict[str, Any] | None = None
        self.error: KintError | None = None
        self.unanswered = False  # its supervisor did not answer it (exited, or stopped)
        self.resumed = False  # sent again after its supervisor exited
        # The old worker a dead supervisor left, by the space's worker lock, once found.
        self.worker_pid: int | None = None
        # The kernel's table of locks as the looks for that worker read it (once a second
        # at most: it lists every lock of the box).
        self._table = TableReader()
        # Its supervisor is gone and that worker still runs OLD_WORKER_GONE_S later.
        self.worker_stays = False
        self.ended_at: float | None = None

    def start(self) -> None:
        threading.Thread(target=self._run, name="kint-restore", daemon=True).start()

    def wait(self, seconds: float) -> bool:
        """Whether the restore ended within `seconds`. When it did not, its end is the
        thread's to handle from now on (the store opened there, not by the caller)."""
        self._done.wait(max(0.0, seconds))
        with self._lock:
            if self._done.is_set():
                return True
            self._handed_over = True
        return False

    def running(self) -> bool:
        return not self._done.is_set()

    def outlasted_call(self) -> bool:
        """Whether the tool call stopped waiting for it (answered RESTORE_RUNNING)."""
        with self._lock:
            return self._handed_over

    def message(self) -> str:
        began = int(time.monotonic() - self.sent_at)
        if self.worker_stays and not self.resumed:
            return (f"a memory_pull with discard_local began {began} s ago; the supervisor "
                    f"running it exited, and the worker that ran it (pid {self.worker_pid}) "
                    f"still runs, past the {seconds_text(OLD_WORKER_GONE_S)} a worker "
                    f"outlives its supervisor (stopped or stuck): this server keeps the "
                    f"store closed while that worker lives, since it could resume the "
                    f"restore and move the store aside under an open client, and sends the "
                    f"restore again once it is gone")
        if self.unanswered and not self.resumed:
            return (f"a memory_pull with discard_local began {began} s ago; the supervisor "
                    f"running it did not answer it (it exited, or does not run), and this "
                    f"server sends the restore again once the worker that ran it is gone "
                    f"(within {seconds_text(OLD_WORKER_GONE_S)} of its supervisor unless "
                    f"stopped or stuck), or opens the store once that worker says it ended")
        if self.resumed:
            return (f"a memory_pull with discard_local began {began} s ago; the supervisor "
                    f"running it exited, and this server sent the restore again, which is "
                    f"still restoring the store in the space's worker; the store opens "
                    f"when it ends")
        return (f"a memory_pull with discard_local began {began} s ago and is still "
                f"restoring the store in the space's worker; this server opens the store "
                f"when it ends")

    def hint(self) -> str:
        """What to do about a refusal while this restore runs: how to end a worker that
        outlived its supervisor (`worker_stays`), the human's (a process to signal, which
        the agent has no tool for), else to wait for the restore."""
        if self.worker_stays and not self.resumed:
            pid = self.worker_pid
            return (f"stop and tell the human: `kill -CONT {pid}` if it is stopped (it then "
                    f"exits, its supervisor gone), or `kill -KILL {pid}` if it is stuck; this "
                    f"server then sends the restore again and opens the store when it ends "
                    f"(memory_status says how under restore_outcome)")
        return RESTORE_RUNNING_HINT

    def outcome(self) -> dict[str, Any] | None:
        """How the restore ended, for memory_status (None while it runs): `ok`, and the
        refusal's `error`, `message` and `hint`, or `resumed` when it was sent again."""
        if self.running():
            return None
        out: dict[str, Any] = {"ok": self.error is None, "resumed": self.resumed,
                               "ended_s_ago": (round(time.monotonic() - self.ended_at, 1)
                                               if self.ended_at is not None else None)}
        if self.error is not None:
            out.update(error=self.error.code, message=self.error.message,
                       hint=self.error.hint)
        return out

    def _run(self) -> None:
        client = Client(self.home)
        try:
            self.result = self._follow(client)
        except KintError as err:
            self.error = err
        except Exception as err:  # noqa: BLE001 - the store must open whatever went wrong
            log.exception("following the restore failed")
            self.error = KintError("INTERNAL", f"following the restore failed: {err!r}",
                                   "this is a bug in kint; kint.log has the details")
        finally:
            client.close()
        with self._lock:
            self.ended_at = time.monotonic()
            self._done.set()
            handed_over = self._handed_over
        if handed_over:
            log.info("the restore a memory_pull began has ended (%s); opening the store",
                     "ok" if self.error is None else self.error.code)
            self._ended(self)
        if self.resumed:  # its call started a new supervisor, whose worker lacks the session
            try:
                self._reattach()
            except Exception:  # noqa: BLE001 - the session's keepalive attaches it anyway
                log.warning("could not attach the session after the restore", exc_info=True)

    def _follow(self, client: Client) -> dict[str, Any]:
        try:
            return self._send(client, RESTORE_WAIT_S)
        except SupervisorUnavailable as err:
            log.warning("the restore's supervisor did not answer it (%s)", err.message)
            self.unanswered = True
            # The supervisor the restore went to, read once sent: a pid read before the
            # send was None when the send started the supervisor, and then that one,
            # stopped but alive, read as gone, so the restore was sent a second time.
            if not self._wait_out(client, client.sent_to):
                raise
        # Its supervisor exited mid-restore: the same restore again, now the old worker's
        # has stopped (see the module's docstring).
        self.resumed = True
        log.info("the supervisor that ran the restore exited; sending it again")
        return self._send(client, RESTORE_WAIT_S)

    def _wait_out(self, client: Client, serving: int | None) -> bool:
        """After a call the supervisor `serving` (its pid) did not answer: True once it is
        gone, the old worker too and no process holds the head lock (send the restore
        again), False once the supervisor that still holds the home says its worker no
        longer runs the pull (it ended unanswered). An old worker still there
        OLD_WORKER_GONE_S after the supervisor was found gone is waited for as long as it
        lives, the refusals naming it (see the module's docstring); the head lock held that
        long by another process raises BUSY: sent again, the restore would only be refused
        over it, and the store is opened as it stands."""
        look = Client(self.home, autostart=False)
        give_up_at = self.sent_at + RESTORE_WAIT_S  # then sent again: its worker says BUSY
        gone_at: float | None = None  # when the supervisor was first found gone
        # Since when the head lock is held with no old worker alive: counted from the old
        # worker's exit, not the supervisor's (a worker that stayed, then exited while
        # another process held the lock a moment, once got BUSY at once, with no grace).
        held_at: float | None = None
        try:
            while True:
                now = client.serving_pid()
                if now is None or now <= 0 or now != serving:
                    looked_at = time.monotonic()
                    gone_at = looked_at if gone_at is None else gone_at
                    worker_alive = self._old_worker_lives(client.serving_pid)
                    if not worker_alive and head_lock_free(self.home, self.space16):
                        return True
                    if worker_alive:
                        held_at = None
                        if looked_at - gone_at >= OLD_WORKER_GONE_S:
                            self._note_worker_stays()
                    else:
                        held_at = looked_at if held_at is None else held_at
                        if looked_at - held_at >= OLD_WORKER_GONE_S:
                            raise self._head_lock_stays()
                elif not self._worker_pulls(look):
                    return False
                elif time.monotonic() >= give_up_at:
                    return True
                time.sleep(LOOK_EVERY_S)
        finally:
            look.close()

    def _old_worker_lives(self, serving_pid: Callable[[], int | None]) -> bool:
        """Whether a worker no supervisor serving now (`serving_pid`) started still holds
        the space's worker lock (kint.agent_server.old_worker): the one that ran the
        restore, or one an earlier supervisor left, either of which keeps the store open.
        Its pid, when the lock file names it, is what the refusals name. A holder whose
        supervisor nobody knows yet (the kernel names it, the lock file still the holder
        before it: an instant after it took the lock) counts as old for this look only,
        and is neither logged nor named: it may be the serving supervisor's new worker,
        and the next look reads its own line."""
        found = old_worker(self.home, self.space16, serving_pid, self._table)
        if found is None:
            return False
        if (found.pid is not None and found.supervisor_pid is not None
                and found.pid != self.worker_pid):
            log.info("the worker %s holds the space's worker lock, its supervisor gone: "
                     "waited for before the restore is sent again", found.pid)
            self.worker_pid = found.pid
        return True

    def _note_worker_stays(self) -> None:
        """The old worker outlived its supervisor past OLD_WORKER_GONE_S: logged once, and
        the refusals name it from now on (`message`, `hint`)."""
        if not self.worker_stays:
            log.warning("the worker %s that ran the restore still runs %s after its "
                        "supervisor exited (stopped or stuck); the store stays closed until "
                        "it is gone, then the restore is sent again", self.worker_pid,
                        seconds_text(OLD_WORKER_GONE_S))
        self.worker_stays = True

    def _head_lock_stays(self) -> KintError:
        """The refusal the restore ends with when its supervisor and worker are gone and
        another process still holds the space's head lock OLD_WORKER_GONE_S later."""
        waited = seconds_text(OLD_WORKER_GONE_S)
        log.warning("the space's head lock is still held %s after the restore's "
                    "supervisor exited; the restore is not sent again", waited)
        return KintError(
            ErrorCode.BUSY.value,
            f"the supervisor running the restore exited, and the space's head lock is still "
            f"held {waited} later (another kint process pushes or pulls the space): the "
            f"restore was not sent again, and the store is opened as it stands",
            "call memory_pull with discard_local again once `kint status` shows no push or "
            "pull running")

    def _worker_pulls(self, look: Client) -> bool:
        """Whether the space's worker runs a pull begun since the restore was sent, by the
        supervisor's status (the worker's last beat), which never waits on the worker. A
        status that cannot be read says yes: the caller looks again."""
        try:
            row = read_space_row(look, self.space16)
        except KintError:
            return True
        return row is not None and self._pulls(row)

    def _pulls(self, row: dict[str, Any]) -> bool:
        """Whether the space's status `row` shows its worker running a pull begun since
        the restore was sent (the op's age, given to the millisecond, and a beat's slack)."""
        if row.get("uptime_s") is None:  # no worker runs it any more
            return False
        ops = row.get("ops") or ([row["op"]] if row.get("op") else [])
        since = time.monotonic() - self.sent_at + PROGRESS_AGE_SLACK_S
        return any(op.get("name") == "pull" and op.get("age_s") is not None
                   and op["age_s"] <= since for op in ops)
