"""The leaf, journal identity, canonical ids and the merkle tree, against vectors written
out by hand: the preimage bytes are spelled here, and the expected hashes were computed
once with pycryptodome's keccak, not with the code under test."""

from __future__ import annotations

import sqlite3

from anchoring import store_rows
from conftest import sibyl_client
from kint.rows.canon import Row, canonical_id, encode_fields, journal_content_key, leaf
from kint.rows.merkle import EMPTY_ROOT, MerkleTree, merkle_root, verify_proof

H1, H2, H3 = bytes.fromhex("11" * 32), bytes.fromhex("22" * 32), bytes.fromhex("33" * 32)


def test_field_encoding_is_length_prefixed_with_null_as_all_ones():
    assert encode_fields(["ab", None, ""]) == (b"\x00\x00\x00\x02ab" + b"\xff\xff\xff\xff"
                                               + b"\x00\x00\x00\x00")
    assert encode_fields(["é"]) == b"\x00\x00\x00\x02\xc3\xa9"  # bytes, not characters


def test_entity_leaf_vector():
    # kint-leaf-v1 | "entity" | "rules" | "release-gate" | null status | '{"rule":1}' | null
    assert leaf("entity", "rules", "release-gate", {"status": None, "body": '{"rule":1}'}).hex() \
        == "f69d3c1d098642d4f652bda1c92d490572d0453fa8a2794f40ab895f7ce38a4c"


def test_state_leaf_vector():
    # kint-leaf-v1 | "state" | null | "focus" | null | "{}" | null
    assert leaf("state", None, "focus", {"body": "{}"}).hex() == \
        "0c541138b04216dc4cc234212a900e2de87c3561d848d03ebe033a645ac508a2"


def test_journal_key_vector():
    # kint-journal-key-v1 | ts | null | '["x",1]' | null | null
    assert journal_content_key("2026-01-01T00:00:00Z", None, '["x",1]', None, None) == \
        "e62cbfa33ebde77bbb190ca86b814c129aff0558a2867e2b116e88d0ba30450c"


def test_merkle_vectors():
    assert EMPTY_ROOT.hex() == "7ab8238cb2be38f4ac8d913b35a8cbe2e34e8a13032aa0afc04360974a8d5061"
    assert merkle_root([]) == EMPTY_ROOT
    assert merkle_root([H1]) == H1
    ab = "3e92e0db88d6afea9edc4eedf62fffa4d92bcdfc310dccbe943747fe8302e871"
    assert merkle_root([H1, H2]).hex() == ab
    # Odd node carried up: root = keccak(keccak(H1 || H2) || H3).
    assert merkle_root([H1, H2, H3]).hex() == \
        "54cc47e0e0577877f9bdb2727df082c5f7a97451f4dd1695cbbfde937f4376c4"
    tree = MerkleTree([H1, H2, H3])
    assert tree.proof(2) == [[ab, True]]
    assert tree.proof(0) == [[H2.hex(), False], [H3.hex(), False]]
    for i, node in enumerate([H1, H2, H3]):
        assert verify_proof(node, tree.proof(i), tree.root)
    assert not verify_proof(H1, tree.proof(1), tree.root)
    assert not verify_proof(H1, [["zz", True]], tree.root)


def test_canonical_id_orders_by_identity_not_rowid():
    assert canonical_id("entity", "rules", "a") == "entity\x00rules\x00a"
    assert canonical_id("state", None, "k") == "state\x00\x00k"


def test_updated_at_is_not_in_the_leaf_but_the_stored_text_is(tmp_path):
    db = tmp_path / "m.db"
    client = sibyl_client(db)
    client.set_entity("rules", "r", {"b": 1, "a": 2})
    first = store_rows(db, client.get_tenant())[0]
    client.set_entity("rules", "r", {"b": 1, "a": 2})  # rewrites updated_at only
    assert store_rows(db, client.get_tenant())[0].leaf == first.leaf
    assert first.fields["body"] == '{"b":1,"a":2}'  # insertion order, as Sibyl stored it
    resorted = Row("entity", "rules", "r", {"status": None, "body": '{"a":2,"b":1}'})
    assert resorted.leaf != first.leaf


def _journal(db, events, tenant):
    client = sibyl_client(db, tenant)
    for ts, acted in events:
        client.write_event(acted=acted, ts=ts)
    return client


def test_journal_identity_survives_replay_and_numbers_repeats(tmp_path):
    same = ("2026-01-01T00:00:00Z", ["deployed atlas"])
    other = ("2026-01-02T00:00:00Z", ["rolled back"])
    a = tmp_path / "a.db"
    _journal(a, [same, other, same, same], "t")
    rows_a = [r for r in store_rows(a, "t") if r.tier == "journal"]
    base = rows_a[0].key
    assert [r.key for r in rows_a] == [base, rows_a[1].key, f"{base}:1", f"{base}:2"]
    assert ":" not in rows_a[1].key

    # Replayed on another machine: new uuids, rows in another order, the same leaves and root.
    b = tmp_path / "b.db"
    _journal(b, [other, same, same, same], "t")
    rows_b = [r for r in store_rows(b, "t") if r.tier == "journal"]
    uuids = {x for (x,) in sqlite3.connect(a).execute("select id from journal_events")}
    assert uuids.isdisjoint(x for (x,) in
                            sqlite3.connect(b).execute("select id from journal_events"))
    assert {r.key: r.leaf for r in rows_a} == {r.key: r.leaf for r in rows_b}

    def root(rows):
        ordered = sorted(rows, key=lambda r: r.canonical_id.encode())
        return merkle_root([r.leaf for r in ordered])

    assert root(rows_a) == root(rows_b)


def test_reordered_rowids_do_not_change_the_root(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    ca, cb = sibyl_client(a, "t"), sibyl_client(b, "t")
    items = [("rules", f"r{i}", {"n": i}) for i in range(7)]
    for cat, name, body in items:
        ca.set_entity(cat, name, body)
    for cat, name, body in reversed(items):
        cb.set_entity(cat, name, body)
    cb.set_state("focus", {"x": 1})
    ca.set_state("focus", {"x": 1})

    def root(db):
        rows = sorted(store_rows(db, "t"), key=lambda r: r.canonical_id.encode())
        return merkle_root([r.leaf for r in rows])

    assert root(a) == root(b)
    cb.set_entity("rules", "r3", {"n": 33})
    assert root(a) != root(b)
