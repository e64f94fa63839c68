"""kint-server writes its log lines to stderr as well as to kint.log, as kint v0.3.0's does
(its docs, 10-configuration.md, "Logs"): an MCP client shows a server's stderr in its own
logs (Claude Code's MCP log, Codex's), where a user looks before they know of KINT_HOME.
Before, only kint.log had them, and stderr got a line only when the file could not take it.

A real kint-server under the `mcp` SDK's stdio client, its stderr into a file, beside a
real test supervisor over a real store (no chain: nothing here needs one)."""

from __future__ import annotations

from conftest import make_sandbox, write_store
from mcp_session import AgentProcess

SECRET = "a-local-passphrase-that-never-leaves-the-process"


def test_kint_servers_lines_and_warnings_reach_stderr_without_a_secret(tmp_path):
    sb = make_sandbox(tmp_path / "m", KINT_SESSION_PASSPHRASE=SECRET)
    try:
        sb.start_entitled()
        write_store(sb.sibyl_db, tenant=sb.tenant)
        err_path = tmp_path / "server.err"
        # A setting that does not parse: the server says so in a warning, and goes on.
        env = {**sb.env, "KINT_BOOTSTRAP_SECONDS": "soon"}
        with open(err_path, "w") as errlog:
            agent = AgentProcess(env, errlog=errlog).start()
            try:
                assert agent.call("memory_status")["ok"] is True
            finally:
                agent.close()
        err = err_path.read_text()
        assert "kint.server INFO kint-server: serving Sibyl's tools plus kint's" in err, err
        warned = [line for line in err.splitlines() if " WARNING " in line]
        assert any("KINT_BOOTSTRAP_SECONDS" in line for line in warned), err
        # The same lines as kint.log (each once: not echoed twice), and no secret.
        logged = (sb.kint_home / "kint.log").read_text().splitlines()
        assert logged and all(err.count(line) == 1 for line in logged), (logged, err)
        assert SECRET not in err and SECRET not in "\n".join(logged)
    finally:
        sb.shutdown()


def test_a_session_whose_store_moved_is_told_on_stderr(tmp_path):
    """The store a kint-server serves is moved, and the space moves with it (the next call
    names the new path: its worker restarts there and takes none of the old sessions). The
    server's keepalive is refused, saying where the space is now and to restart the
    session, on stderr, where the harness shows it. Before, it was told the store could not
    share the space and to set KINT_SPACE, and only in kint.log."""
    old_store = tmp_path / "m" / "stores" / "memory.db"
    sb = make_sandbox(tmp_path / "m", SIBYL_MEMORY_DB=str(old_store),
                      KINT_TEST_KEEPALIVE_S="1")
    try:
        sb.start_entitled()
        old_store.parent.mkdir(parents=True)
        write_store(old_store, tenant=sb.tenant)
        new_store = old_store.with_name("moved.db")
        err_path = tmp_path / "server.err"
        with open(err_path, "w") as errlog:
            agent = AgentProcess(sb.env, errlog=errlog).start()
            try:
                sb.wait_for(lambda: sb.row(old_store)["sessions"] == 1, timeout=30,
                            what="the session attached")
                old_store.rename(new_store)
                with sb.client() as client:  # the space (the tenant's) moves
                    client.call("status", tenant=sb.tenant, db=str(new_store),
                                space=sb.tenant, timeout_s=60)
                told = f"is served from the store {new_store}: {old_store} does not exist"
                sb.wait_for(lambda: told in err_path.read_text(), timeout=30,
                            what="the server's keepalive told where the space is")
            finally:
                agent.close()
        line = next(x for x in err_path.read_text().splitlines() if told in x)
        assert " WARNING keepalive:" in line and "restart the agent's session" in line, line
    finally:
        sb.shutdown()
