"""Which of a pull's walked epochs it applies: where it resumes past an epoch this machine
cannot open, and where it stops. Both answers come from one reading of prev continuity
over the walked epochs and one rule for it, so the place a pull may resume and the epochs
it then applies cannot disagree about which broken link stops it.

The rule (kint v0.3.0's 03-new-machine.md, "What every epoch must pass", 1, and "Gaps"):
an epoch's prev must be the digest of the epoch before it (the mirror's head for the first
walked), except for a snapshot the pull starts at: its rows are the whole memory, so it needs
nothing below it. A broken link is a read failure: it stops the pull, the epochs before it
applied, and no later snapshot is taken past it. A snapshot whose own link breaks is still
a place to start, since what is broken lies below it; reached from the epochs before it,
it is the gap like any other.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kint.tenant_worker.cold_start import stale
from kint.tenant_worker.epoch_walk import Fetched


def epochs_to_apply(fetched: list[Fetched], prev_digest: str
                    ) -> tuple[list[Fetched], list[dict[str, Any]]]:
    """The walked epochs (oldest first) a pull applies, from where it resumes, and the
    epochs it passes for a later snapshot (each naming it). The list ends at the gap when
    a link breaks (that epoch made the gap, with the refusal a pull that cannot stop at a
    gap raises); otherwise the pull stops at its first epoch that did not open, if any.
    `prev_digest` is the mirror's head, the digest the first walked epoch chains on."""
    expected = [prev_digest, *(f.log.digest for f in fetched[:-1])]
    follows = [f.log.prev == digest for f, digest in zip(fetched, expected)]
    start = _resume_point(fetched, follows)
    skipped = [f.entry(superseded_by=fetched[start].log.seq)
               for f in fetched[:start] if f.opened is None]
    for i in range(start, len(fetched)):
        f = fetched[i]
        if breaks_chain(f, follows[i], starts_pull=i == start):
            reason = (f"epoch {f.log.seq} does not follow the last applied epoch "
                      f"({expected[i][:12]})")
            gap = replace(f, opened=None, reason=reason, final=True, refusal=stale(reason),
                          unread=True)
            return [*fetched[start:i], gap], skipped
        if f.opened is None:  # the pull stops there
            break
    return fetched[start:], skipped


def breaks_chain(f: Fetched, follows: bool, starts_pull: bool) -> bool:
    """Whether `f` breaks prev continuity: its prev is not the digest of the epoch before
    it (`follows` False), and it is not a snapshot standing alone where the pull starts."""
    return not follows and not (starts_pull and f.snapshot)


def _resume_point(fetched: list[Fetched], follows: list[bool]) -> int:
    """The index the pull starts at: 0, or, past an epoch this machine cannot open, the
    newest snapshot that opens before the next epoch nothing walks past (a wall: `final`,
    or a link that breaks even for a pull starting there, so any snapshot is no wall)."""
    walls = [f.final or breaks_chain(f, ok, starts_pull=True)
             for f, ok in zip(fetched, follows)]
    start = 0
    for i, f in enumerate(fetched):
        if i < start:
            continue
        if walls[i]:
            break  # the pull stops here
        if f.opened is not None:
            continue
        wall = next((j for j in range(i + 1, len(fetched)) if walls[j]), len(fetched))
        later = [j for j in range(i + 1, wall) if fetched[j].snapshot]
        if not later:
            break  # the pull stops at this one
        start = later[-1]
    return start


def split_rotated(fetched: list[Fetched], skipped: list[dict[str, Any]]
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`skipped` split in two: the epochs a later snapshot carried the pull past that are
    sealed under a data key this machine does not hold, which a `--full` walk lists as
    CLOSED (03-new-machine.md, "Epochs sealed under a retired key": a rotation's snapshot
    opens, the epochs before it stay closed), and the rest, SKIPPED ("Gaps"). Each epoch
    is said once, in the words of the section that is about it."""
    rotated = {f.log.seq for f in fetched if f.rotated}
    closed = [e for e in skipped if e.get("superseded_by") and e["seq"] in rotated]
    return [e for e in skipped if e not in closed], closed
