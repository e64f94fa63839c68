"""Sibyl's eight tools write through the one client kint builds, for the whole session
(v0.3.0's judge claim "their tools use the one client kint builds, cap volunteered").

Sibyl's server rebuilds its cached client when credentials.json changes (`sibyl upgrade`)
or entitlement.json's token does (`sibyl init`), on the next tool call. A client Sibyl
builds itself counts only Sibyl's stores against the cap and notes no write to kint's
worker: kint-server must put its own back before such a call runs.
"""

from __future__ import annotations

import json
import os
import time

from chain_machines import new_machine, ok
from mcp_session import AgentProcess


def test_a_credentials_change_mid_session_keeps_kints_client(tmp_path, chain_home):
    sb = new_machine(tmp_path / "machine", chain_home)
    try:
        ok(sb.kint("connect", "--dev"))
        agent = AgentProcess(sb.env).start()
        filler = sb.kint_home / "filler.bin"
        try:
            cap = agent.call("memory_status")["cap"]
            filler.write_bytes(b"\0" * (cap["cap_bytes"] + 1))
            filler.chmod(0o600)
            # `sibyl upgrade` rewrites credentials.json: its mtime moves.
            creds = sb.home / ".sibyl-memory" / "credentials.json"
            assert creds.exists(), sorted(p.name for p in creds.parent.iterdir())
            later = time.time() + 5
            os.utime(creds, (later, later))
            over = agent.call("memory_remember", category="notes", name="over-the-cap",
                              body={"text": "kint's bytes count against the cap"})
            assert over.get("ok") is not True, over
            assert "CAP_EXCEEDED" in json.dumps(over), over
            log = (sb.kint_home / "kint.log").read_text()
            assert log.count("Sibyl's credentials or entitlement changed; rebuilding the "
                             "client with them") == 1, log
            # The next call finds kint's client in place: nothing rebuilds it again.
            assert agent.call("memory_list", category="notes")["ok"] is True
            assert (sb.kint_home / "kint.log").read_text().count("rebuilding the client") == 1
        finally:
            filler.unlink(missing_ok=True)
            agent.close()
    finally:
        sb.shutdown()
