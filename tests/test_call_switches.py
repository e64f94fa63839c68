"""A command's one-off switch stays that command's (10-configuration.md: `KINT_OFFLINE=1`
stops `connect`, `rekey` and `recovery-code` from reading the head header; every v0.3.0
command reads its own environment).

Here a command's request carries its switches, and a supervisor started on demand took the
whole environment of the command that started it, for its life. So `KINT_OFFLINE=1 kint
connect`, the first command of a machine, left every later call of every space offline,
unsaid: v0.3.0's own way back from it (03-new-machine.md, the warning under "Connect
again": "connect again with the chain reachable, then run `kint recovery-code`") connected
from the fresh vault's local wraps again ("data key from local wraps"), and recovery-code
wrote that vault's code, not the real one's, for the user to copy off the machine. A
supervisor a command starts on demand now leaves out every call-scope setting it reads
(schema.CALL_SWITCHES: those three, KINT_RPC_TIMEOUT, KINT_VERIFY_HEAD_SECONDS and
KINT_NONCE_RETRY_SECONDS too, which the starting command's request carries as well);
`kint supervisor start` keeps them, the service's own setting.

Through the real CLI on the session's devchain: machine A anchors an epoch; machine B's
supervisor is started by B's first command (no test supervisor: the start on demand is
the subject), which is connect under KINT_OFFLINE=1.
"""

from __future__ import annotations

import json

import pytest

from chain_machines import (anchored, join_devchain, machine_behind_proxy, make_session_key,
                            new_machine, ok, owner_account, recovery_code, wallet_signature)
from conftest import make_sandbox, write_rules
from mcp_session import AgentProcess
from kint.custody.vault_message import canonical_payload
from kint.settings.schema import BY_NAME, CALL_SWITCHES, environment_for


def connect(sb, account, **env: str) -> dict:
    """`kint connect` as an EOA owner does it (the wallet's signature on stdin), with `env`
    on top of the machine's environment."""
    signature = wallet_signature(account, canonical_payload(account.address).decode())
    out = ok(sb.kint("connect", "--owner", account.address, "--signature", "-", "--json",
                     input=signature + "\n", env=env))
    return json.loads(out.stdout)


# Each call-scope setting the supervisor reads, with a value a command may give once.
ONE_OFF = {"KINT_OFFLINE": "1", "KINT_ALLOW_SINGLE_RPC": "1", "KINT_KEY_TTL": "session",
           "KINT_RPC_TIMEOUT": "30", "KINT_VERIFY_HEAD_SECONDS": "7",
           "KINT_NONCE_RETRY_SECONDS": "40"}


def test_the_switches_are_left_out_of_an_on_demand_start_only():
    env = {**ONE_OFF, "KINT_RPC_URL": "http://127.0.0.1:9", "KINT_OWNER_KEY": "0x" + "11" * 32,
           "HOME": "/h"}
    assert CALL_SWITCHES == {s.name for s in BY_NAME.values()
                             if s.scope == "call" and "daemon" in s.read_by} == set(ONE_OFF)
    for name in CALL_SWITCHES:  # each is the call's, and its request carries it
        assert BY_NAME[name].scope == "call" and BY_NAME[name].sent, name
    # A machine-scope setting stays the starter's (reported to a command that differs).
    assert environment_for("daemon", env, call_switches=False) == {
        "KINT_RPC_URL": "http://127.0.0.1:9", "HOME": "/h"}
    assert environment_for("daemon", env) == {
        **ONE_OFF, "KINT_RPC_URL": "http://127.0.0.1:9", "HOME": "/h"}


@pytest.fixture(scope="module")
def vault(tmp_path_factory, chain_home):
    with anchored(new_machine(tmp_path_factory.mktemp("switch-a"), chain_home),
                  rule="anchored on A") as a:
        status = json.loads(ok(a.kint("status", "--json")).stdout)
        yield a, owner_account(a, status["owner"]), status["space"]


def test_a_connect_under_kint_offline_leaves_the_next_one_reading_the_chain(
        vault, tmp_path, chain_home):
    a, account, space16 = vault
    b = make_sandbox(tmp_path / "b", KINT_TENANT=a.tenant)
    # No head budget of the suite's: the explicit start below must keep only what it is given.
    join_devchain(chain_home, b, head_s=None)
    make_session_key(b)
    try:
        # Its first command gives every one-off setting: none outlives it.
        fresh = connect(b, account, **{**ONE_OFF, "KINT_KEY_TTL": "24h"})
        assert fresh["source"] == "fresh vault" and fresh["space"] == space16, fresh
        again = connect(b, account)
        assert again["source"] == "chain head header", again
        ok(b.kint("recovery-code"))
        assert recovery_code(b, space16) == recovery_code(a, space16)
        started = json.loads(ok(b.kint("supervisor", "status", "--json")).stdout)
        assert started["supervisor"]["started_with"] == [], started["supervisor"]

        # KINT_KEY_TTL=session: that connect keeps the key in memory only; the next one,
        # given none, caches it on disk for the default 24 h, as v0.3.0's does.
        b.shutdown()
        cache = b.kint_home / f"vault-{space16}.aes"
        cache.unlink()
        connect(b, account, KINT_KEY_TTL="session")
        assert not cache.exists()
        connect(b, account)
        assert cache.exists()

        # An explicit start keeps what it was given: the service's own setting.
        b.shutdown()
        started = ok(b.kint("supervisor", "start", env={"KINT_OFFLINE": "1"}))
        assert started.stderr == "", started.stderr  # it started one, with the setting
        kept = json.loads(ok(b.kint("supervisor", "status", "--json")).stdout)
        assert kept["supervisor"]["started_with"] == [
            {"name": "KINT_OFFLINE", "value": "1"}], kept["supervisor"]
    finally:
        b.shutdown()


def test_a_session_key_stays_in_memory_through_plain_pulls_and_pushes(vault):
    """`KINT_KEY_TTL=session kint connect`, then a plain `kint pull` and `kint push`: each
    renews the key after it succeeds, and took the space's value for it (the supervisor's,
    which now lacks the connect's `session`), writing the key to disk (10-configuration.md:
    with `session` nothing touches the disk). A pull that itself sets KINT_KEY_TTL still
    caches the key as it asks. So does the watcher's push, for a kint-server whose
    environment sets none."""
    a, account, space16 = vault
    cache = a.kint_home / f"vault-{space16}.aes"
    connect(a, account, KINT_KEY_TTL="session")
    assert not cache.exists()
    ok(a.kint("pull"))
    assert not cache.exists(), "a plain pull wrote the session-only key to disk"
    write_rules(a.sibyl_db, a.tenant, kept="in memory only")
    pushed = json.loads(ok(a.kint("push", "--json")).stdout)
    assert pushed["pushed"] == 1, pushed
    assert not cache.exists(), "a plain push wrote the session-only key to disk"
    # The watcher's push, for a kint-server that sets no KINT_KEY_TTL, likewise.
    agent = AgentProcess({**a.env, "KINT_QUIET_SECONDS": "1", "KINT_POLL_SECONDS": "1"}).start()
    try:
        assert agent.call("memory_remember", category="notes", name="watched",
                          body={"text": "pushed by the watcher"})["ok"] is True
        a.wait_for(lambda: a.call("status", a.sibyl_db, args={"chain": True},
                                  timeout_s=30)["head"]["seq"] == pushed["head_seq"] + 1,
                   timeout=60, interval=0.5, what="the watcher's push")
    finally:
        agent.close()
    assert not cache.exists(), "the watcher's push wrote the session-only key to disk"
    ok(a.kint("pull", env={"KINT_KEY_TTL": "1h"}))
    assert cache.exists()


def test_a_kint_server_sessions_ttl_moves_a_memory_key_to_disk_at_its_watchers_push(vault):
    """The other way renew() is asked for a file: a kint-server whose own environment sets
    KINT_KEY_TTL (kept as the session's, settings.SESSION) has its watcher's push cache a
    memory-only key for that long, as v0.3.0's kint-server renews with its own. The
    session attaches first; the connect after it puts the key in memory."""
    a, account, space16 = vault
    cache = a.kint_home / f"vault-{space16}.aes"
    agent = AgentProcess({**a.env, "KINT_KEY_TTL": "1h", "KINT_QUIET_SECONDS": "1",
                          "KINT_POLL_SECONDS": "1"}).start()
    try:
        connect(a, account, KINT_KEY_TTL="session")
        assert not cache.exists()
        head = a.call("status", a.sibyl_db, args={"chain": True}, timeout_s=30)["head"]["seq"]
        assert agent.call("memory_remember", category="notes", name="watched-ttl",
                          body={"text": "pushed by a watcher with a TTL"})["ok"] is True
        a.wait_for(lambda: a.call("status", a.sibyl_db, args={"chain": True},
                                  timeout_s=30)["head"]["seq"] == head + 1,
                   timeout=60, interval=0.5, what="the watcher's push")
        a.wait_for(cache.exists, timeout=10, what="the key cached after the push")
    finally:
        agent.close()


def test_a_kint_server_sessions_rpc_timeout_bounds_its_watchers_push(tmp_path, chain_home):
    """A kint-server whose entry sets KINT_RPC_TIMEOUT starts the supervisor on demand,
    which takes none of its call-scope settings: the watcher's pushes, which no call
    carries, ran with the space's value (here config.toml's 0.5 s), unsaid, where v0.3.0's
    kint-server pushes with its own. The session's value is kept with it on attach, as its
    KINT_KEY_TTL is (sessions._watcher_push): an endpoint that takes 2 s to give the nonce
    no longer fails every automatic push. KINT_NONCE_RETRY_SECONDS goes the same way (one
    tuple, space_settings.PUSH_SETTINGS); a stuck nonce to show it is beyond this test."""
    with machine_behind_proxy(tmp_path, chain_home) as (sb, proxy):
        (sb.kint_home / "config.toml").write_text("rpc_timeout = 0.5\n")
        sb.shutdown()  # the kint-server's first call starts one, the way kint's start does
        proxy.set_mode("delay_methods", methods=["eth_getTransactionCount"], seconds=2)
        agent = AgentProcess({**sb.env, "KINT_RPC_TIMEOUT": "60", "KINT_QUIET_SECONDS": "1",
                              "KINT_POLL_SECONDS": "1",
                              "KINT_TEST_AUTOSTART_ENTITLED": "1"}).start()
        try:
            started = json.loads(ok(sb.kint("supervisor", "status", "--json")).stdout)
            assert "KINT_RPC_TIMEOUT" not in {
                e["name"] for e in started["supervisor"]["started_with"]}, started
            assert agent.call("memory_remember", category="notes", name="slow-nonce",
                              body={"text": "pushed by the watcher"})["ok"] is True
            done = sb.wait_for(
                lambda: ((s := agent.call("memory_status"))["watcher_failure"]
                         or (s["mirror"] or {}).get("seq")) and s,
                timeout=60, interval=0.5, what="the watcher's push, or its failure")
            assert done["watcher_failure"] is None, done["watcher_failure"]
            assert done["mirror"]["seq"] == 1, done["mirror"]
        finally:
            proxy.forward()
            agent.close()


def test_a_session_key_stays_in_memory_through_a_plain_rekey(vault):
    """A plain `kint rekey` after `KINT_KEY_TTL=session kint connect` cached the rotation's
    new key with the space's value (the supervisor's, lacking the connect's `session`): on
    disk for 24 h. It now takes the old key's place in memory, as renew() keeps it; the
    pull after reads with it. (Last in the module: the rotation changes the vault.)"""
    a, account, space16 = vault
    cache = a.kint_home / f"vault-{space16}.aes"
    connect(a, account, KINT_KEY_TTL="session")
    assert not cache.exists()
    ok(a.kint("pull"))
    signature = wallet_signature(account, canonical_payload(account.address).decode())
    rekeyed = json.loads(ok(a.kint("rekey", "--signature", "-", "--json",
                                   input=signature + "\n")).stdout)
    assert rekeyed["old_dek_id"] != rekeyed["new_dek_id"], rekeyed
    assert not cache.exists(), "a plain rekey wrote the session-only key to disk"
    ok(a.kint("pull"))
    assert not cache.exists()
