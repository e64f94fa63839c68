"""The looks the watcher owes a signature that did not yet tell every later commit
(store.SettledRule; the watcher's docstring, kint/tenant_worker/watcher.py): the half of
`Watcher` that marks such a look owed when a signature that told no longer does
(`_doubted`), says when its wait should end for it (`_look_due`), and whether the tick goes
on once it is due (`_look_again`). Kept apart from the ticks, the counts and the pushes,
which set and read the same marks.
"""

from __future__ import annotations

import logging

from kint.tenant_worker.store import SettledRule

log = logging.getLogger("kint.worker")

# How long past the moment a signature tells every later commit the watcher wakes to look
# at a store it found clean (or a push it held) at that signature: the wake must find it
# told, on two clocks (the files' wall clock, the wait's monotonic one).
LOOK_MARGIN_S = 0.05


class OwedLook:
    """A mixin of `Watcher`: the owed look at a signature that had not told every later
    commit. `Watcher` owns the marks (`dirty`, `_untold`, `_told_at`, `_woke_for`,
    `_held_at_signature`, `_last_change`) and the rule; these read and set them."""

    # Watcher's own, declared for the type checker.
    dirty: bool
    _last_change: float
    _held_at_signature: tuple[int, ...] | None
    _untold: tuple[int, ...] | None
    _rule: SettledRule
    _told_at: tuple[int, ...] | None
    _woke_for: tuple[int, ...] | None

    def _look_due(self, now: float) -> float:
        """When (monotonic) the signature owed a look (`_untold`) tells every later commit,
        plus LOOK_MARGIN_S; infinity when none is owed, or the wait already ended early
        for it (a tick that failed must not be run again at once, and again)."""
        untold = self._untold
        if untold is None or not self.dirty or untold == self._woke_for:
            return float("inf")
        return self._rule.tells_at(untold, now) + LOOK_MARGIN_S

    def _doubted(self, sig: tuple[int, ...] | None, now: float) -> None:
        """The signature that told every later commit, and at which the store may have been
        marked clean (or a push held), no longer does: its files' times, ahead of the clock
        when it told by standing steady (store.SettledRule), are now within two seconds of
        it (or the clock stepped back), and a commit now may leave them as they were. A
        store clean, or a push held, at it is looked at once more when it tells again
        (`_look_again`), as one found so before it told; a store dirty otherwise is left
        as it is (its own rules look at it)."""
        self._told_at = None
        if not self.dirty:
            log.info("watcher: the store's files are dated within 2 s of the clock, so a "
                     "change may not show; looking at the store again")
            self.dirty, self._untold = True, sig
            self._last_change = now  # a commit then would be as recent as that
        elif sig == self._held_at_signature:
            self._untold = sig

    def _look_again(self, told: bool) -> bool:
        """The store is dirty at `_untold`, a signature at which it was found clean (or a
        push held) before the signature told every later commit: whether to go on with the
        tick. Until it tells, nothing: a count now could miss a commit as the last did.
        Once it tells, the store is looked at once more by the usual rules, in this tick: a
        push held then is tried again (at once when the quiet period had passed: no change
        was seen to wait out; a size check otherwise, which pushes only past the size
        trigger), and a store found clean is counted at once (a size check), clean again if
        nothing is left. That size check is this tick's alone: one the quiet trigger made
        needless is not left to the next change's first tick, which waits for the
        once-a-minute rule as any does. A store found clean whose count is None by then
        (the space can no longer push: not connected, its data key no longer cached, the
        count failed) stays dirty, as any dirty store does while nothing can count it, and
        is marked clean by the first count that finds nothing left once one can be made
        (once a minute, then at every tick past the quiet period, or further apart while
        a count keeps failing for one reason: watcher_count.RETRY_CAP_TICKS)."""
        if not told:
            return False
        self._untold = self._held_at_signature = None
        return True
