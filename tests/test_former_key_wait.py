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
from kint.tenant_worker.pending_journal import PendingEpoch, Sighting

SIGNER = "0x" + "ab" * 20
URL = "http://127.0.0.1:9/"
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


@pytest.mark.parametrize("boot,ahead_s", [("another boot", -5.0), (boot_id(), 3600.0)],
                         ids=["another-boot", "ahead-of-now"])
def test_a_sighting_that_is_no_time_here_starts_again(journal, boot, ahead_s):
    """A sighting recorded on another boot (its monotonic reading means nothing on this
    one), or one ahead of the monotonic clock now: recorded again as first seen now, not
    counted from (a reading of another boot could end the bound at once or never); and
    with a look that went unanswered, nothing is deferred."""
    old = [[HOLE, time.monotonic() + ahead_s, boot, "http://old/"]]
    _with_deferred(journal, old)
    seen = former_key_wait.since(journal, SIGNER, HOLE, Look(URL))
    assert seen is not None and seen.boot == boot_id() and seen.url == URL
    assert former_key_wait.waited(seen) < former_key_wait.bound_s()
    assert PendingEpoch.load(journal).deferred == (seen,)
    _with_deferred(journal, old)
    assert former_key_wait.since(journal, SIGNER, HOLE, Look(unanswered=True)) is None


@pytest.mark.parametrize("deferred", [
    None, "text", {"4": 1.0}, [None], [[HOLE, 1.0, URL]], [[HOLE, 1.0, "b", URL, 5]],
    [[HOLE, "x", "b", URL]], [[HOLE, None, "b", URL]], [["4", 1.0, "b", URL]],
    [[True, 1.0, "b", URL]], [[-1, 1.0, "b", URL]], [[HOLE, 1.0, 7, URL]],
    [[HOLE, 1.0, "b", None]], [[HOLE, float("inf"), "b", URL]],
], ids=["null", "text", "object", "null-entry", "three-wall-clock", "five", "text-time",
        "null-time", "text-nonce", "bool-nonce", "negative-nonce", "number-boot", "null-url",
        "infinite-time"])
def test_a_deferred_field_that_does_not_read_costs_only_itself(journal, deferred):
    """Each shape the optional field may have that is not a sighting's (the three-element
    entry is the wall-clock shape an earlier kint wrote): the journal reads, every other
    field as it was, and the entry is dropped. It made the whole journal CORRUPT_STATE,
    which blocks every push and pull of the space."""
    before = PendingEpoch.load(journal)
    good = [HOLE + 7, 2.5, "b", URL]
    _with_deferred(journal, (deferred if not isinstance(deferred, list)
                             else deferred + [good]))
    held = PendingEpoch.load(journal)
    kept = () if not isinstance(deferred, list) else (Sighting(HOLE + 7, 2.5, "b", URL),)
    assert held.deferred == kept
    assert held == PendingEpoch(**{**before.__dict__, "deferred": kept})
