"""Memory travels: push on machine A, pull on machine B, verify on both, against a real
anvil, real supervisors and workers, real Sibyl stores (seed 001).

The tests of this module are one story on one chain and run in file order: the first
connects machine A and the others build on what it anchored."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing

import pytest

from chain_machines import RULE_1, kjson, new_machine, ok, recovery_code
from conftest import sibyl_client


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
    client.storage.close()
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
    rows_a = _query(a.sibyl_db, "select category, name, status, body from entities order by name")
    rows_b = _query(b.sibyl_db, "select category, name, status, body from entities order by name")
    assert rows_a == rows_b
    ev = "select ts, evaluated, acted, forward, extra from journal_events"
    assert _query(a.sibyl_db, ev) == _query(b.sibyl_db, ev)
    result = kjson(b, "verify", "release rule")
    assert result["decision"] == "proceed", result["reason"]


def _entity(sb, name):
    rows = _query(sb.sibyl_db, "select body from entities where name = ?", (name,))
    return rows[0][0] if rows else None


def _query(db, sql: str, args: tuple = ()) -> list[tuple]:
    """Read and close at once: a sqlite3 connection left to the garbage collector (3.11's
    statement cache makes a cycle) would hold the store open, and `pull --discard-local`
    rightly refuses to move a store another process holds."""
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(sql, args).fetchall()


def test_chain_moved_fork_and_discard_local(machines):
    """B pushes; A's push refuses CHAIN_MOVED and A's verify refuses 'chain moved ... pull
    first'; A pulls and proceeds. Unanchored changes on A plus a moved chain: pull refuses
    as a fork; --discard-local restores and keeps the backups."""
    a, b = machines
    ok(b.kint("pull"))
    cb = sibyl_client(b.sibyl_db, b.tenant)
    cb.set_entity("rules", "deploy-window", {"rule": "deploys only before 3pm"})
    pushed = kjson(b, "push")
    head = pushed["epochs"][-1]

    ca = sibyl_client(a.sibyl_db, a.tenant)
    ca.set_entity("rules", "local-only", {"rule": "written on A, never anchored"})
    out = a.kint("push")
    assert out.returncode == 2 and "[CHAIN_MOVED]" in out.stderr
    assert "nothing was dropped" in out.stderr
    moved = kjson(a, "verify", "release rule")
    assert moved["decision"] == "refuse"
    assert moved["reason"].startswith(f"chain moved to seq {head['seq']} at block "
                                      f"{head['block']}, pull first: this machine last saw seq")

    fork = a.kint("pull")
    assert fork.returncode == 2 and "[FORK]" in fork.stderr and "--discard-local" in fork.stderr
    assert _entity(a, "local-only") is not None  # nothing lost by the refusal

    # This process still holds A's store open (ca): the store is not moved under it.
    busy = a.kint("pull", "--discard-local")
    assert busy.returncode == 2 and "[BUSY]" in busy.stderr, busy.stdout + busy.stderr
    assert f"pid {os.getpid()} " in busy.stderr and "nothing was moved" in busy.stderr
    assert not list(a.sibyl_db.parent.glob("*.kint-backup-*"))
    ca.storage.close()
    cb.storage.close()
    restored = kjson(a, "pull", "--discard-local")
    assert restored["store_root_matches"] is True and len(restored["backups"]) >= 1
    assert _entity(a, "local-only") is None
    assert _entity(a, "deploy-window") == '{"rule":"deploys only before 3pm"}'
    backup = [p for p in restored["backups"] if p.endswith(tuple("0123456789Z"))][0]
    kept = _query(backup, "select body from entities where name = 'local-only'")
    assert kept == [('{"rule":"written on A, never anchored"}',)]
    assert ".kint-backup-" in backup
    assert kjson(a, "verify", "release rule")["decision"] == "proceed"


def test_snapshot_then_diffs_and_full_backfill(machines, tmp_path_factory, chain_home):
    """A snapshot epoch, then diff epochs: a new machine's pull stops at the snapshot;
    history starts there; --full caches every epoch before it for history."""
    a, b = machines
    ok(a.kint("pull"))
    ca = sibyl_client(a.sibyl_db, a.tenant)
    compact = kjson(a, "compact")
    snap_seq = compact["epochs"][0]["seq"]
    ca.set_entity("rules", "release-gate", {"rule": "v-after-snapshot"})
    kjson(a, "push")
    space = kjson(a, "status")["space"]

    c = new_machine(tmp_path_factory.mktemp("machine-c"), chain_home)
    try:
        owner = json_owner(a, space)
        kjson(c, "connect", "--recovery-code", recovery_code(a, space), "--owner", owner)
        pulled = kjson(c, "pull")
        assert pulled["applied"][0] == snap_seq and pulled["store_root_matches"] is True
        lines = ok(c.kint("history", "entity", "release-gate", "--category", "rules")).stdout
        seqs = [int(line.split()[1]) for line in lines.splitlines()]
        assert seqs[0] == snap_seq and min(seqs) == snap_seq
        full = kjson(c, "pull", "--full")
        assert full["store_root_matches"] is True
        lines = ok(c.kint("history", "entity", "release-gate", "--category", "rules")).stdout
        seqs = [int(line.split()[1]) for line in lines.splitlines()]
        assert seqs[0] == 1, lines  # the version anchored before the snapshot is back
        assert snap_seq not in seqs  # the snapshot carried it unchanged: no invented version
        assert kjson(c, "verify", "release rule")["decision"] == "proceed"
    finally:
        c.shutdown()


def json_owner(sb, space16):
    import json as _json

    return _json.loads((sb.kint_home / f"enrol-{space16}.json").read_text())["owner"]


def test_a_wrong_recovery_code_changes_nothing(machines, tmp_path_factory, chain_home):
    a, _ = machines
    space = kjson(a, "status")["space"]
    d = new_machine(tmp_path_factory.mktemp("machine-d"), chain_home)
    try:
        out = d.kint("connect", "--recovery-code", "AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA",
                     "--owner", json_owner(a, space))
        assert out.returncode == 2
        assert "the recovery code does not open this space's key wraps" in out.stderr
        assert "AAAA" not in out.stderr
        assert not (d.kint_home / f"enrol-{space}.json").exists()
        assert not (d.kint_home / f"vault-{space}.aes").exists()
        push = d.kint("push")
        assert push.returncode == 2 and "[NOT_CONNECTED]" in push.stderr
    finally:
        d.shutdown()


def test_status_shows_head_in_step_and_the_cap(machines):
    a, _ = machines
    ok(a.kint("pull"))
    status = kjson(a, "status")
    assert status["connected"] is True and status["in_step"] is True
    assert status["head"]["seq"] == status["chain_head"]["seq"] >= 1
    cap = status["cap"]
    assert cap["volunteered_total"] == cap["sibyl_bytes"] + cap["kint_bytes"]
    assert cap["kint_bytes"] > 0 and cap["cap_bytes"] == 5_242_880
    assert cap["db_path"] == str(a.sibyl_db)
    text = ok(a.kint("status")).stdout
    assert "; in step" in text and "cap:     Sibyl's stores" in text
    sibyl_client(a.sibyl_db, a.tenant).set_entity("rules", "fresh", {"rule": "x"})
    assert kjson(a, "status")["unanchored"] == 1


def test_rekey_leaves_a_gap_where_the_new_key_is_not_held(machines):
    """After A's rekey, B (which holds only the old key) cannot open the new epochs: its pull
    stops at the gap, verify refuses naming it, push refuses; with the new recovery code B
    takes the new key and the next pull applies them."""
    a, b = machines
    ok(a.kint("pull"))
    ok(b.kint("pull"))
    space = kjson(a, "status")["space"]
    rekeyed = kjson(a, "rekey")
    snap = rekeyed["snapshot"][0]["seq"]
    sibyl_client(a.sibyl_db, a.tenant).set_entity("rules", "after-rekey", {"rule": "new key"})
    kjson(a, "push")
    assert kjson(a, "verify", "release rule")["decision"] == "proceed"

    gap = kjson(b, "pull")
    assert gap["gap"] == [snap, snap + 1] and gap["applied"] == []
    assert "could not be applied" in gap["message"]
    refused = kjson(b, "verify", "release rule")
    assert refused["reason"] == (
        f"this machine's picture of the memory is not the one the chain vouches for: epochs "
        f"{snap}, {snap + 1} could not be applied on the last pull; pull again")
    assert "[GAP]" in b.kint("push").stderr

    adopted = kjson(b, "connect", "--recovery-code", recovery_code(a, space), "--owner",
                    json_owner(a, space))
    assert adopted["adopted_key"] is True
    pulled = kjson(b, "pull")
    assert pulled["applied"] == [snap, snap + 1] and pulled["gap"] == []
    assert pulled["store_root_matches"] is True
    assert kjson(b, "verify", "release rule")["decision"] == "proceed"
    assert _entity(b, "after-rekey") == '{"rule":"new key"}'


def test_an_expired_vault_refuses_push_and_pull_and_drops_nothing(machines):
    a, _ = machines
    ok(a.kint("pull"))
    space = kjson(a, "status")["space"]
    sibyl_client(a.sibyl_db, a.tenant).set_entity("rules", "pending-change", {"rule": "kept"})
    vault = a.kint_home / f"vault-{space}.aes"
    saved = vault.read_bytes()
    # An expired vault, sealed by kint's own code with a clock a year back.
    import time as _time

    from kint.tenant_worker import keys

    secret = keys.machine_secret(a.kint_home)  # local.secret: the tests have no keyring
    assert secret.source == "local.secret"
    key = keys.open_vault(a.kint_home, _space_id(a, space), secret.secret)
    keys.write_vault(a.kint_home, _space_id(a, space), key, secret.secret,
                     now=_time.time() - 366 * 86400)
    try:
        for op in ("push", "pull"):
            out = a.kint(op)
            assert out.returncode == 2 and "[NO_DATA_KEY]" in out.stderr, out.stderr
            assert "nothing was dropped, the changes stay in the store until the next push" \
                in out.stderr
        assert _entity(a, "pending-change") == '{"rule":"kept"}'
    finally:
        vault.write_bytes(saved)
    assert kjson(a, "push")["pushed"] >= 1


def _space_id(sb, space16):
    import json as _json

    return _json.loads((sb.kint_home / f"enrol-{space16}.json").read_text())["space"]


def test_session_key_rotate_moves_the_space_to_the_new_key(machines):
    a, _ = machines
    ok(a.kint("pull"))
    space = kjson(a, "status")["space"]
    enrol = a.kint_home / f"enrol-{space}.json"
    import json as _json

    before = _json.loads(enrol.read_text())
    out = ok(a.kint("session-key", "rotate"))
    assert "session key rotated" in out.stdout
    assert (a.kint_home / "session.key.old").exists()
    after = _json.loads(enrol.read_text())
    assert after["session_address"] != before["session_address"]
    assert after["writer"] != before["writer"]
    sibyl_client(a.sibyl_db, a.tenant).set_entity("rules", "after-rotate", {"rule": "new key"})
    pushed = kjson(a, "push")
    assert pushed["pushed"] == 1
    assert kjson(a, "verify", "release rule")["decision"] == "proceed"
