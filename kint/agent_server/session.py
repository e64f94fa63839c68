"""One kint-server session: its link to the space's worker through the supervisor.

Every call carries the settings of this server's environment that the daemon reads (the
harness's MCP configuration): the worker applies the call's own, and the watcher's timings
on attach, and a line for each it does not use comes back in `notices` (logged here, and
left in the tool's result for the agent).

It attaches at start (and every KEEPALIVE_S, so the worker knows a session is alive), sends
a `note_write` cast for every write its tool path made, and on the way out casts one
`exit_push`, which the worker runs after this process is gone, within its bound
(kint.tenant_worker.exit_bound: at it, or at a stop of the worker, it stops between two
epochs and leaves the other rows in the store for the next push). Calls from
tool threads share one lock, because a ZeroMQ socket belongs to one thread at a time; an
exit that finds it held by a tool call still waiting on the worker (the client went away
mid-call) casts from a socket of its own rather than wait out the call's bound.

The keepalive attaches on a socket of its own: on the session's, it waited behind every
long tool call (a pull, up to TOOL_WAIT_S), and one that woke as the session closed sent
its attach after the goodbye, so the worker counted a gone server as attached until
SESSION_TTL_S. Each attach is sent under `_beat`, after a look at `_stop`; `close()` sets
`_stop` and then takes `_beat`, so no attach leaves once the goodbye may have.

The keepalive runs whether or not the start's attach went through. Before, a server whose
first attach failed (the supervisor paused or still starting, the worker restarting or
quarantined, the start-up budget spent) stayed unattached for its whole life: no watcher
pushed its agent's writes, the worker counted no session (so it could go idle), and the
server's watcher settings never reached it. While the session is not attached the keepalive
tries again sooner: RETRY_FIRST_S, doubling up to KEEPALIVE_S, then every KEEPALIVE_S once
an attach goes through. A failure is logged once (the start's by the caller), and so is the
attach that ends it: a line per retry would fill the log (it counts against the cap).

A supervisor that was killed takes its workers with it, and the new one's worker knows no
session: until the next keepalive (up to KEEPALIVE_S) it ran no watcher for this server,
used none of its watcher settings (every call said so in `notices`) and could go idle,
while memory_status still said `attached: true`. So each tool call looks, around the call,
at which supervisor holds the home (a look at the pid file the client keeps open), and
attaches again at once when it is not the one that took the session's last attach.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Literal

from kint import settings
from kint.client import Client, KintError
from kint.protocol.errors import split_notices
from kint.settings.wire import outgoing
from kint.space_row import read_parked
from kint.spaces import SpaceRef

log = logging.getLogger("kint.server")

KEEPALIVE_S = 60.0
# The first wait before an unattached session's keepalive tries again: it doubles at each
# failed try, up to KEEPALIVE_S.
RETRY_FIRST_S = 2.0
# How long an exiting server waits, in all, for an attach its keepalive is sending and for
# the socket a tool call holds: short, since a harness may SIGTERM it soon after closing
# stdin (the SDK's stdio client: 2 s).
CLOSE_WAIT_S = 0.25
# How long the exiting server's close waits for its goodbye (the exit push or detach) to
# leave for the supervisor (Client.close's linger); past it, ZeroMQ drops what is left.
GOODBYE_LINGER_MS = 2000
# What became of the goodbye, as its close knows it (kint-server's last line says which):
# written to the supervisor's connection within the linger, never queued (a refusal the
# log gave), or queued and not written within the linger (ZeroMQ then drops it, unsaid).
Goodbye = Literal["left", "unsent", "unwritten"]


class AgentSession:
    def __init__(self, ref: SpaceRef, home: Any) -> None:
        self.ref = ref
        self.id = os.urandom(8).hex()
        self._home = home
        # Its own context: the goodbye left queued at `close` goes before the process exits.
        self._client = Client(home, own_context=True)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # Held while the keepalive sends an attach (see the module's docstring).
        self._beat = threading.Lock()
        self._keepalive: threading.Thread | None = None
        # Whether the worker took this session's last attach (written by the thread that
        # sent it: the start's, then the keepalive's), and the pid of the supervisor that
        # answered it: another one holding the home has a worker that never saw it.
        self.attached = False
        self._attached_to: int | None = None
        self.watcher = not settings.value("KINT_NO_WATCHER")
        self._logged: set[str] = set()
        # Whether this session's tools wrote anything: a session that wrote nothing (a
        # health check, a handshake) asks for no exit push, which on Base costs gas; the
        # space's worker and its watcher already own any rows left unanchored.
        self.wrote = False

    def call(self, op: str, args: dict[str, Any] | None = None, timeout_s: float = 60
             ) -> dict[str, Any]:
        with self._lock:
            self._attach_if_new(self._client)
            result = self._call_on(self._client, op, args, timeout_s)
            # The call may have started the supervisor (the one before was gone).
            self._attach_if_new(self._client)
            return result

    def parked(self) -> list[dict[str, Any]] | None:
        """The space's requests waiting for its exited worker's last replies, from the
        supervisor's status (kint.space_row.read_parked), on the tool calls' socket:
        memory_status shows them beside the worker's status, which cannot say them.
        That client starts a supervisor when none runs, so a supervisor that exited just
        after answering the status (an upgrade's drain ending) has this read start the
        next one, which answers [], true of it. Left so, not read on a client that starts
        none (as `kint status` does): the status call before it starts one the same way,
        as does every call of this session's, its keepalive's included, which keeps a
        supervisor serving the space while the session lives."""
        with self._lock:
            return read_parked(self._client, self.ref.space16)

    def _attach_if_new(self, client: Client) -> None:
        """Attach again when the supervisor holding the home is not the one that took this
        session's last attach (see the module's docstring). A failure is left to the
        keepalive, told to try again soon."""
        if not self.attached or self._stop.is_set():
            return
        now, was = client.serving_pid(), self._attached_to
        if now is None or now <= 0 or now == was:
            return
        try:
            self._call_on(client, "attach", self._attach_args(), 30)
        except KintError as err:
            self.attached = False
            log.warning("the supervisor changed (pid %s, was %s) and its worker did not take "
                        "this session's attach (%s); the keepalive tries again within a minute",
                        now, was, err.message)
            return
        log.info("the supervisor changed (pid %s, was %s): attached this session to the "
                 "space's worker again", now, was)

    def call_on(self, client: Client, op: str, args: dict[str, Any] | None,
                timeout_s: float) -> dict[str, Any]:
        """`op` on a socket the calling thread owns (a restore's thread waits on its own for
        up to half an hour, kint.agent_server.restore_wait), not the tool calls' one."""
        return self._call_on(client, op, args, timeout_s)

    def attach_if_new(self) -> None:
        """Attach again now when another supervisor holds the home than the one that took
        the last attach (a restore's thread started it), not at the next tool call."""
        with self._lock:
            self._attach_if_new(self._client)

    def _call_on(self, client: Client, op: str, args: dict[str, Any] | None,
                 timeout_s: float) -> dict[str, Any]:
        """`op` on `client`'s socket, which the caller's thread alone uses; its notices
        logged."""
        try:
            result = client.call(op, tenant=self.ref.tenant, db=self.ref.db,
                                 space=self.ref.label, args=self._args(args),
                                 timeout_s=timeout_s)
        except KintError as err:  # a refusal carries its notices under its hint
            self._log_notices(split_notices(err.hint)[1])
            raise
        if op == "attach":
            self._attached_to = client.serving_pid()
        self._log_notices(result.get("notices") or [])
        return result

    def _log_notices(self, lines: list[str]) -> None:
        for line in lines:
            if line not in self._logged:  # once per server: the log counts against the cap
                self._logged.add(line)
                log.warning("%s", line)

    @staticmethod
    def _args(args: dict[str, Any] | None) -> dict[str, Any]:
        sent = outgoing()
        return {**(args or {}), "settings": sent} if sent else dict(args or {})

    def cast(self, op: str, args: dict[str, Any], timeout_s: float = 900) -> None:
        with self._lock:
            self._cast(self._client, op, args, timeout_s)

    def _cast(self, client: Client, op: str, args: dict[str, Any], timeout_s: float) -> bool:
        """Queue the cast `op` on `client`; whether it was queued (else said in the log)."""
        try:
            client.cast(op, tenant=self.ref.tenant, db=self.ref.db, space=self.ref.label,
                        args=self._args(args), timeout_s=timeout_s)
        except KintError as err:
            log.warning("%s not sent: %s", op, err.message)
            return False
        return True

    def attach(self, timeout_s: float = 30) -> None:
        """Attach now, and start the keepalive whether or not that went through. The
        start's failure is raised for the caller to log (in its own words); the keepalive
        then tries again on its backoff and logs the attach that ends it."""
        try:
            self.call("attach", self._attach_args(), timeout_s=timeout_s)
            self.attached = True
        finally:
            self._keepalive = threading.Thread(target=self._keep, name="kint-keepalive",
                                               daemon=True)
            self._keepalive.start()

    def _attach_args(self) -> dict[str, Any]:
        return {"session": self.id, "watcher": self.watcher}

    def _keep(self) -> None:
        """Attach again, on this thread's own socket, until `close()`: every KEEPALIVE_S
        while attached, sooner while not (see the module's docstring)."""
        client = Client(self._home)
        first_retry = min(RETRY_FIRST_S, KEEPALIVE_S)
        wait = KEEPALIVE_S if self.attached else first_retry
        failed_tries = 0 if self.attached else 1  # the start's attach, when it failed
        try:
            while not self._stop.wait(wait):
                with self._beat:
                    if self._stop.is_set():  # close() began while this one waited
                        return
                    try:
                        self._call_on(client, "attach", self._attach_args(), 30)
                    except Exception as err:  # noqa: BLE001 - the keepalive outlives any one try
                        message = repr(err)
                        if isinstance(err, KintError):
                            # The hint too: a space that moved to another store says
                            # here where it is now and that this server must restart.
                            message = f"{err.message}; {err.hint}" if err.hint else err.message
                        if self.attached:
                            log.warning("keepalive: the space's worker did not take this "
                                        "session's attach (%s); trying again in %g s, then "
                                        "at doubling waits up to every %g s", message,
                                        first_retry, KEEPALIVE_S)
                        wait = first_retry if self.attached else min(wait * 2, KEEPALIVE_S)
                        self.attached = False
                        failed_tries += 1
                        continue
                if not self.attached:
                    log.info("attached to the space's worker after %d failed attempt(s): it "
                             "counts this session now", failed_tries)
                self.attached = True
                wait, failed_tries = KEEPALIVE_S, 0
        finally:
            client.close()

    def note_write(self, tier: str, category: str | None, key: str, leaf: str | None) -> None:
        self.wrote = True
        args: dict[str, Any] = {"tier": tier, "key": key}
        if category is not None:
            args["category"] = category
        if leaf is not None:
            args["leaf"] = leaf
        self.cast("note_write", args, timeout_s=30)

    def close(self) -> Goodbye:
        """Ask the worker for one exit push when this session wrote, and let go: it
        finishes after we are gone. Either way the worker learns the session ended, when
        this goodbye leaves: whether it was queued, and if so whether it left this
        process within the close's linger (Client.close), for kint-server's last line to
        say."""
        self._stop.set()
        deadline = time.monotonic() + CLOSE_WAIT_S  # one wait for both locks
        # An attach the keepalive is sending now leaves before the goodbye; none after it.
        # One still waiting on a slow worker is not waited out: the worker ignores an
        # attach of a session that has said goodbye, whichever it runs first.
        if self._beat.acquire(timeout=CLOSE_WAIT_S):
            self._beat.release()
        op, timeout_s = ("exit_push", 900.0) if self.wrote else ("detach", 30.0)
        if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            # A tool call the exiting server no longer waits for holds this socket (the
            # worker goes on with it): say goodbye on a socket of this thread's own.
            log.info("a tool call is still waiting on the worker; it goes on there")
            spare = Client(self._home, own_context=True)
            queued = self._cast(spare, op, {"session": self.id}, timeout_s)
            return _goodbye(queued, spare.close(linger_ms=GOODBYE_LINGER_MS))
        try:
            queued = self._cast(self._client, op, {"session": self.id}, timeout_s)
            return _goodbye(queued, self._client.close(linger_ms=GOODBYE_LINGER_MS))
        finally:
            self._lock.release()


def _goodbye(queued: bool, written: bool) -> Goodbye:
    """The goodbye's fate from its cast (`queued`) and its close (`written`): a close with
    nothing of it queued measures nothing of it."""
    return "unsent" if not queued else "left" if written else "unwritten"
