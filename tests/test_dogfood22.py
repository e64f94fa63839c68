"""What session 22's dogfood lane found, beside the restore's edges (test_mcp_restore.py).

- A worker checks on its supervisor by pid at every beat; a supervisor killed under a
  parent that never reaps it stays a zombie, which `os.kill(pid, 0)` still finds, so the
  worker went on serving (a restore it was running included) with no supervisor to answer
  for it. kint.envsettings.pid_alive now counts a zombie as gone.
- The worker's beat, and so `kint supervisor status` and a TIMEOUT's "running ..." line,
  named only the oldest op in flight: a verify waiting behind a restore was invisible.
  The beat names them all (up to 8), oldest first; `--json` has `ops` and `ops_running`,
  the table `+N`, a TIMEOUT the others too.
- `kint verify ''` searched for nothing and answered REFUSE, exit 1, where memory_verify
  refuses an empty query as bad input: the op's `query` is now refused empty or blank
  (BAD_REQUEST, exit 2) wherever it comes from.
- A cold-start pull refused because its second endpoint was out of reach left the space's
  own endpoint counted as down: for 30 s `kint status` and verify said the chain head was
  unavailable ("rpc unresponsive") though the primary answered. The tracker keeps the
  second opinion's failures apart from the primary's (tests/test_rpc_endpoints_apart.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from chain_machines import (connect_with_code, join_devchain, kjson, make_session_key, ok,
                            recovery_code)
from conftest import make_sandbox, sibyl_client, write_store
from machines_together import running_together
from rpc_proxy import RpcProxy
from kint.chain.config import BASE_CHAIN_ID, devchain_record
from kint.client import KintError
from kint.envsettings import pid_alive
from kint.protocol import ProtocolError
from kint.protocol.ops import OPS


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_zombie_is_not_alive():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        # Exited and not reaped: poll() is not called, and waitid with WNOWAIT leaves it.
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        assert os.path.exists(f"/proc/{child.pid}")  # still in the table, as a zombie
        assert pid_alive(child.pid) is False
    finally:
        child.wait()
    assert pid_alive(child.pid) is False
    assert pid_alive(os.getpid()) is True


def test_without_a_proc_a_live_pid_is_alive(monkeypatch):
    """macOS has no /proc: a pid that os.kill finds is alive there, not gone because
    /proc/<pid> is missing (every worker would have left its supervisor at its first beat).
    The flag is what such a system sets at import; set here, as this box has a /proc."""
    import kint.envsettings as envsettings

    monkeypatch.setattr(envsettings, "_HAVE_PROC", False)
    monkeypatch.setattr(envsettings.os, "kill", lambda pid, sig: None)
    real_open = open

    def no_proc(path, *args, **kwargs):
        if str(path).startswith("/proc/"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", no_proc)
    assert envsettings.pid_alive(os.getpid()) is True


@pytest.fixture(scope="module")
def machines(tmp_path_factory, chain_home):
    """The module's three machines, their test supervisors started side by side
    (machines_together.py), each untouched until its test, which stops it: "held", with no
    chain, whose attaches wait on the hold file its test touches (KINT_TEST_HOLD_ATTACH, at
    `hold-attach` in its root); "source" and "fresh" on the session's devchain, their
    session keys made as `new_machine` makes them."""
    held_root = tmp_path_factory.mktemp("held")
    made = {"held": make_sandbox(held_root / "machine",
                                 KINT_TEST_HOLD_ATTACH=str(held_root / "hold-attach"))}
    for name in ("source", "fresh"):
        made[name] = make_sandbox(tmp_path_factory.mktemp(name))
        join_devchain(chain_home, made[name])
        make_session_key(made[name])
    with running_together(made):
        yield made


def test_every_op_in_flight_is_named(machines):
    """Three attaches held on the worker's pool (KINT_TEST_HOLD_ATTACH) are three ops in
    flight: status names each, oldest first, and a request timed out behind them names
    them too."""
    sb = machines["held"]
    hold = Path(sb.env["KINT_TEST_HOLD_ATTACH"])
    try:
        write_store(sb.sibyl_db, tenant=sb.tenant)
        sb.call("status", sb.sibyl_db, timeout_s=60)
        hold.touch()
        held = []
        for n in range(3):
            def attach(session: str = f"agent-{n}") -> None:
                try:
                    sb.call("attach", sb.sibyl_db, timeout_s=60,
                            args={"session": session, "watcher": False})
                except KintError:
                    pass
            held.append(threading.Thread(target=attach, daemon=True))
            held[-1].start()
            sb.wait_for(lambda n=n: (sb.row(sb.sibyl_db).get("ops_running") or 0) > n,
                        what=f"attach {n} in flight")
        row = sb.row(sb.sibyl_db)
        assert row["ops_running"] == 3, row
        assert [op["name"] for op in row["ops"]] == ["attach"] * 3, row
        ages = [op["age_s"] for op in row["ops"]]
        assert ages == sorted(ages, reverse=True), row  # oldest first
        assert row["op"]["name"] == "attach", row  # the oldest, as before
        table = sb.kint("supervisor", "status")
        assert "attach" in table.stdout and " +2" in table.stdout, table.stdout
        shown = json.loads(sb.kint("supervisor", "status", "--json").stdout)
        assert [r["ops_running"] for r in shown["spaces"]] == [3], shown
        # A fourth, held too until its bound: its TIMEOUT says what the worker runs, all
        # of it. A bound of 4 s: the request's own ends a second before the client's
        # (kint.client_bound's grace, a quarter of a short bound), time enough for the
        # supervisor's TIMEOUT to come back on a loaded box (2 s's half second was missed
        # once by test_open_files' like request).
        with pytest.raises(KintError) as timed_out:
            sb.call("attach", sb.sibyl_db, timeout_s=4,
                    args={"session": "agent-late", "watcher": False})
        assert timed_out.value.code == "TIMEOUT", timed_out.value
        assert "(and attach for " in timed_out.value.message, timed_out.value.message
    finally:
        if hold.exists():
            hold.unlink()
        sb.shutdown()


@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
def test_an_empty_query_is_bad_input(query):
    with pytest.raises(ProtocolError) as refused:
        OPS["verify"].validate_args({"query": query}, None)
    assert refused.value.code.value == "BAD_REQUEST"
    assert refused.value.message == "verify: argument 'query' is empty"
    OPS["verify"].validate_args({"query": "release rule"}, None)


def test_a_second_opinion_out_of_reach_leaves_the_primary_read(machines, chain_home):
    source, fresh = machines["source"], machines["fresh"]
    try:
        connected = kjson(source, "connect", "--dev")
        sibyl_client(source.sibyl_db, source.tenant).set_entity("rules", "release-gate",
                                                                {"rule": "never on Friday"})
        ok(source.kint("push"))
        record = json.loads(devchain_record(chain_home).read_text())
        with RpcProxy(record["rpc_url"]) as proxy:
            # Off the devchain's own endpoint the space is configured as on Base: a cold
            # start asks a second endpoint, here one nothing listens on.
            (fresh.kint_home / "config.toml").write_text(
                f'rpc_url = "{proxy.url}"\nrpc_url_2 = "http://127.0.0.1:1"\n'
                f'contract = "{record["anchor"]}"\n')
            with proxy.answering_as(BASE_CHAIN_ID):  # connect refuses another chain's
                connect_with_code(fresh, connected["owner"],
                                  recovery_code(source, connected["space"]))
            refused = fresh.kint("pull")
            assert refused.returncode == 6, refused.stdout + refused.stderr
            assert "could not get a second opinion" in refused.stderr, refused.stderr
            status = kjson(fresh, "status")
        # Before: null, and "rpc unresponsive", for 30 s after the refusal.
        assert status["chain_head_unavailable"] is None, status["chain_head_unavailable"]
        assert status["chain_head"]["seq"] == 1, status
    finally:
        fresh.shutdown()
        source.shutdown()


def test_a_pid_of_another_user_is_not_alive(monkeypatch):
    """os.kill refused with EPERM: the pid is another user's now (ours exited and the pid
    was taken again), so the supervisor, worker or nonce holder asked about is gone. It
    counted as alive (a worker kept serving for a supervisor long dead, a nonce held by a
    dead holder stayed held)."""
    import kint.envsettings as envsettings

    def refused(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(envsettings.os, "kill", refused)
    assert envsettings.pid_alive(os.getpid()) is False

