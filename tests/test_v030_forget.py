"""A forgotten entity on another machine, end to end on the session's devchain.

kint v0.3.0 (15-sibyl.md, "What it does not cover", the archive) says what a restore makes of
Sibyl's forget: `memory_forget` moves the entity from `entities` into `archived_entities`,
kint sees it leave `entities` and anchors its deletion, and a restore replays that deletion
as a plain delete, so the restored machine has the entity gone and holds no archive row for
it. A value overwritten later (a superseded belief) comes back as its newest anchored value.

Machine A's agent forgets and supersedes through kint-server's tools (Sibyl's own
`memory_forget` and `memory_remember`, on the client kint wraps); machine B restores from
scratch with the recovery code. One machine pair, shared by the module."""

from __future__ import annotations

import sqlite3

import pytest

from chain_machines import connect_with_code, kjson, new_machine, ok, recovery_code
from conftest import sibyl_client
from kint.rows.export import connect_ro, export_rows
from mcp_session import AgentProcess

OLD_BELIEF = "the staging database is rebuilt every night at two"
RELEASE_RULE = "ship on Tuesdays after the deadlift check"
NEWER_RELEASE_RULE = "ship on Wednesdays after the deadlift check and a second reviewer"


@pytest.fixture(scope="module")
def pair(tmp_path_factory, chain_home):
    a = new_machine(tmp_path_factory.mktemp("forget-a"), chain_home,
                    KINT_QUIET_SECONDS="3600")
    b = new_machine(tmp_path_factory.mktemp("forget-b"), chain_home)
    yield a, b
    a.shutdown()
    b.shutdown()


def _leaves(db, tenant: str) -> dict[str, str]:
    conn = connect_ro(str(db))
    try:
        return {r.canonical_id: r.leaf.hex() for r in export_rows(conn, tenant)}
    finally:
        conn.close()


def _archived(db, tenant: str) -> list[tuple[str, str, str | None]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("select category, name, archive_reason from archived_entities "
                            "where tenant_id = ? order by name", (tenant,)).fetchall()
    finally:
        conn.close()


def test_a_forgotten_entity_restores_as_gone_with_no_archive_row(pair):
    a, b = pair
    client = sibyl_client(a.sibyl_db, a.tenant)
    try:
        client.set_entity("facts", "staging-rebuild", {"fact": OLD_BELIEF})
        client.set_entity("rules", "release-day", {"rule": RELEASE_RULE})
        client.set_entity("rules", "kept", {"rule": "keep the changelog current"})
    finally:
        client.storage.close()
    connected = kjson(a, "connect", "--dev")
    (first,) = kjson(a, "push")["epochs"]
    assert (first["rows"], first["deleted"]) == (3, 0), first

    agent = AgentProcess(a.env).start()
    try:
        forgot = agent.call("memory_forget", category="facts", name="staging-rebuild",
                            reason="the nightly rebuild was retired")
        assert forgot["ok"] is True, forgot
        assert agent.call("memory_remember", category="rules", name="release-day",
                          body={"rule": NEWER_RELEASE_RULE})["ok"] is True
        pushed = agent.call("memory_push")
    finally:
        agent.close()
    assert pushed["ok"] is True, pushed
    (second,) = pushed["epochs"]
    # The forget is anchored as a deletion, the supersede as one changed row; the wrapped
    # client noted both as the tools' own writes, so nothing held the push.
    assert (second["rows"], second["deleted"]) == (1, 1), second
    assert _archived(a.sibyl_db, a.tenant) == [
        ("facts", "staging-rebuild", "the nightly rebuild was retired")]

    connect_with_code(b, connected["owner"], recovery_code(a, connected["space"]))
    pulled = kjson(b, "pull")
    assert pulled["applied"] == [first["seq"], second["seq"]], pulled
    assert pulled["warnings"] == [] and pulled["store_root_matches"] is True, pulled

    restored = _leaves(b.sibyl_db, b.tenant)
    assert restored == _leaves(a.sibyl_db, a.tenant)
    assert "entity\x00facts\x00staging-rebuild" not in restored
    assert sorted(restored) == ["entity\x00rules\x00kept", "entity\x00rules\x00release-day"]
    # The archive is not carried: B replayed the forget as a plain delete.
    assert _archived(b.sibyl_db, b.tenant) == []
    client = sibyl_client(b.sibyl_db, b.tenant)
    try:
        assert [e["name"] for e in client.list_entities(category="facts")] == []
        assert client.get_entity("rules", "release-day")["body"] == {
            "rule": NEWER_RELEASE_RULE}
    finally:
        client.storage.close()
    # B's history, read from the epochs its restore decrypted, still shows what was
    # forgotten and what was superseded (09-cli.md, "kint history": a deleted row prints
    # `epoch N block <= B: DELETED`).
    forgotten = ok(b.kint("history", "entity", "staging-rebuild", "--category", "facts"))
    lines = forgotten.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith(
        f"epoch {first['seq']} block <= {first['block']} leaf "), lines
    assert OLD_BELIEF in lines[0], lines
    assert lines[1] == f"epoch {second['seq']} block <= {second['block']}: DELETED", lines
    superseded = ok(b.kint("history", "entity", "release-day", "--category", "rules"))
    versions = superseded.stdout.splitlines()
    assert [RELEASE_RULE in versions[0], NEWER_RELEASE_RULE in versions[1]] == [True, True], \
        versions
    # What B acts on is the newest anchored value, and the chain vouches for it there.
    verified = kjson(b, "verify", "release Wednesdays deadlift reviewer")
    assert verified["decision"] == "proceed", verified
    assert verified["reason"].startswith("entity rules/release-day verified"), verified
