"""A row's provenance (seed 000, "Four statuses per hit"): the epoch that last changed it,
whose block a drift names as the one that anchored the good value.

The mirror keeps it per row as epochs are applied (`statefiles.apply_rows`): a snapshot
re-anchors every row without moving the provenance of one it did not change, but a pull
that starts at a snapshot (a cold start, `--discard-local`) has no picture before it, so
the snapshot becomes every row's provenance. Where the epoch cache holds the epochs before
it (cached by an earlier push or pull, or by `kint pull --full`), it knows better: this
module replays the cached epochs, oldest first, by the same rule, and moves each row's
provenance back to the epoch that wrote the value it still holds. With no epoch before the
snapshot cached, the snapshot stays (seed 000: its block is the one named).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from kint.tenant_worker.state_format import CorruptStateFile
from kint.tenant_worker.statefiles import Mirror, SpaceState, apply_rows

log = logging.getLogger("kint.worker")


def refine_from_cache(state: SpaceState, mirror: Mirror) -> Mirror:
    """`mirror` with every row's provenance taken from the epoch cache where the cache
    names an older epoch for the same value, saved; `mirror` itself when nothing moves.

    An epoch missing from the cache (one sealed under a retired data key) hides what it
    changed, so the replay forgets what it knew there and starts again at the next epoch
    it holds; so does an epoch that does not chain on the one before it (its `prev` is not
    that epoch's digest). A row is only ever moved back across epochs the cache holds,
    never raised."""
    try:
        replayed = _replay_cache(state, mirror)
    except CorruptStateFile as err:
        # The pull that asks has applied its epochs: a damaged old cache file costs the
        # finer provenance, never the pull (history and verify name the file).
        log.warning("provenance: kept as applied: kint's state file %s %s", err.path, err.why)
        return mirror
    if replayed is None:
        return mirror
    rows = dict(mirror.rows)
    for cid, row in mirror.rows.items():
        known = replayed.rows.get(cid)
        if known is not None and known.leaf == row.leaf and known.seq < row.seq:
            rows[cid] = replace(row, seq=known.seq)
    if rows == mirror.rows:
        return mirror
    refined = replace(mirror, rows=rows)
    state.save_mirror(refined)
    return refined


def _replay_cache(state: SpaceState, mirror: Mirror) -> Mirror | None:
    """The picture the cached epochs give, oldest first, up to the mirror's head; None
    when the cache does not reach that head."""
    seqs = [seq for seq in state.cached_seqs() if seq <= mirror.head.seq]
    if not seqs or seqs[-1] != mirror.head.seq or (
            state.meta(seqs[-1]).digest != mirror.head.digest):
        return None
    replayed: Mirror | None = None
    for before, seq in zip([None, *seqs], seqs):
        if before is not None and (seq != before + 1
                                   or state.meta(seq).prev != state.meta(before).digest):
            replayed = None  # not one chain of epochs: what came before says nothing
        replayed = apply_rows(replayed, state.space_id, state.plaintext(seq))
    return replayed
