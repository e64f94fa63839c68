"""A KINT_HOME written in the previous state layout (1: every row's fields in
`mirror-<space>.json`, each epoch's ciphertext and plaintext in `NNNNNNNN.bin` and
`NNNNNNNN.json`) is converted once, atomically, on the first read (issue 15): verify,
history and the seqs behave exactly as before; a conversion killed half-way finishes on the
next read; a layout-1 file that cannot be trusted is refused by name and left as it is.

The layout-1 files are made here from a space anchored with kint's recording function: the
old mirror from the store's rows (they are the anchored ones), each ciphertext rebuilt from
the cache with the test data key, the plaintext inflated, the metadata without its header.
"""

from __future__ import annotations

import gzip
import json
import stat
from pathlib import Path

import orjson
import pytest

from anchoring import TEST_DEK, TEST_OWNER, anchor, state_for, store_rows
from conftest import make_sandbox, sibyl_client
from kint.tx_text import with_tx_0x
from kint.epochs.envelope import rebuild
from kint.tenant_worker.statefiles import SpaceState

RULE_1 = "never ship on a Friday; every release needs a green deadlift test and a second reviewer"
RULE_2 = "never ship on a Friday, and a second reviewer signs every release off"


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    sb = make_sandbox(tmp_path_factory.mktemp("upgrade"))
    sb.start_entitled()
    yield sb
    sb.shutdown()


def seed(sb, profile: str) -> tuple[Path, SpaceState]:
    db = sb.profile_db(profile)
    client = sibyl_client(db, sb.tenant)
    client.set_entity("rules", "release-gate", {"rule": RULE_1})
    client.set_entity("people", "dana", {"role": "reviewer"})
    anchor(sb.kint_home, sb.label(db), db, sb.tenant, block=100)
    client.set_entity("rules", "release-gate", {"rule": RULE_2})
    anchor(sb.kint_home, sb.label(db), db, sb.tenant, block=120)
    return db, state_for(sb.kint_home, sb.label(db))


def write_layout_1(state: SpaceState, db: Path, tenant: str) -> dict:
    """Turn the space's state files into what the previous kint wrote; returns the old
    mirror document."""
    mirror = state.mirror()
    assert mirror is not None
    stored = {r.canonical_id: r for r in store_rows(db, tenant)}
    rows = []
    for cid in mirror.ordered():
        m, row = mirror.rows[cid], stored[cid]
        assert row.leaf == m.leaf
        rows.append({"tier": m.tier, "category": m.category, "key": m.key,
                     "fields": row.fields, "leaf": m.leaf.hex(), "seq": m.seq})
    old = {"v": 1, "space": state.space_id, "head": mirror.head.to_json(),
           "anchored_root": mirror.anchored_root, "skipped": mirror.skipped, "rows": rows}
    space16 = state.space_id[:16]
    (state.home / f"mirror-{space16}.json").write_bytes(orjson.dumps(old))
    state.files["mirror"].unlink()
    for seq in state.cached_seqs():
        meta, cached = state.meta(seq), state.cached(seq)
        blob = rebuild(bytes.fromhex(meta.header), cached.payload, dek=TEST_DEK,
                       owner=TEST_OWNER, space=state.space_id, seq=seq, prev=meta.prev)
        state.epoch_path(seq, ".bin").write_bytes(blob)
        state.epoch_path(seq, ".json").write_bytes(gzip.decompress(cached.payload))
        record = meta.to_json()
        del record["header"]
        state.epoch_path(seq, ".meta.json").write_bytes(orjson.dumps(record))
        state.epoch_path(seq, ".json.gz").unlink()
    mark = json.loads(state.files["watermark"].read_text())
    state.files["watermark"].write_text(json.dumps({**mark, "v": 1}))
    return old


def names(state: SpaceState) -> list[str]:
    return sorted(p.name for p in state.files["epochs"].iterdir())


def history_here(state: SpaceState) -> list[dict]:
    from kint.tenant_worker.cache_check import checked_reader
    from kint.tenant_worker.history import versions

    return versions(state, "entity", "release-gate", "rules", checked_reader(state, None, {}))


def test_a_layout_1_home_is_converted_once_and_behaves_as_before(box):
    db, state = seed(box, "convert")  # no worker has read this space yet
    before = history_here(state)
    assert [v["seq"] for v in before] == [1, 2] and all(v["checked"] for v in before)
    converted = state.files["mirror"].read_bytes()
    cache = {n: (state.files["epochs"] / n).read_bytes() for n in names(state)}
    write_layout_1(state, db, box.tenant)
    assert names(state) == ["00000001.bin", "00000001.json", "00000001.meta.json",
                            "00000002.bin", "00000002.json", "00000002.meta.json"]

    # The space's worker reads it (verify), which converts it.
    out = box.kint("--db", str(db), "verify", "release rule", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["decision"] == "proceed", result
    check = next(c for c in result["checks"] if c["key"] == "release-gate")
    assert (check["anchored_seq"], check["anchored_block"]) == (2, 120), check
    assert not (state.home / f"mirror-{state.space_id[:16]}.json").exists()
    assert names(state) == ["00000001.json.gz", "00000001.meta.json", "00000002.json.gz",
                            "00000002.meta.json"]
    # Byte for byte what recording in the new layout writes: nothing was lost on the way.
    assert state.files["mirror"].read_bytes() == converted
    assert {n: (state.files["epochs"] / n).read_bytes() for n in names(state)} == cache
    assert json.loads(state.files["watermark"].read_text())["v"] == 2
    for path in [state.files["mirror"], state.files["watermark"],
                 *state.files["epochs"].iterdir()]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    shown = box.kint("--db", str(db), "history", "entity", "release-gate", "--category",
                     "rules", "--json")
    assert shown.returncode == 0, shown.stderr
    # The command prints the worker's versions with each hash's `0x` (kint/tx_text.py).
    assert json.loads(shown.stdout)["versions"] == with_tx_0x(before)


def test_a_conversion_killed_half_way_finishes_on_the_next_read(tmp_path):
    """Epoch 1 converted and its plaintext removed, its ciphertext not yet; epoch 2 not
    started; the old mirror still there: the next read finishes the job."""
    sb = make_sandbox(tmp_path)
    db, state = seed(sb, "killed")
    converted = state.files["mirror"].read_bytes()
    payload_1 = state.epoch_path(1, ".json.gz").read_bytes()
    meta_1 = state.epoch_path(1, ".meta.json").read_bytes()
    write_layout_1(state, db, sb.tenant)
    state.epoch_path(1, ".json").unlink()
    state.epoch_path(1, ".json.gz").write_bytes(payload_1)
    state.epoch_path(1, ".meta.json").write_bytes(meta_1)

    # ... and a pull killed mid-epoch had left its journal, the plaintext in hex.
    raw_2 = state.epoch_path(2, ".json").read_bytes()
    old_journal = sb.kint_home / f"applying-{state.space_id[:16]}.json"
    old_journal.write_bytes(orjson.dumps({"v": 1, "plaintext": raw_2.hex()}))

    fresh = state_for(sb.kint_home, sb.label(db))
    mirror = fresh.mirror()
    assert not old_journal.exists()
    journal = sb.kint_home / f"applying-{state.space_id[:16]}.json.gz"
    assert gzip.decompress(journal.read_bytes()) == raw_2
    assert mirror is not None and mirror.root_matches and mirror.head.seq == 2
    assert state.files["mirror"].read_bytes() == converted
    assert names(fresh) == ["00000001.json.gz", "00000001.meta.json", "00000002.json.gz",
                            "00000002.meta.json"]
    assert fresh.plaintext(1).seq == 1 and fresh.watermark().seq == 2


def test_a_layout_1_file_that_cannot_be_trusted_is_refused_by_name(tmp_path):
    """A layout-1 mirror whose leaf is not the hash of its fields stops the conversion,
    named, with nothing converted; a layout-1 watermark left without its mirror is named
    too, with the way out."""
    from kint.tenant_worker.statefiles import CorruptStateFile

    sb = make_sandbox(tmp_path)
    db, state = seed(sb, "refused")
    old = write_layout_1(state, db, sb.tenant)
    old["rows"][0]["fields"]["body"] = '{"rule":"edited"}'
    path = state.home / f"mirror-{state.space_id[:16]}.json"
    path.write_bytes(orjson.dumps(old))
    before = {n: (state.files["epochs"] / n).read_bytes() for n in names(state)}
    with pytest.raises(CorruptStateFile) as err:
        state_for(sb.kint_home, sb.label(db)).mirror()
    assert err.value.path == path and "not the hash of its fields" in err.value.why
    assert path.read_bytes() == orjson.dumps(old)
    assert {n: (state.files["epochs"] / n).read_bytes() for n in names(state)} == before
    assert not state.files["mirror"].exists()

    path.unlink()
    with pytest.raises(CorruptStateFile) as err:
        state_for(sb.kint_home, sb.label(db)).watermark()
    assert err.value.path == state.files["watermark"]
    assert "earlier kint" in err.value.why and "kint pull" in err.value.why
