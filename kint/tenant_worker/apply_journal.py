"""The pull's apply journal: `applying-<space16>.json.gz`, written before an epoch's rows are
replayed into the store and removed once the epoch is recorded.

Why: a pull killed (or stopped by a full disk) half-way through an epoch leaves the store
holding some of that epoch's rows while the mirror still says the epoch before it. Without
a record, the next pull sees rows this machine never anchored and a moved chain, and
refuses it as a fork. With it, the next pull recognises exactly those rows as the
interrupted epoch's, walks again, and finishes it (replay skips rows already in place):
nothing to discard, nothing lost. Changes the journal does not explain are still a fork.
`status` and `doctor` say the same (`half_done`): a half-applied epoch, not unanchored
changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kint.epochs.buckets import gunzip
from kint.epochs.errors import PayloadError, PlaintextError
from kint.epochs.plaintext import Plaintext, parse_plaintext
from kint.paths import apply_journal_path, atomic_write, remove_file
from kint.protocol import ErrorCode, ProtocolError
from kint.rows.canon import canonical_id
from kint.tenant_worker.changes import Changes
from kint.tenant_worker.statefiles import Mirror, SpaceState, Watermark


def journal_path(state: SpaceState) -> Path:
    return apply_journal_path(state.home, state.space_id[:16])


def begin(state: SpaceState, payload: bytes) -> None:
    """`payload` is the epoch's gzip member as sealed (its plaintext, compressed): the
    journal exists while Sibyl writes, when its cap counts every byte under KINT_HOME, and
    the plaintext in hex took four to five times as much."""
    atomic_write(journal_path(state), payload)


def end(state: SpaceState) -> None:
    remove_file(journal_path(state))


def interrupted(state: SpaceState) -> Plaintext | None:
    """The epoch a killed pull was applying, or None."""
    path = journal_path(state)
    try:
        return parse_plaintext(gunzip(path.read_bytes()))
    except FileNotFoundError:
        return None
    except (OSError, PayloadError, PlaintextError):
        raise ProtocolError(ErrorCode.CORRUPT_STATE,
                            f"{path}: is not a pull's apply journal; it was left as it is",
                            "move it aside and run `kint pull` (or `kint pull "
                            "--discard-local`)") from None


def settle_recorded(state: SpaceState, mirror: Mirror) -> None:
    """The journal's epoch is already in the mirror: the pull stopped (a full disk, a kill)
    after saving the mirror, before raising the watermark or removing the journal. Finish
    those two steps, so the journal does not outlive its epoch."""
    mark = state.watermark()
    if mark is None or mark.seq < mirror.head.seq:
        state.save_watermark(Watermark(mirror.head.seq, mirror.head.digest, mirror.head.block))
    end(state)


def unexplained(local: Changes, epoch: Plaintext, mirror: Mirror) -> Changes:
    """The local changes the interrupted epoch does not account for: a row it carries with
    the same leaf was put by it; a row it deletes (or, as a snapshot, does not carry) was
    removed by it."""
    carried = {row.canonical_id: row.leaf for row in epoch.rows}
    removed = {canonical_id(*d) for d in epoch.deleted}
    if epoch.snapshot:
        removed |= {cid for cid in mirror.rows if cid not in carried}
    rows = [r for r in local.rows if carried.get(r.canonical_id) != r.leaf]
    deleted = [d for d in local.deleted if canonical_id(*d) not in removed]
    return Changes(rows=rows, deleted=deleted)


@dataclass
class HalfDone:
    """A pull left half-way through epoch `seq`, `in_store` of its row changes applied."""

    seq: int
    in_store: int
    total: int

    @property
    def message(self) -> str:
        return (f"a pull stopped half-way through epoch {self.seq} ({self.in_store} of its "
                f"{self.total} row change(s) are in the store): `kint pull` finishes it, "
                f"nothing to discard")


def half_done(state: SpaceState, mirror: Mirror | None,
              local: Changes) -> tuple[HalfDone | None, Changes]:
    """The pull left half-done (None when there is none, or its epoch is already recorded)
    and the local changes it does not explain: what `status` calls unanchored. A journal
    that does not read is left to `state_health.problems`, which names it."""
    try:
        epoch = interrupted(state)
    except ProtocolError:
        return None, local
    if epoch is None or mirror is None or epoch.seq <= mirror.head.seq:
        return None, local
    rest = unexplained(local, epoch, mirror)
    total = len(epoch.rows) + len(epoch.deleted)
    return HalfDone(epoch.seq, len(local) - len(rest), total), rest

