"""A row's provenance (docs/how-it-works.md, "Verify: four statuses, seven checks"): the
epoch that last changed it, whose block a drift names as the one that anchored the good
value.

The mirror keeps it per row as epochs are applied (`statefiles.apply_rows`): a snapshot
re-anchors every row without moving the provenance of one it did not change, but a pull
that starts at a snapshot (a cold start, `--discard-local`) has no picture before it, so
the snapshot becomes every row's provenance. Where the epoch cache holds the epochs before
it (cached by an earlier push or pull, or by `kint pull --full`), it knows better: this
module replays the cached epochs, oldest first, by the same rule, and moves each row's
provenance back to the epoch that wrote the value it still holds. With no epoch before the
snapshot cached, the snapshot stays (its block is the one named: docs/commands.md, "kint
verify").

The cache is a copy, not the truth (kint.tenant_worker.cache_check): each epoch replayed is
checked against what was anchored first, as `history` checks it, since a drift's evidence
names the epoch as one the chain vouched for the value in. An epoch that cannot be checked
(no key rebuilds it, no replay reproduces its root) is passed over as a missing one is.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from kint.epochs.errors import EpochError
from kint.tenant_worker.cache_check import Reader, RootTracker, checked_reader
from kint.tenant_worker.state_format import CorruptStateFile
from kint.tenant_worker.statefiles import Mirror, SpaceState, apply_rows

log = logging.getLogger("kint.worker")


def refine_from_cache(state: SpaceState, mirror: Mirror, owner: str,
                      keys: dict[bytes, bytes]) -> Mirror:
    """`mirror` with every row's provenance taken from the epoch cache where the cache
    names an older epoch for the same value, saved; `mirror` itself when nothing moves.
    `owner` and `keys` (the data keys this machine holds) rebuild each cached epoch's
    ciphertext to check it against its anchored digest.

    An epoch missing from the cache (one sealed under a retired data key) hides what it
    changed, so the replay forgets what it knew there and starts again at the next epoch
    it holds; so does an epoch that does not chain on the one before it (its `prev` is not
    that epoch's digest), and one that cannot be checked. A row is only ever moved back
    across epochs the cache holds, never raised.

    The saved mirror no longer owes a refinement (`Mirror.provenance_owed`); a damaged cache
    file or header leaves it owed, so a pull after the file is mended tries again."""
    try:
        replayed = _replay_cache(state, mirror, checked_reader(state, owner, keys))
    except CorruptStateFile as err:
        # The pull that asks has applied its epochs: a damaged or edited old cache file
        # costs the finer provenance, never the pull (history and verify name the file).
        log.warning("provenance: kept as applied: kint's state file %s %s", err.path, err.why)
        return mirror
    except EpochError as err:  # a cached header that no longer parses
        log.warning("provenance: kept as applied: a cached epoch's header %s", err)
        return mirror
    rows = dict(mirror.rows)
    for cid, row in (mirror.rows.items() if replayed is not None else ()):
        known = replayed.rows.get(cid)
        if known is not None and known.leaf == row.leaf and known.seq < row.seq:
            rows[cid] = replace(row, seq=known.seq)
    if rows == mirror.rows and not mirror.provenance_owed:
        return mirror
    # Saved with the owed mark cleared, even when nothing moved: the cache has answered.
    refined = replace(mirror, rows=rows, provenance_owed=False)
    state.save_mirror(refined)
    return refined


def _replay_cache(state: SpaceState, mirror: Mirror, read: Reader) -> Mirror | None:
    """The picture the cached epochs give, oldest first, up to the mirror's head; None
    when the cache does not hold that head. Only the epochs that chain down from the head
    without a gap are read (what lies before a gap says nothing of the rows after it),
    newest first, as `read` checks the digests down from the head."""
    head = mirror.head
    cached = set(state.cached_seqs())
    if head.seq not in cached or state.meta(head.seq).digest != head.digest:
        return None
    run = [head.seq]
    while (run[-1] - 1 in cached
           and state.meta(run[-1]).prev == state.meta(run[-1] - 1).digest):
        run.append(run[-1] - 1)
    opened = {seq: read(seq) for seq in run}
    tracker = RootTracker()
    replayed: Mirror | None = None
    for seq in reversed(run):
        plaintext, by_key = opened[seq]
        try:
            by_root = tracker.check(state, seq, plaintext)
        except CorruptStateFile:
            if not by_key:
                raise  # edited, or a writer's root that is off: nothing tells which
            # Rebuilt to its anchored digest, so as anchored: a writer's root that is off
            # (the pull that applied it only warned), not an edit.
            by_root = False
        if not (by_root or by_key):
            replayed = None  # not checked against what was anchored: says nothing
            continue
        replayed = apply_rows(replayed, state.space_id, plaintext)
    return replayed
