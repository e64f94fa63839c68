"""kint under Hermes: Sibyl's own Hermes adapter (through kint's plugin) on three profiles
gives three spaces and three workers, and Hermes' own writes are noted, so they never hold
a server-side push, while an edit behind Sibyl's back does. A profile whose first attach
failed attaches once its worker is back."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sqlite3
from pathlib import Path

import pytest
from sibyl_memory_client import testing as sibyl_testing

from chain_machines import kjson, ok
from conftest import let_go_on, wait_until
from machines_together import new_machines

from kint.client import Client, KintError
from kint.spaces import resolve

PROFILES = ("alpha", "beta", "gamma")


@pytest.fixture(scope="module")
def machines(tmp_path_factory, chain_home):
    """The file's two machines on the devchain, started together (their supervisors'
    starts overlap): one for the first and last tests (the last plays a profile, delta,
    the first never touched), and the late-attach test's, left untouched until it runs,
    with that test's heartbeat timeout."""
    started = new_machines([tmp_path_factory.mktemp("hermes"),
                            tmp_path_factory.mktemp("hermes-late")], chain_home,
                           envs=[{}, {"KINT_WORKER_HEARTBEAT_TIMEOUT": str(HUNG_AFTER_S)}])
    try:
        yield started
    finally:
        for sb in started:
            sb.shutdown()
        _leave_home_bare()


@pytest.fixture
def machine(machines):
    return machines[0]


def test_three_profiles_three_workers_and_hermes_writes_never_hold(machine, monkeypatch):
    from kint.hermes_plugin import KintSibylAdapter

    sb = machine
    _play_hermes(sb, monkeypatch)
    adapters = []
    try:
        for profile in PROFILES:
            adapter = KintSibylAdapter()
            # What hermes-agent passes under `hermes -p <profile>`: HERMES_HOME is the
            # profile's folder (tests/test_hermes_agent.py runs Hermes' own loader).
            adapter.initialize(f"session-{profile}",
                               hermes_home=str(sb.hermes_home / "profiles" / profile),
                               agent_identity=profile)
            adapters.append(adapter)
            adapter._sibyl.remember("rules", f"{profile}-rule", {"rule": f"{profile} v1"})
        status = json.loads(ok(sb.kint("supervisor", "status", "--json")).stdout)
        labels = {r["label"]: r for r in status["spaces"]}
        assert set(labels) == {f"{sb.tenant}@hermes:{p}" for p in PROFILES}
        assert len({r["pid"] for r in labels.values()}) == 3
        assert {r["store"] for r in labels.values()} == {str(sb.profile_db(p)) for p in PROFILES}

        alpha = sb.profile_db("alpha")
        ok(sb.kint("--db", str(alpha), "connect", "--dev"))
        ok(sb.kint("--db", str(alpha), "push"))
        # Hermes writes again, through its provider: noted, so a server-side push anchors.
        # The push goes on the session's own socket, after the write's note (a cast): the
        # worker takes a session's messages in order. One sent on another connection could
        # pass the note on its way and be held for it (seen once under load).
        adapters[0]._sibyl.remember("rules", "alpha-rule", {"rule": "alpha v2"})
        session = adapters[0]._kint
        pushed = session.call("push", {"hold_reason": "tool"}, timeout_s=120)
        assert pushed["pushed"] == 1
        # The same kind of change made behind Sibyl's back holds.
        conn = sqlite3.connect(alpha)
        conn.execute("update entities set body = replace(body, 'v2', 'v3') "
                     "where name = 'alpha-rule'")
        conn.commit()
        conn.close()
        with pytest.raises(KintError) as held:
            session.call("push", {"hold_reason": "tool"}, timeout_s=120)
        assert held.value.code == "HELD" and "entity rules/alpha-rule" in held.value.message
        assert kjson(sb, "--db", str(alpha), "verify", "alpha rule")["decision"] == "refuse"
        # The other two profiles' workers kept serving their own stores.
        for profile in ("beta", "gamma"):
            assert kjson(sb, "--db", str(sb.profile_db(profile)), "status")["rows"]["entity"] == 1
    finally:
        wrote = sum(1 for a in adapters if a._kint is not None and a._kint.wrote)
        for adapter in adapters:
            adapter.shutdown()
        # Each session that wrote asks its worker for an exit push as it closes: the test
        # ends once the workers have run them (each logs one line, made or not).
        sb.wait_for(lambda: len(_exit_pushed(sb)) >= wrote, timeout=60,
                    what=f"{wrote} exit pushes")


def _play_hermes(sb, monkeypatch) -> None:
    """This process plays Hermes: Sibyl's real account gate, trusting the sandbox's signer."""
    sibyl_testing.patch_trusted_keys(monkeypatch, sb.signer)
    sibyl_testing.install_entitled_home(Path.home(), sb.signer)
    monkeypatch.setenv("HERMES_HOME", str(sb.hermes_home))
    monkeypatch.setenv("KINT_HOME", str(sb.kint_home))


def _leave_home_bare() -> None:
    for name in ("credentials.json", "entitlement.json"):
        (Path.home() / ".sibyl-memory" / name).unlink(missing_ok=True)


# The heartbeat timeout of the late-attach test below (KINT_WORKER_HEARTBEAT_TIMEOUT, a
# user's setting): the provider's first attach waits it out, so it is short, as in
# test_mcp_faults.py and test_supervisor_faults.py; its idle worker beats every second (a
# quarter of it, held to 1 to 3 s), so a beat late by two seconds on a loaded box is not
# taken for a hang.
HUNG_AFTER_S = 3


def test_a_profile_whose_first_attach_failed_attaches_once_its_worker_is_back(
        machines, monkeypatch, caplog):
    """The profile's worker is stopped for real (SIGSTOP) as Hermes starts the provider: the
    attach answers WORKER_DOWN once the supervisor judges the worker hung (HUNG_AFTER_S), and the
    session's keepalive attaches to the worker that replaces it, soon after (it tries again
    at 2 s doubling, 0.5 s here, well under its 60 s keepalive). Before, the keepalive
    started only after a first attach that went through: the profile's session never
    counted and no watcher ran for it while Hermes ran."""
    from kint.hermes_plugin import KintSibylAdapter

    from kint.agent_server import session as session_module

    caplog.set_level(logging.INFO, logger="kint")
    # The keepalive's first retry after the failed start (2 s for a user, doubling): half a
    # second here, so it reaches the worker's replacement as that starts.
    monkeypatch.setattr(session_module, "RETRY_FIRST_S", 0.5)
    sb = machines[1]
    _play_hermes(sb, monkeypatch)
    profile = {"hermes_home": str(sb.hermes_home / "profiles" / "alpha"),
               "agent_identity": "alpha"}
    ref = resolve(None, sb.profile_db("alpha"))
    adapter = worker = None
    try:
        first = KintSibylAdapter()  # makes the profile's store, and its worker
        first.initialize("session-first", **profile)
        first.shutdown()
        status = json.loads(ok(sb.kint("supervisor", "status", "--json")).stdout)
        worker = next(r["pid"] for r in status["spaces"] if r["label"] == ref.label)
        os.kill(worker, signal.SIGSTOP)
        adapter = KintSibylAdapter()
        adapter.initialize("session-late", **profile)
        assert "kint: could not attach to space" in caplog.text, caplog.text
        # The session counts in the worker as its attach returns; the keepalive logs that
        # it attached just after: both waited for, then the line said once.
        assert wait_until(lambda: _sessions(sb, ref) == 1
                          and "attached to the space's worker after" in caplog.text,
                          timeout=40, interval=0.5), caplog.text
        assert caplog.text.count("attached to the space's worker after") == 1, caplog.text
    finally:
        if adapter is not None:
            adapter.shutdown()
        let_go_on(worker)
        sb.shutdown()
        _leave_home_bare()


def test_a_provider_initialized_twice_lets_its_first_session_go(machine, monkeypatch):
    """initialize() called again without shutdown(): the first session says goodbye and its
    keepalive stops. Before, it stayed attached for Hermes' whole life, so the worker
    counted two sessions (and ran the watcher for one that no provider used)."""
    from kint.hermes_plugin import KintSibylAdapter

    sb = machine
    _play_hermes(sb, monkeypatch)
    profile = {"hermes_home": str(sb.hermes_home / "profiles" / "delta"),
               "agent_identity": "delta"}
    ref = resolve(None, sb.profile_db("delta"))
    adapter = KintSibylAdapter()
    try:
        adapter.initialize("session-one", **profile)
        first = adapter._kint
        assert _sessions(sb, ref) == 1
        adapter.initialize("session-two", **profile)
        assert adapter._kint is not first
        first._keepalive.join(30)
        assert not first._keepalive.is_alive()
        assert wait_until(lambda: _sessions(sb, ref) == 1, timeout=30, interval=0.5)
    finally:
        adapter.shutdown()


def _sessions(sb, ref) -> int:
    """How many sessions the space's worker counts (a detach of an id never attached
    changes nothing and answers the count)."""
    with Client(sb.kint_home, autostart=False) as client:
        return client.call("detach", tenant=ref.tenant, db=ref.db, space=ref.label,
                           args={"session": "probe"}, timeout_s=30)["sessions"]


def _exit_pushed(sb) -> set[str]:
    """The spaces whose worker logged an exit push's end, made or not made (not one that
    still waits for its turn: "exit push waits for ...")."""
    log = sb.kint_home / "supervisor.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    return set(re.findall(r"space (\w+): exit push(?::| not made)", text))
