"""The test suite's kint-server launcher: `python run_kint_server.py`.

It installs the test account gate in this process (kint_test_gate: Sibyl's real gate
trusting the test's throwaway key, and Sibyl's network guard), then runs kint's own
`kint.mcp_server.main`, the same code as the `kint-server` command.

`KINT_TEST_KEEPALIVE_S` (set only by tests) shortens the interval of the session's
keepalive attach (kint.agent_server.session.KEEPALIVE_S, 60 s), so that a test sees what an
older session is told at its next attach without waiting a minute for it, and
`KINT_TEST_TOOL_WAIT_S` the longest a kint tool waits for the worker
(kint.agent_server.tools.TOOL_WAIT_S, 100 s), so that a test meets that bound without
waiting it out. kint reads none of this.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kint_test_gate  # noqa: E402,F401  (installs the gate and the guard)
from kint.agent_server import session, tools  # noqa: E402
from kint.mcp_server import main  # noqa: E402

if __name__ == "__main__":
    if os.environ.get("KINT_TEST_KEEPALIVE_S"):
        session.KEEPALIVE_S = float(os.environ["KINT_TEST_KEEPALIVE_S"])
    if os.environ.get("KINT_TEST_TOOL_WAIT_S"):
        tools.TOOL_WAIT_S = float(os.environ["KINT_TEST_TOOL_WAIT_S"])
    main()
