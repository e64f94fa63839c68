"""The exit push's bound: computed once as the exit push begins, carried with its work.

The supervisor answers an exit push TIMEOUT at its op's bound (OPS["exit_push"], 900 s from
when it routed the request). The worker bounded only the exit push's wait for the space's
turn (half of it); the push it then made had no bound of its own, so a push of many epochs,
or one behind a slow endpoint, went on past the supervisor's deadline, unseen (its reply
dropped late), or was cut anywhere by a stop's grace. Now one `ExitBound`, read from the
monotonic clock once (`ExitBound.starting_now`, sessions.exit_push), is handed down: the
wait ends at its `turn_by` (head_lock._wait_turn), and the push looks at it before each
epoch it would sign (push._push_epochs, `cut`): none starts past `done_by`, which keeps the
room one epoch takes (its receipt wait and a margin) before the bound, nor once the
worker's stop began (a stop, restart, recycle or upgrade: HeadTurn.stop). Stopped there,
between two epochs, nothing is lost: the epochs that landed are recorded, the store keeps
the other rows, unanchored, for the next push (the watcher's, or the next worker's start),
and the exit push says so once, in its log line (`cut_message`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kint.chain.anchor_writes import RECEIPT_TIMEOUT_S
from kint.protocol.ops import OPS

if TYPE_CHECKING:
    from kint.tenant_worker.space import SpaceContext

# The exit push's whole bound (seconds), the supervisor's for the op.
EXIT_BOUND_S = OPS["exit_push"].max_timeout_ms / 1000
# How long the exit push waits for its turn on the space: half its bound, so the push it
# then makes has the other half. Waiting the whole bound, it pushed after the supervisor had
# answered TIMEOUT, its reply dropped late.
EXIT_TURN_S = int(EXIT_BOUND_S // 2)
# The room the last epoch started before the bound takes to end: its receipt wait and a
# margin for its send, its reads and the reply's way to the supervisor. An epoch is started
# only while this much of the bound is left.
EPOCH_ROOM_S = RECEIPT_TIMEOUT_S + 30.0


@dataclass(frozen=True)
class ExitBound:
    """One exit push's deadlines (time.monotonic()): the end of its wait for the turn, and
    the last moment it starts an epoch."""

    turn_by: float
    done_by: float

    @classmethod
    def starting_now(cls) -> "ExitBound":
        """The bound of an exit push beginning now, read once: the module's values at the
        call (a test shortens them), never bound at import."""
        now = time.monotonic()
        return cls(turn_by=now + EXIT_TURN_S, done_by=now + EXIT_BOUND_S - EPOCH_ROOM_S)


def cut(ctx: "SpaceContext", bound: ExitBound | None) -> str | None:
    """Why the exit push starts no further epoch now (None: it goes on): the worker's stop
    began, or too little of its bound is left for one. A push that is not the exit push
    (`bound` None) is never cut here."""
    if bound is None:
        return None
    stopped = ctx.head_ops.stopped
    if stopped is not None:
        return stopped
    if time.monotonic() >= bound.done_by:
        return f"too little is left of its bound ({int(EXIT_BOUND_S)} s) for another epoch"
    return None


def cut_message(why: str, sent: int, planned: int, rows_sent: int, rows_left: int,
                head: str) -> str:
    """The exit push's one line when it stopped between epochs: what it anchored, why it
    stopped, and that the rest stays in the store for the next push."""
    done = (f"anchored {rows_sent} row change(s) in {sent} of {planned} epoch(s){head}"
            if sent else f"anchored none of its {planned} epoch(s)")
    return (f"{done}; stopped before epoch {sent + 1}: {why}; the other {rows_left} row "
            f"change(s) stay in the store, unanchored, for the next push")
