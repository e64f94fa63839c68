"""The test suite's kint-server launcher: `python run_kint_server.py`.

It installs the test account gate in this process (kint_test_gate: Sibyl's real gate
trusting the test's throwaway key, and Sibyl's network guard), then runs kint's own
`kint.mcp_server.main`, the same code as the `kint-server` command.

`KINT_TEST_KEEPALIVE_S` (set only by tests) shortens the interval of the session's
keepalive attach (kint.agent_server.session.KEEPALIVE_S, 60 s, which also caps the retries
of a session not attached), so that a test sees what an older session is told at its next
attach without waiting a minute for it;
`KINT_TEST_ATTACH_RETRY_S` the first wait before an unattached session's keepalive tries
again (kint.agent_server.session.RETRY_FIRST_S, 2 s, doubling), so that a test sees a
session attach soon after its worker is back rather than at the next of those doublings;
`KINT_TEST_TOOL_WAIT_S` the longest a kint tool waits for the worker
(kint.agent_server.tools.TOOL_WAIT_S, 100 s), so that a test meets that bound without
waiting it out; `KINT_TEST_LOCK_PROBE_S` how long the server's check of a store waits on
another process's write lock before it answers BUSY (kint.sibyl_client.LOCK_PROBE_S, 2 s,
paid at start and at each tool call over a locked store), so that a test of that lock does
not wait the default out at every check. `KINT_TEST_OLD_WORKER_GONE_S` how long after a
restore's supervisor died its worker is expected gone
(kint.agent_server.restore_wait.OLD_WORKER_GONE_S, 13 s), so that a test sees what the
server says of a worker still there without waiting that out. `KINT_TEST_ATTACH_LOG` (a file, set
only by tests) gets a line, `SESSION_NAME`'s value, each time this server's session has attached and
logged what the worker answered (at start and at every keepalive), so that a test sees that a
session re-attached instead of sleeping for it. `KINT_TEST_AUTOSTART_ENTITLED=1` has a supervisor
this server starts (its calls start one when none runs) be the test's
(tests/support/run_supervisor.py, Sibyl's test gate in its workers, trusting the same
`KINT_TEST_TRUSTED_KEY` as this server), so that a test sees what the server does on its
own after a supervisor dies. kint reads none of this.
"""

import importlib
import os
import sys
import threading
from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
sys.path.insert(0, str(SUPPORT))

# Imported for what its import does (installs the gate and the guard), by name as the
# worker forkserver's preload imports it: no name of it is used here.
importlib.import_module("kint_test_gate")
from kint import sibyl_client  # noqa: E402
from kint.agent_server import restore_wait, session, tools  # noqa: E402
from kint.mcp_server import main  # noqa: E402



def _note_attaches(path: str) -> None:
    """Append a line to `path` after each attach this process's session completes."""
    call = session.AgentSession._call_on  # the start's attach and the keepalive's
    name = os.environ.get("SESSION_NAME", "")

    def noted(self, client, op, args, timeout_s):  # noqa: ANN001, ANN202 - _call_on's own
        result = call(self, client, op, args, timeout_s)
        if op == "attach":
            with open(path, "a") as f:
                f.write(name + "\n")
        return result

    session.AgentSession._call_on = noted


def _autostart_entitled() -> None:
    """The supervisor a call of this server starts is the test's (see the docstring)."""
    import subprocess

    from kint.settings.schema import environment_for
    from kint.supervisor import autostart

    def spawn(home, *, on_demand=True):  # noqa: ANN001, ANN202 - spawn_daemon's own
        # The environment kint's own start gives it: a start on demand leaves out the
        # starting call's call-scope settings (schema.CALL_SWITCHES: KINT_OFFLINE, ...).
        env = environment_for("daemon", os.environ, call_switches=not on_demand)
        proc = subprocess.Popen([sys.executable, str(SUPPORT / "run_supervisor.py"), "--home",
                                 str(home)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, close_fds=True, env=env)
        threading.Thread(target=proc.wait, daemon=True).start()  # reaped, as kint's is
        return proc

    autostart.spawn_daemon = spawn


if __name__ == "__main__":
    if os.environ.get("KINT_TEST_AUTOSTART_ENTITLED"):
        _autostart_entitled()
    if os.environ.get("KINT_TEST_KEEPALIVE_S"):
        session.KEEPALIVE_S = float(os.environ["KINT_TEST_KEEPALIVE_S"])
    if os.environ.get("KINT_TEST_ATTACH_RETRY_S"):
        session.RETRY_FIRST_S = float(os.environ["KINT_TEST_ATTACH_RETRY_S"])
    if os.environ.get("KINT_TEST_ATTACH_LOG"):
        _note_attaches(os.environ["KINT_TEST_ATTACH_LOG"])
    if os.environ.get("KINT_TEST_TOOL_WAIT_S"):
        tools.TOOL_WAIT_S = float(os.environ["KINT_TEST_TOOL_WAIT_S"])
    if os.environ.get("KINT_TEST_OLD_WORKER_GONE_S"):
        restore_wait.OLD_WORKER_GONE_S = float(os.environ["KINT_TEST_OLD_WORKER_GONE_S"])
    if os.environ.get("KINT_TEST_LOCK_PROBE_S"):
        sibyl_client.LOCK_PROBE_S = float(os.environ["KINT_TEST_LOCK_PROBE_S"])
    main()
