"""The first sighting of a previous session key's nonce waiting at another endpoint, as the
push journal keeps it (kint/tenant_worker/former_key_wait.py, pending_journal.py
`Sighting`): timed on the monotonic clock of one boot, never the wall clock, and read on
its own so that an entry that does not read costs the sighting alone, never the journal.

Real journal files in a temp directory; no chain: the other endpoints' answer (`Look`) is
the plain value `FormerKey.waits_elsewhere` returns, given here as the cases need it
(tests/test_pending_rotated_elsewhere.py has the real second node). The wall clock is
patched where a test steps it: nothing here can step the box's clock for real."""

from __future__ import annotations

import time

import orjson
import pytest
from eth_hash.auto import keccak

from kint.boot import boot_id
from kint.tenant_worker import former_key_wait
from kint.tenant_worker.former_key_wait import Look
from kint.tenant_worker.pending_journal import NO_BOOT, PendingEpoch, Sighting

SIGNER = "0x" + "ab" * 20
URL = "http://127.0.0.1:9/"
OLD = "http://127.0.0.1:8/"
HOLE = 4


@pytest.fixture
def journal(tmp_path):
    envelope = b"envelope"
    path = tmp_path / "pending-x.json"
    PendingEpoch(2, "0x00", keccak(envelope).hex(), HOLE + 1, b"\x01", 0, b"", envelope,
                 SIGNER).save(path)
    return path


def _with_deferred(journal, deferred) -> None:
    obj = orjson.loads(journal.read_bytes())
    obj["deferred"] = deferred
    journal.write_bytes(orjson.dumps(obj))


def test_a_sighting_is_kept_on_the_monotonic_clock_with_its_boot(journal):
    seen = former_key_wait.since(journal, SIGNER, HOLE, Look(URL))
    assert seen is not None and seen.boot == boot_id() and seen.url == URL
    entry = orjson.loads(journal.read_bytes())["deferred"]
    assert entry == [[HOLE, seen.mono, boot_id(), URL]], entry
    assert former_key_wait.since(journal, SIGNER, HOLE, Look(URL)) == seen  # kept, not anew
    assert former_key_wait.since(journal, SIGNER, HOLE, Look(unanswered=True)) == seen
    assert former_key_wait.since(journal, SIGNER, HOLE, Look()) is None  # forgotten
    assert orjson.loads(journal.read_bytes())["deferred"] == []


@pytest.mark.parametrize("step_s", [3600.0, -3600.0], ids=["forward", "back"])
def test_a_wall_clock_step_changes_nothing(journal, monkeypatch, step_s):
    """The wall clock stepped an hour after the sighting: the wait counts on. Timed on it,
    one set back kept the bound from ending (the push waited out its receipt wait at every
    push and pull again), one set forward ended it at once."""
    seen = former_key_wait.since(journal, SIGNER, HOLE, Look(URL))
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + step_s)
    again = former_key_wait.since(journal, SIGNER, HOLE, Look(URL))
    assert again == seen
    assert 0 <= former_key_wait.waited(again) < former_key_wait.bound_s()


@pytest.mark.parametrize("old", [
    [[HOLE, time.monotonic() - 5.0, "another boot", OLD]],
    [[HOLE, time.monotonic() + 3600.0, boot_id(), OLD]],
    [[HOLE, time.time(), OLD]],
    [[HOLE, "x", boot_id(), OLD]],
], ids=["another-boot", "ahead-of-now", "three-wall-clock", "text-time"])
def test_a_sighting_that_is_no_time_here_starts_again(journal, old):
    """A sighting recorded on another boot (its monotonic reading means nothing on this
    one), one ahead of the monotonic clock now, one in the earlier wall-clock shape or with
    a time that does not read: recorded again as first seen now, not counted from (a
    reading of another boot could end the bound at once or never), where the look finds it
    now. A look that goes unanswered keeps it waiting as one that was seen waiting, at the
    endpoint it was seen at, counted from now and kept so: taken for never seen, it
    deferred nothing and the hole was filled at once."""
    _with_deferred(journal, old)
    seen = former_key_wait.since(journal, SIGNER, HOLE, Look(URL))
    assert seen is not None and seen.boot == boot_id() and seen.url == URL
    assert former_key_wait.waited(seen) < former_key_wait.bound_s()
    assert PendingEpoch.load(journal).deferred == (seen,)
    _with_deferred(journal, old)
    kept = former_key_wait.since(journal, SIGNER, HOLE, Look(unanswered=True))
    assert kept is not None and kept.boot == boot_id() and kept.url == OLD, kept
    assert former_key_wait.waited(kept) < former_key_wait.bound_s()
    assert PendingEpoch.load(journal).deferred == (kept,)
    assert former_key_wait.since(journal, SIGNER, HOLE, Look(unanswered=True)) == kept
    assert former_key_wait.since(journal, SIGNER, HOLE, Look()) is None  # forgotten


@pytest.mark.parametrize("deferred,timeless", [
    (None, False), ("text", False), ({"4": 1.0}, False), ([None], False),
    ([[HOLE, 1.0, "b", URL, 5]], False), ([["4", 1.0, "b", URL]], False),
    ([[True, 1.0, "b", URL]], False), ([[-1, 1.0, "b", URL]], False),
    ([[HOLE, 1.0, "b", None]], False), ([[HOLE, 1.0, URL]], True),
    ([[HOLE, "x", "b", URL]], True), ([[HOLE, None, "b", URL]], True),
    ([[HOLE, 1.0, 7, URL]], True), ([[HOLE, float("inf"), "b", URL]], True),
], ids=["null", "text", "object", "null-entry", "five", "text-nonce", "bool-nonce",
        "negative-nonce", "null-url", "three-wall-clock", "text-time", "null-time",
        "number-boot", "infinite-time"])
def test_a_deferred_field_that_does_not_read_costs_only_itself(journal, deferred, timeless):
    """Each shape the optional field may have that is not a sighting's (the three-element
    entry is the wall-clock shape an earlier kint wrote): the journal reads, every other
    field as it was. It made the whole journal CORRUPT_STATE, which blocks every push and
    pull of the space. An entry whose nonce and endpoint read, its time not (`timeless`),
    is kept as a sighting of no boot, which `first_seen` records again as first seen now;
    any other is dropped."""
    before = PendingEpoch.load(journal)
    good = [HOLE + 7, 2.5, "b", URL]
    _with_deferred(journal, (deferred if not isinstance(deferred, list)
                             else deferred + [good]))
    held = PendingEpoch.load(journal)
    kept = () if not isinstance(deferred, list) else (Sighting(HOLE + 7, 2.5, "b", URL),)
    if timeless:
        kept = (Sighting(HOLE, 0.0, NO_BOOT, URL),) + kept
    assert held.deferred == kept
    assert held == PendingEpoch(**{**before.__dict__, "deferred": kept})
    held.save(journal)
    assert PendingEpoch.load(journal) == held  # written back as it reads
