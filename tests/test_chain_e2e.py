"""Memory travels: push on machine A, pull on machine B, verify on both, against a real
anvil, real supervisors and workers, real Sibyl stores (seed 001)."""

from __future__ import annotations

import sqlite3

import pytest

from chain_machines import RULE_1, kjson, new_machine, ok, recovery_code
from conftest import make_sandbox, sibyl_client


@pytest.fixture(scope="module")
def chain_home(tmp_path_factory):
    sb = make_sandbox(tmp_path_factory.mktemp("chain"))
    ok(sb.kint("devchain", "start"))
    yield sb.kint_home
    sb.kint("devchain", "stop")


@pytest.fixture(scope="module")
def machines(tmp_path_factory, chain_home):
    a = new_machine(tmp_path_factory.mktemp("machine-a"), chain_home)
    b = new_machine(tmp_path_factory.mktemp("machine-b"), chain_home)
    yield a, b
    a.shutdown()
    b.shutdown()


def test_push_on_a_pull_on_b_verify_on_both(machines):
    a, b = machines
    client = sibyl_client(a.sibyl_db, a.tenant)
    client.set_entity("rules", "release-gate", {"rule": RULE_1})
    client.set_state("focus", {"now": "the release"})
    client.write_event(acted=["wrote the release rule"], ts="2026-01-01T00:00:00Z")
    connected = kjson(a, "connect", "--dev")
    space = connected["space"]
    pushed = kjson(a, "push")
    assert pushed["pushed"] == 3 and len(pushed["epochs"]) == 1
    assert kjson(a, "push")["message"] == ("nothing to push: the store matches the last "
                                           "anchored epoch")
    result = kjson(a, "verify", "release rule")
    assert result["decision"] == "proceed", result["reason"]
    assert result["chain_head"]["seq"] == 1 and result["head_unavailable"] is None

    code = recovery_code(a, space)
    kjson(b, "connect", "--recovery-code", code, "--owner", connected["owner"])
    pulled = kjson(b, "pull")
    assert pulled["applied"] == [1] and pulled["store_root_matches"] is True, pulled
    assert pulled["warnings"] == []
    rows_a = sqlite3.connect(a.sibyl_db).execute(
        "select category, name, status, body from entities order by name").fetchall()
    rows_b = sqlite3.connect(b.sibyl_db).execute(
        "select category, name, status, body from entities order by name").fetchall()
    assert rows_a == rows_b
    ev = "select ts, evaluated, acted, forward, extra from journal_events"
    assert sqlite3.connect(a.sibyl_db).execute(ev).fetchall() == \
        sqlite3.connect(b.sibyl_db).execute(ev).fetchall()
    result = kjson(b, "verify", "release rule")
    assert result["decision"] == "proceed", result["reason"]
