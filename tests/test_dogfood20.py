"""What a day of using kint as an agent does found (session 20's dogfood lane): kint-server
driven over MCP, several Hermes profiles on one supervisor, the supervisor stopped or
killed under a call, and the devchain as the chain. The cases that need a machine share
one on the session's devchain, connected with `--dev` and one row anchored.

- `kint supervisor status` and `reload` with no supervisor running refuse as every command
  refuses (`kint: error: ... [SUPERVISOR_UNAVAILABLE]` and a hint), where they printed a
  plain line without the code `--json` carries.
"""

from __future__ import annotations

import json

from conftest import make_sandbox


def test_supervisor_status_and_reload_with_none_running_refuse_with_the_code(tmp_path):
    sb = make_sandbox(tmp_path / "nothing-runs")
    for command, hint in ((("supervisor", "status"), "`kint supervisor start` starts one"),
                          (("--debug", "supervisor", "status"), "`kint supervisor start`"),
                          (("supervisor", "reload"), "the next one reads the config file")):
        out = sb.kint(*command)
        assert out.returncode == 3, (command, out.stderr)
        first, second = out.stderr.splitlines()
        assert first == (f"kint: error: no supervisor is running for {sb.kint_home} "
                         f"[SUPERVISOR_UNAVAILABLE]"), (command, out.stderr)
        assert second.startswith(f"hint: {hint}"), (command, out.stderr)
        as_json = sb.kint(*command, "--json")
        assert as_json.returncode == 3
        assert json.loads(as_json.stdout)["error"] == "SUPERVISOR_UNAVAILABLE"
