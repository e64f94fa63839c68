"""The refusal entity's name, and the hold that finds a refused value, as kint v0.3.0 has
them (07-verify.md, "The refusal is written back": the name is `<tier>-<category or
none>-<key>-<unix seconds>`, cut to 200 characters; 04-how-it-works.md, "When a push is
held": a `kint_refusal` entity naming exactly the value a row holds now holds the server's
pushes). The hold reads the refused value from the body, so a refusal written under this
kint's former name (`TIER-CATEGORY-KEY-LEAF16`), in a store that predates the change, still
holds. In process, on a store anchored by tests/anchoring.py: no chain, no supervisor."""

from __future__ import annotations

import re
import sqlite3
import time

from anchoring import anchor, state_for
from conftest import sibyl_client
from kint.rows.export import connect_ro
from kint.tenant_worker.chain_head import HeadReading
from kint.tenant_worker.drift import HOLD_HINT, DriftBaseline, hold_error
from kint.tenant_worker.verify import Check, decide, refusal_name, search

TENANT = "t"
RULE = "never ship on a Friday; every release needs a green deadlift test"


def _anchored_store(tmp_path):
    db = tmp_path / "store" / "memory.db"
    db.parent.mkdir()
    client = sibyl_client(db, TENANT)
    client.set_entity("rules", "release-gate", {"rule": RULE})
    home = tmp_path / "kint"
    anchor(home, TENANT, db, TENANT, block=10)
    return db, client, state_for(home, TENANT)


def _edit_behind_sibyl(db, old: str, new: str) -> None:
    conn = sqlite3.connect(db)
    conn.execute("update entities set body = replace(body, ?, ?) where name = 'release-gate'",
                 (old, new))
    conn.commit()
    conn.close()


def _verify(client, db, state) -> dict:
    conn = connect_ro(str(db))
    try:
        return decide(search(client, "release rule", 5), client=client, conn=conn,
                      tenant=TENANT, state=state, query="release rule",
                      head=HeadReading(None, "test"), write_refusal=True)
    finally:
        conn.close()


def _hold(db, state):
    conn = connect_ro(str(db))
    try:
        return DriftBaseline().evaluate(conn, TENANT, state.mirror(), "tool", db=str(db))
    finally:
        conn.close()


def test_the_refusal_entity_is_named_with_the_unix_seconds_and_holds_the_value(tmp_path):
    db, client, state = _anchored_store(tmp_path)
    try:
        _edit_behind_sibyl(db, "never", "always")
        before = int(time.time())
        out = _verify(client, db, state)
        after = int(time.time())
        assert out["decision"] == "refuse" and out["checks"][0]["status"] == "drifted", out
        match = re.fullmatch(r"kint_refusal/entity-rules-release-gate-(\d+)",
                             out["refusal_entity"])
        assert match and before <= int(match.group(1)) <= after, out["refusal_entity"]
        name = out["refusal_entity"].split("/", 1)[1]
        assert client.get_entity("kint_refusal", name)["status"] == "refused"

        # A fresh baseline (no session's notes) leaves only the refusal to hold the push.
        hold = _hold(db, state)
        assert hold is not None and hold.message.startswith(
            "refusing to anchor: 1 row(s) hold a value memory_verify refused "
            "(entity rules/release-gate)."), hold
        assert hold_error(hold).hint == HOLD_HINT  # the refused value's own hint
        # Another value is not the one refused: nothing holds it on that ground.
        _edit_behind_sibyl(db, "always", "rarely")
        assert _hold(db, state) is None
    finally:
        client.storage.close()


def test_a_hold_taken_over_from_a_recycled_worker_is_refused_with_its_own_hint(tmp_path):
    """A recycled worker hands its hold over without a hint (session_handoff: message,
    reason, time); the next push that meets the same hold keeps who found it first, and
    when, and is refused with the hint of what holds it now: the refused value's here,
    not the bare default of a handed-over hold."""
    from kint.tenant_worker.drift import Hold

    db, client, state = _anchored_store(tmp_path)
    try:
        _edit_behind_sibyl(db, "never", "always")
        assert _verify(client, db, state)["decision"] == "refuse"
        found = _hold(db, state)
        drift = DriftBaseline()
        drift.take_over(None, Hold(found.message, "watcher", "2026-12-07T00:00:00Z"))
        conn = connect_ro(str(db))
        try:
            again = drift.evaluate(conn, TENANT, state.mirror(), "tool", db=str(db))
        finally:
            conn.close()
        assert (again.reason, again.at) == ("watcher", "2026-12-07T00:00:00Z"), again
        assert hold_error(again).hint == HOLD_HINT, again
    finally:
        client.storage.close()


def test_a_refusal_under_the_former_name_still_holds_its_value(tmp_path):
    """A store written before v0.3.0's names: its refusal entity is named by the refused
    leaf, not the time, and the hold still finds the value by the body."""
    db, client, state = _anchored_store(tmp_path)
    try:
        _edit_behind_sibyl(db, "never", "always")
        conn = connect_ro(str(db))
        try:
            out = decide(search(client, "release rule", 5), client=client, conn=conn,
                         tenant=TENANT, state=state, query="release rule",
                         head=HeadReading(None, "test"), write_refusal=False)
        finally:
            conn.close()
        check = out["checks"][0]
        body = {"refused": True, "query": "release rule", "tier": "entity",
                "category": "rules", "key": "release-gate", "reason": out["reason"],
                "local_leaf": check["local_leaf"], "anchored_leaf": check["anchored_leaf"],
                "anchored_seq": 1, "anchored_block": 10, "anchored_tx": check["anchored_tx"],
                "head_seq": 1, "head_block": 10, "at": "2026-11-30T12:00:00.000000Z"}
        client.set_entity("kint_refusal", f"entity-rules-release-gate-{check['local_leaf'][:16]}",
                          body, status="refused")
        hold = _hold(db, state)
        assert hold is not None and "hold a value memory_verify refused" in hold.message, hold
    finally:
        client.storage.close()


def test_a_row_without_a_category_is_named_none_and_the_name_is_cut_to_200():
    state_row = Check(tier="state", key="focus", category=None, status="drifted", reason="")
    assert refusal_name(state_row, 1764936000) == "state-none-focus-1764936000"
    long_key = Check(tier="entity", key="k" * 300, category="rules", status="missing",
                     reason="")
    name = refusal_name(long_key, 1764936000)
    assert len(name) == 200 and name == ("entity-rules-" + "k" * 300)[:200]


def _refusals(db) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [name for (name,) in conn.execute(
            "select name from entities where category = 'kint_refusal' order by rowid")]
    finally:
        conn.close()


def test_a_value_refused_again_is_named_not_written_again(tmp_path, monkeypatch):
    """An agent verifying one drifted row in a loop: v0.3.0's name carries the second of
    the write, so each retry a second later wrote another entity of the same fact, and the
    store grew by one unanchored row a retry. The refusal already in the store is named
    instead; a new value, or the refusal archived, is a new fact and written."""
    from kint.tenant_worker import verify as verify_module

    db, client, state = _anchored_store(tmp_path)
    try:
        _edit_behind_sibyl(db, "never", "always")
        first = _verify(client, db, state)
        assert first["refusal_written"] is True, first
        later = time.time() + 5  # the retries come seconds later: another name each, before
        for step in range(3):
            monkeypatch.setattr(verify_module.time, "time", lambda s=step: later + s)
            again = _verify(client, db, state)
            assert again["decision"] == "refuse", again
            assert again["refusal_entity"] == first["refusal_entity"], again
            assert again["refusal_written"] is False, again
        assert _refusals(db) == [first["refusal_entity"].split("/", 1)[1]]

        _edit_behind_sibyl(db, "always", "rarely")  # another value: its own refusal
        other = _verify(client, db, state)
        assert other["refusal_written"] is True, other
        assert other["refusal_entity"] != first["refusal_entity"], other
        assert len(_refusals(db)) == 2

        # The agent archives the refusal of the value now held: the next refusal of it is
        # written again, so the store keeps a live record of it (and the hold its ground).
        client.archive_entity("kint_refusal", other["refusal_entity"].split("/", 1)[1])
        monkeypatch.setattr(verify_module.time, "time", lambda: later + 10)
        anew = _verify(client, db, state)
        assert anew["refusal_written"] is True and anew["refusal_entity"] not in (
            first["refusal_entity"], other["refusal_entity"]), anew
    finally:
        client.storage.close()
