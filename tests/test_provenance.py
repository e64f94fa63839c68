"""A row's provenance after a restore that starts at a snapshot (kint.tenant_worker.
provenance): the epoch cache names the epoch that wrote each value, but only epochs checked
against what was anchored may say so, since a drift's evidence names that epoch as one the
chain vouched for the value in (the cache is a copy, not the truth: issue 14, item 6).

Real parts: a real Sibyl store written through Sibyl's own client, and a mirror and epoch
cache written by kint's one recording function (tests/anchoring.py: each epoch sealed for
real under a throwaway data key). No chain: the refinement reads no RPC."""

from __future__ import annotations

import gzip
from dataclasses import replace

from anchoring import TEST_DEK, TEST_OWNER, anchor, state_for
from conftest import TENANT, write_rules
from kint.epochs.buckets import gzip_bytes
from kint.epochs.envelope import dek_id
from kint.paths import ensure_private_dir
from kint.tenant_worker.provenance import refine_from_cache

LABEL = "provenance"
# Of one length, neither inside the other: an edit swaps one for the other in place.
RULE_1 = "alpha: never ship on a Friday"
RULE_2 = "omega: never ship on a Friday"
KEYS = {dek_id(TEST_DEK): TEST_DEK}


def _restored_from_snapshot(tmp_path):
    """Epoch 1 writes the release rule and the review rule, epoch 2 changes the release
    rule, epoch 3 is a snapshot carrying both: the mirror as a pull that started at the
    snapshot leaves it, every row's provenance the snapshot."""
    home, db = ensure_private_dir(tmp_path / "kint"), tmp_path / "memory.db"
    write_rules(db, TENANT, release=RULE_1, review="two reviewers")
    anchor(home, LABEL, db, TENANT, block=10)
    write_rules(db, TENANT, release=RULE_2)
    anchor(home, LABEL, db, TENANT, block=20)
    anchor(home, LABEL, db, TENANT, block=30, snapshot=True)
    state = state_for(home, LABEL)
    mirror = state.mirror()
    assert _provenance(mirror) == {"release": 2, "review": 1}  # applied one by one
    cold = replace(mirror, rows={cid: replace(row, seq=3) for cid, row in mirror.rows.items()})
    state.save_mirror(cold)
    return state, cold


def _provenance(mirror) -> dict[str, int]:
    return {row.key: row.seq for row in mirror.rows.values()}


def test_a_restore_from_a_snapshot_names_the_epoch_that_wrote_each_value(tmp_path):
    state, cold = _restored_from_snapshot(tmp_path)
    refined = refine_from_cache(state, cold, TEST_OWNER, KEYS)
    assert _provenance(refined) == {"release": 2, "review": 1}
    assert _provenance(state.mirror()) == {"release": 2, "review": 1}  # saved
    # Without the data key (it expired, or the epochs were sealed under a retired one) the
    # replay from epoch 1 checks each epoch's rows against its anchored root instead.
    state.save_mirror(cold)
    assert _provenance(refine_from_cache(state, cold, TEST_OWNER, {})) == {
        "release": 2, "review": 1}


def test_an_edited_cached_epoch_never_names_itself_as_the_one_that_wrote_a_value(tmp_path):
    """Epoch 1's cached plaintext edited to carry the release rule's current value: read
    unchecked, the replay moved the row's provenance back to epoch 1, an epoch the chain
    never vouched for that value in. Checked, the edit costs the finer provenance (the
    snapshot stays named, as for a damaged file), with the data key and without it."""
    state, cold = _restored_from_snapshot(tmp_path)
    plain = state.epoch_path(1, ".json.gz")
    inflated = gzip.decompress(plain.read_bytes())
    assert RULE_1.encode() in inflated
    plain.write_bytes(gzip_bytes(inflated.replace(RULE_1.encode(), RULE_2.encode())))
    for keys in (KEYS, {}):
        assert refine_from_cache(state, cold, TEST_OWNER, keys) is cold
        assert _provenance(state.mirror()) == {"release": 3, "review": 3}


def test_an_epoch_anchored_with_a_root_that_is_off_still_names_where_values_were_written(
        tmp_path):
    """A writer whose epoch 2 carries a rows_root its rows do not reproduce: the pull that
    applies it warns and goes on, and so does the provenance where the data key rebuilds
    that epoch to its anchored digest (it is as anchored, not edited). Without the key
    nothing tells a root that is off from an edit: the snapshot stays named."""
    home, db = ensure_private_dir(tmp_path / "kint"), tmp_path / "memory.db"
    write_rules(db, TENANT, release=RULE_1, review="two reviewers")
    anchor(home, LABEL, db, TENANT, block=10)
    write_rules(db, TENANT, release=RULE_2)
    anchor(home, LABEL, db, TENANT, block=20, rows_root="ab" * 32)
    anchor(home, LABEL, db, TENANT, block=30, snapshot=True)
    state = state_for(home, LABEL)
    mirror = state.mirror()
    cold = replace(mirror, rows={cid: replace(row, seq=3) for cid, row in mirror.rows.items()})
    state.save_mirror(cold)
    assert _provenance(refine_from_cache(state, cold, TEST_OWNER, KEYS)) == {
        "release": 2, "review": 1}
    state.save_mirror(cold)
    assert refine_from_cache(state, cold, TEST_OWNER, {}) is cold

