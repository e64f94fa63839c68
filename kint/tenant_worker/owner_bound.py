"""Whether a space is bound to the owner it is connected to: this machine holds an epoch of
that owner's vault (its mirror's head or its watermark past 0) or a push on its way to it
(a push journal).

Bound, `kint connect --owner OTHER` refuses to move the space to another owner
(connect_owner.owner_change): another owner's memory takes a tenant of its own. The CLI's
hint for another owner's `--owner` on push, pull and the rest (kint/commands/owner_flag.py)
names that connect only while the space is not bound. Each asked its own question (the hint
looked for the watermark and push journal files, the refusal at the mirror's head and the
watermark's seq), so a space whose mirror held epochs without a watermark was sent by the
hint to a connect that refused; both ask here now, each with its own reader of how far this
machine got (the worker's SpaceContext.seen_here, the CLI's seen_here.seen_on_disk).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable


def bound_to_owner(seen_here: Callable[[], int], pending: Path) -> bool:
    """`seen_here`: the highest epoch of the space this machine anchored or pulled (0:
    none; a state file that does not read, with nothing else to go by, is its refusal);
    `pending`: the space's push journal."""
    return seen_here() > 0 or pending.exists()
