"""`kint-server`: the MCP stdio server agents run (docs/harnesses.md).

Sibyl's eight tools exactly as shipped (from `sibyl_memory_mcp.server.build_server()`), on
kint's one client, plus kint's six tools forwarded to the space's worker, on a server named
`kint` whose instructions tell the agent to verify before it acts (kint.agent_server.surface).
stdout is the MCP transport, so the log goes to $KINT_HOME/kint.log and to stderr (which
an MCP client shows in its own logs), as v0.3.0's does. At start it attaches to
the worker (a failed attach is tried again in the background) and waits up to
KINT_BOOTSTRAP_SECONDS for a pull; on exit (normal, SIGTERM,
SIGHUP, SIGINT) it asks the worker for one push (when this session wrote) and exits at once: the
worker finishes the push after it is gone.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, NoReturn

from kint import crypto_backend
from kint.logs import SERVER_LOG, setup_file_logging
from kint.paths import home_refusal, kint_home

if TYPE_CHECKING:
    from kint.agent_server.session import Goodbye

log = logging.getLogger("kint.server")


def _log_to_file(home: Any) -> None:
    # Reopened when the supervisor rotates it (at KINT_LOG_MAX_BYTES, like its own); the
    # same lines on stderr, where Claude Code and Codex show a server's log.
    setup_file_logging(home, name=SERVER_LOG, stderr=True)
    # The MCP SDK logs every request at INFO; the log counts against the cap (it lives
    # under KINT_HOME), so only its warnings are kept.
    logging.getLogger("mcp").setLevel(logging.WARNING)


# The least a start-up pull is waited for: long enough for the request to reach the
# worker, which then runs it to the end whether or not anyone still waits.
MIN_PULL_WAIT_S = 0.5


# Why there was no start-up pull, in kint v0.3.0's log lines, for the two refusals that
# mean "nothing to pull with yet" rather than a failure.
BOOTSTRAP_SKIPPED = {
    "NOT_CONNECTED": "not connected (no enrolment); serving anyway, memory_connect explains",
    "NO_DATA_KEY": "data key not cached; serving without pull, memory_connect explains",
}


def bootstrap_seconds() -> float:
    from kint import settings

    return float(settings.value("KINT_BOOTSTRAP_SECONDS"))


def _start_up_pull(session: Any, deadline: float,
                   clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """The pull, `unread`: its answer reaches this log only, so what a settlement of an
    interrupted push finds stays kept for the agent's next push or pull to say (it was
    used up here, said to no one). A supervisor of an older kint, which does not know the
    argument, is asked the plain pull, within what is left of the same budget (each waited
    for at least MIN_PULL_WAIT_S). `clock` reads `deadline`'s clock: a test hands its own,
    where patching this module's `time.monotonic` froze the process's for every thread."""
    from kint.client import KintError

    try:
        return session.call("pull", {"unread": True}, timeout_s=_left(deadline, clock))
    except KintError as err:
        if err.code != "BAD_REQUEST" or "unknown argument 'unread'" not in err.message:
            raise
    return session.call("pull", {}, timeout_s=_left(deadline, clock))


def _left(deadline: float, clock: Callable[[], float]) -> float:
    """What is left of the start-up budget for a pull to be waited for."""
    return max(deadline - clock(), MIN_PULL_WAIT_S)


def _bootstrap(session: Any, deadline: float) -> None:
    """The start-up pull, waited for within what is left of the start-up budget (the attach
    came first out of the same budget), so a bare handshake is never held past it. The
    pull goes out whatever is left, even of `KINT_BOOTSTRAP_SECONDS=0`: it runs in the
    worker and finishes there, as v0.3.0's finishes behind its server."""
    from kint.client import KintError, SupervisorUnavailable
    from kint.protocol.errors import ErrorCode

    try:
        result = _start_up_pull(session, deadline)
        log.info("bootstrap: %s", result.get("message"))
    except KintError as err:
        if err.code in (ErrorCode.TIMEOUT.value, SupervisorUnavailable.CODE):
            log.info("bootstrap: still running; serving now, the pull finishes in the "
                     "background")
        elif err.code in BOOTSTRAP_SKIPPED:  # v0.3.0's lines (10-configuration.md, "Logs")
            log.info("bootstrap: %s", BOOTSTRAP_SKIPPED[err.code])
        else:
            log.info("bootstrap: no pull (%s): %s; serving the local store as it is",
                     err.code, err.message)


def main() -> None:
    crypto_backend.claim()  # kint's own process: pycryptodome through ctypes, once it loads
    if sys.argv[1:]:
        # It takes none (09-cli.md); said at once, rather than serving MCP on the terminal.
        print("kint-server takes no arguments: it is the MCP stdio server a harness starts "
              "(`kint setup` registers it, docs/harnesses.md); its tenant and store come "
              "from KINT_TENANT and SIBYL_MEMORY_DB", file=sys.stderr)
        sys.exit(0 if sys.argv[1:] in (["--help"], ["-h"]) else 2)
    home = kint_home()
    refusal = home_refusal(home, "kint-server")
    if refusal is not None:  # as the command line says it; the log could not be opened there
        print(refusal, file=sys.stderr)
        sys.exit(2)
    _log_to_file(home)
    from kint import spaces
    from kint.agent_server import surface
    from kint.agent_server.progress import ProgressLines
    from kint.agent_server.session import AgentSession
    from kint.agent_server.tools import kint_tools
    from kint.agent_server.wrapped_client import SharedClient

    ref = spaces.resolve()
    session = AgentSession(ref, home)
    shared = SharedClient(ref.db, ref.tenant, home, session)
    from sibyl_memory_mcp import server as sibyl_server  # reads its paths at import

    shared.refresh()  # a store that cannot be opened now is no reason not to serve
    mcp = sibyl_server.build_server()
    lines = ProgressLines(home, ref.space16)
    surface.serve(mcp, kint_tools(session, shared), before_call=shared.before_call,
                  progress_line=lines.line)
    deadline = time.monotonic() + bootstrap_seconds()  # one budget for attach and pull
    try:
        session.attach(timeout_s=max(0.5, deadline - time.monotonic()))
    except Exception as err:  # noqa: BLE001 - serve Sibyl's tools even without the worker
        # The session's keepalive tries again (soon at first) and logs the attach that works.
        log.warning("could not attach to the space's worker: %s; trying again in the "
                    "background", err)
    boot = threading.Thread(target=_bootstrap, args=(session, deadline), daemon=True)
    boot.start()
    boot.join(max(0.0, deadline - time.monotonic()) + 1.0)

    stopped_by: list[int] = []

    def only_note() -> None:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, lambda signum, _frame: stopped_by.append(signum))

    def unwind(signum: int, _frame: Any) -> None:
        # Only unwind here: nothing may touch the chain inside a Sibyl write.
        stopped_by.append(signum)
        # Noted from now: one landing in the finally before it set this would raise there
        # and skip the goodbye and the exit.
        only_note()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, unwind)
    signal.signal(signal.SIGHUP, unwind)
    # Ctrl-C too (a harness in a terminal shares its process group). Left to Python's own
    # handler, a first one was asyncio.Runner's (anyio runs on it): a cancel of its main
    # task, which did not end the serve (the stdio read waits in a thread), and the server
    # served on, its session open.
    signal.signal(signal.SIGINT, unwind)
    # v0.3.0's line (10-configuration.md, "Logs"), then the space this kint serves it as.
    log.info("kint-server: serving Sibyl's tools plus kint's on stdio (tenant %s, db %s); "
             "space %s (%s)", ref.tenant, ref.db, ref.space16, ref.label)
    try:
        mcp.run()
    finally:
        # Unwinding now: a stop signal from here is only noted (set by `unwind` already
        # when a signal unwound). Raised inside the close, which waits up to its linger for
        # the goodbye to leave (kint.client.Client.close), it cut the close short and
        # skipped the exit below: the server stayed. (Its context's end is waited for by a
        # thread that blocks them, so a noted one lets it go on: kint/client_context.py.)
        only_note()
        # First: the worker's goodbye must leave before a SIGTERM lands.
        goodbye = session.close()
        lines.close()
        _say_goodbye(goodbye, session.wrote)
        if stopped_by:
            _exit_now(128 + stopped_by[0])


def _say_goodbye(goodbye: Goodbye, wrote: bool) -> None:
    """kint-server's last line: what became of its goodbye, as far as its close knows
    (AgentSession.close), and no further. Left: written to the supervisor's connection,
    on its way to the worker (an exit push when the session wrote); a supervisor killed
    before it reads it still loses it. Else it did not leave, or may not have: never
    queued (the warning before says why), or not written within the close's linger,
    which ZeroMQ ends by dropping what is queued without saying what. Without it the
    worker runs no exit push and forgets the session within SESSION_TTL_S of the last
    keepalive it had (kint/tenant_worker/sessions.py)."""
    from kint.agent_server.session import GOODBYE_LINGER_MS
    from kint.tenant_worker.config import SESSION_TTL_S

    what = "its exit push" if wrote else "its detach (nothing written: no exit push)"
    if goodbye == "left":
        log.info("kint-server exits; %s was written to the supervisor's connection, on its "
                 "way to the worker", what)
        return
    fate = ("was not sent (the warning above says why)" if goodbye == "unsent" else
            "may not have left (not written to the supervisor's connection within "
            f"{GOODBYE_LINGER_MS / 1000:g} s, and dropped then)")
    log.warning("kint-server exits; %s %s; without it the worker runs no exit push and "
                "forgets this session within %g s", what, fate, SESSION_TTL_S)


def _exit_now(code: int) -> NoReturn:
    """End the process now, once its goodbye is sent. A signal unwinds the event loop from
    inside, which leaves the SDK's worker threads (anyio's, not daemons) waiting on a queue
    nothing feeds any more: the interpreter's own exit would wait for them for good, and
    the harness that sent SIGTERM would find the server still there. What the interpreter
    runs at exit (Sibyl's write counter, the log's flush) runs first."""
    import atexit
    import os

    atexit._run_exitfuncs()
    os._exit(code)


if __name__ == "__main__":
    main()
    sys.exit(0)
