"""A restore that spans many epochs, across two machines on the real devchain: every row
comes back byte for byte through Sibyl's own write methods, including what a per-epoch
read-back is most likely to get wrong (identical journal events, a row changed in a later
epoch, an entity deleted, a pull that resumes on a store that already holds some epochs).

An epoch carries at most 92,160 compressed bytes (v0.3.0's split, fixed: there is no knob
to cut epochs smaller), so the notes carry random text that does not compress away: two
dozen of them make three epochs, and one pull applies them all. Machine B comes in with the
recovery code on stdin."""

from __future__ import annotations

import os

import pytest

from chain_machines import (authorize_machine, connect_with_code, kjson, owner_account,
                            recovery_code)
from conftest import sibyl_client
from machines_together import new_machines
from kint.rows.export import connect_ro, export_rows

NOTE_RANDOM_BYTES = 9000  # 18,000 hex characters a note: about 10 KB of gzip each


@pytest.fixture(scope="module")
def pair(tmp_path_factory, chain_home):
    a, b = new_machines([tmp_path_factory.mktemp("restore-a"),
                         tmp_path_factory.mktemp("restore-b")], chain_home)
    yield a, b
    a.shutdown()
    b.shutdown()


def _leaves(sb, db=None) -> list[tuple[str, str]]:
    conn = connect_ro(str(db or sb.sibyl_db))
    try:
        return sorted((r.canonical_id, r.leaf.hex()) for r in export_rows(conn, sb.tenant))
    finally:
        conn.close()


def test_a_many_epoch_restore_is_byte_exact_and_resumes(pair, chain_home):
    a, b = pair
    client = sibyl_client(a.sibyl_db, a.tenant)
    try:
        for i in range(24):
            text = f"note {i}: {os.urandom(NOTE_RANDOM_BYTES).hex()}"
            client.set_entity("notes", f"note-{i}", {"text": text},
                              status="open" if i % 3 else None)
        for _ in range(3):  # identical events: one content key, occurrences 0, 1, 2
            client.write_event(acted=["the same thing again"], ts="2026-01-02T00:00:00Z")
        client.set_state("focus", {"now": "restores"})
        client.set_reference("runbook", "step one, then step two", metadata={"v": 1})
    finally:
        client.storage.close()
    connected = kjson(a, "connect", "--dev")
    first = kjson(a, "push")
    assert len(first["epochs"]) >= 3, first  # the 92,160-byte epoch limit split it

    code = recovery_code(a, connected["space"])
    joined = connect_with_code(b, connected["owner"], code)
    assert (joined["space"], joined["source"]) == (connected["space"], "recovery code"), joined
    pulled = kjson(b, "pull")
    assert pulled["applied"] == [e["seq"] for e in first["epochs"]], pulled
    assert pulled["warnings"] == [] and pulled["store_root_matches"] is True, pulled
    assert _leaves(b) == _leaves(a)

    # Later epochs change a row, delete one and repeat the event once more; B resumes.
    client = sibyl_client(a.sibyl_db, a.tenant)
    try:
        client.set_entity("notes", "note-1", {"text": "rewritten in a later epoch"})
        client.delete_entity("notes", "note-2")
        client.write_event(acted=["the same thing again"], ts="2026-01-02T00:00:00Z")
    finally:
        client.storage.close()
    second = kjson(a, "push")
    pulled = kjson(b, "pull")
    assert pulled["applied"] == [e["seq"] for e in second["epochs"]], pulled
    assert pulled["warnings"] == [] and pulled["store_root_matches"] is True, pulled
    assert _leaves(b) == _leaves(a)
    assert "entity\x00notes\x00note-2" not in dict(_leaves(b))
    keys = sorted(cid.split("\x00")[2] for cid, _ in _leaves(b) if cid.startswith("journal"))
    content = keys[0]
    assert keys == [content, f"{content}:1", f"{content}:2", f"{content}:3"], keys
    assert kjson(b, "verify", "rewritten later epoch")["decision"] == "proceed"

    # The bucket ratchets per space (v0.3.0's judge claim "pad to a size bucket; publish
    # only the bucket"): a small diff after large epochs is padded to the largest bucket
    # yet, and so is the next push of the machine that restored them, which never saw
    # those buckets chosen.
    buckets = [e["bucket"] for e in first["epochs"] + second["epochs"]]
    assert buckets == sorted(buckets) and buckets[-1] > 4096, buckets
    authorize_machine(chain_home, owner_account(a, connected["owner"]),
                      kjson(b, "status")["session"])
    client = sibyl_client(b.sibyl_db, b.tenant)
    try:
        client.set_entity("notes", "from-b", {"text": "small"})
    finally:
        client.storage.close()
    (third,) = kjson(b, "push")["epochs"]
    assert third["bucket"] == buckets[-1], (third, buckets)


def test_a_written_row_that_did_not_come_back_as_anchored_is_named():
    """The pull's one read-back, on its own: a row whose stored text differs from what was
    anchored, one that is gone, an entity deleted on chain that is still there; rows the
    pull did not write are not its to judge."""
    from kint.rows.canon import Row
    from kint.tenant_worker.replay import rows_not_back
    from kint.tenant_worker.statefiles import Mirror, MirrorRow

    def row(key: str, body: str) -> Row:
        return Row("entity", "notes", key, {"status": None, "body": body})

    anchored = {r.canonical_id: MirrorRow(r.tier, r.category, r.key, r.leaf, 1)
                for r in (row("same", "a"), row("changed", "b"), row("gone", "c"),
                          row("untouched", "d"))}
    mirror = Mirror(space_id="00" * 32, rows=anchored)
    stored = [row("same", "a"), row("changed", "B"), row("deleted", "x"), row("untouched", "D")]
    written = {row(k, "").canonical_id: seq for k, seq in
               (("same", 1), ("changed", 2), ("gone", 1), ("deleted", 3))}
    # v0.3.0's words (03-new-machine.md, step 8), each with the epoch that wrote the row.
    assert rows_not_back(mirror, stored, written) == [
        "epoch 2: entity notes/changed: stored text differs from the anchored leaf after "
        "replay",
        "epoch 3: entity notes/deleted: deleted on chain but still in the store",
        "epoch 1: entity notes/gone: row missing after replay",
    ]


def test_a_replayed_row_whose_stored_text_does_not_come_back_is_named(pair):
    """The pull path's read-back, end to end (v0.3.0's judge claim "every replayed row is
    re-read and its leaf compared"): a body anchored as stored text Sibyl's own writes do
    not produce (JSON spaced by hand, behind Sibyl's client) is replayed through
    `set_entity`, which stores Sibyl's serialisation; the read-back names the row and its
    epoch, and the store root is not reported as matching. The module's machines, in a
    space of its own: a profile store named `spaced` on each."""
    import sqlite3

    a, b = pair
    adb, bdb = a.profile_db("spaced"), b.profile_db("spaced")
    client = sibyl_client(adb, a.tenant)
    try:
        client.set_entity("notes", "plain", {"text": "as Sibyl writes it"})
        client.set_entity("notes", "spaced", {"text": "spaced by hand"})
    finally:
        client.storage.close()
    conn = sqlite3.connect(adb)
    conn.execute("""update entities set body = '{"text":   "spaced by hand"}' """
                 "where name = 'spaced'")
    conn.commit()
    conn.close()
    connected = kjson(a, "--db", str(adb), "connect", "--dev")
    pushed = kjson(a, "--db", str(adb), "push")
    (epoch,) = [e["seq"] for e in pushed["epochs"]]

    connect_with_code(b, connected["owner"], recovery_code(a, connected["space"]), db=bdb)
    pulled = kjson(b, "--db", str(bdb), "pull")
    assert pulled["applied"] == [epoch], pulled
    assert pulled["warnings"] == [
        f"epoch {epoch}: entity notes/spaced: stored text differs from the anchored leaf "
        f"after replay"], pulled
    assert pulled["store_root_matches"] is False, pulled
    stored, anchored = dict(_leaves(b, bdb)), dict(_leaves(a, adb))
    assert stored["entity\x00notes\x00plain"] == anchored["entity\x00notes\x00plain"]
    assert stored["entity\x00notes\x00spaced"] != anchored["entity\x00notes\x00spaced"]
