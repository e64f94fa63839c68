"""Telling the supervisor's own pause from its workers' silence.

The supervisor judges a worker hung when no beat arrived for the heartbeat timeout. But
beats are only noticed while the supervisor runs: stopped (SIGSTOP, a debugger), starved
or swapped out, it reads nothing, and on resuming every worker looks silent for as long
as the supervisor was gone. Restarting the whole fleet for the supervisor's own pause
would be wrong, so the loop watches its own schedule on the monotonic clock: each turn is
due within its poll timeout of the last one, and a turn that comes much later than that
means the supervisor did not run. For that span nobody was listening, so the workers'
silence is counted again from the moment it resumed: each gets a full heartbeat timeout
to be heard. (A supervisor paused for longer than its slack in every timeout window would
never find a worker hung; so starved, it could not judge one fairly anyway.)
"""

from __future__ import annotations

from typing import Callable


def pause_slack(heartbeat_timeout_s: float) -> float:
    """What a busy turn may add to its due time before the lateness counts as a pause: a
    quarter of the heartbeat timeout, a second at most."""
    return min(1.0, heartbeat_timeout_s / 4)


class ScheduleWatch:
    """`turn(now)` at each turn of the loop returns how long the supervisor was away
    before it (0.0 when the turn came on time).

    `due_s` is the longest a turn may take (the poll timeout); `heartbeat_timeout_s` gives
    the timeout in force, read only for a turn that came late: its slack (`pause_slack`)
    follows a config.toml that changed the timeout, where one fixed at start left a
    shortened timeout (10 s to 2 s) with a second's slack against it, not half a second,
    and a pause up to 1.25 s long counted as the workers' silence.
    """

    def __init__(self, due_s: float, heartbeat_timeout_s: Callable[[], float]) -> None:
        self.due_s = due_s
        self._timeout = heartbeat_timeout_s
        self._last: float | None = None

    def turn(self, now: float) -> float:
        last, self._last = self._last, now
        if last is None:
            return 0.0
        late = now - last - self.due_s
        if late <= 0.0:  # nearly every turn: nothing more to read
            return 0.0
        return late if late > pause_slack(self._timeout()) else 0.0
