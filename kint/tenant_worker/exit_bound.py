"""The exit push's bound: the supervisor's deadline for its request, carried with its work.

The supervisor answers an exit push TIMEOUT at its request's bound (OPS["exit_push"]'s
900 s, or less if the client asked less, from when it routed the request). The worker
bounded only the exit push's wait for the space's turn (half of it); the push it then made
had no bound of its own, so a push of many epochs, or one behind a slow endpoint, went on
past the supervisor's deadline, unseen (its reply dropped late), or was cut anywhere by a
stop's grace. Then its bound was read from the worker's clock as its handler began: late
by however long the request waited (in the supervisor's queue while the worker started,
behind the worker's other ops on its pool), so it could still start an epoch after the
supervisor's TIMEOUT. Now the bound is the request's own deadline, sent by the supervisor
with it on the box's monotonic clock (request_deadline.py, checked as it arrives:
worker_wire.req_deadline), and one `ExitBound` made of it (`ExitBound.for_request`,
sessions.exit_push) is handed down: the wait ends at its `turn_by` (head_lock._wait_turn,
half the bound from when the supervisor routed it), and the push looks at it before each
epoch it would sign (push._push_epochs, `cut`): none starts once less is left of the bound
than the room kept for one epoch (`kept_room`), nor once the worker's stop began (a stop or
restart, or a SIGTERM: HeadTurn.stop). The room is what one epoch may take at worst
(`epoch_room`: its receipt wait, and each chain call it makes at the KINT_RPC_TIMEOUT the
push's call gives, as many tries as a read gets), capped at half the bound: from a
KINT_RPC_TIMEOUT of about 37 s that worst case outgrows the whole bound, and a room of it
started no epoch at all, a regression for exactly the users with slow endpoints, whose exit
push had run. So an exit push always has the first half of its bound to start epochs; what
is then true, under a timeout past about 17 s (a worst case over half the bound), is that
an epoch begun late may, if every one of its calls times out thrice, end past the bound: its
result comes after the supervisor's TIMEOUT, said only in the worker's log. Stopped at its bound or
the stop, between two epochs, nothing is lost: the epochs that landed are recorded, the store keeps
the other rows, unanchored, for the next push (the watcher's, or the next worker's start),
and the exit push says so once, in its log line (`cut_message`).

The room does not bound the epoch's receipt wait, which looked at its own 60 s only at its
loop's top, so an epoch begun inside the bound ran on past it (its worst case counts more
calls than the room, an unstick's among them, as many as the nonces it pushes through): the
wait now ends at the bound itself (AnchorWrites.wait's `until`, push._push_epochs), starting
no call after it. What that leaves is what a kill there leaves: the epoch's journal, written
before its send, holds the signed transaction, and the next push or pull (or the next
worker's start) settles it, recording the epoch if it landed; the line says the push
stopped in that epoch's receipt wait (WAIT_CUT), its rows counted with those left.

The exit push's settlement of an earlier push's journal (a killed push's, settled before
anything of its own: rekey_settle.settle_journals) sends the journal's transaction again
and waits for its receipt (pending._send_again): that wait ran its own 60 s whatever the
bound, so an exit push that began inside it ended past it. It ends at the bound too, the
journal kept as a cut epoch's is; the line says the push stopped in that settlement
(`settle_cut_message`), having read no rows and sent nothing of its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kint.chain.anchor_writes import RECEIPT_TIMEOUT_S
from kint.chain.rpc import RETRY_PAUSES_S
from kint.protocol.ops import OPS

if TYPE_CHECKING:
    from kint.chain.config import ChainConfig
    from kint.tenant_worker.request_deadline import Deadline
    from kint.tenant_worker.space import SpaceContext

# The exit push's whole bound (seconds), the supervisor's for the op.
EXIT_BOUND_S = OPS["exit_push"].max_timeout_ms / 1000
# How long the exit push waits for its turn on the space: half its bound, so the push it
# then makes has the other half. Waiting the whole bound, it pushed after the supervisor had
# answered TIMEOUT, its reply dropped late.
EXIT_TURN_S = int(EXIT_BOUND_S // 2)
# The chain reads one epoch makes besides the polls its receipt wait ends within: the
# signing's five (the session key's mined nonce, the gas estimate and the two fee reads that
# fill the transaction, the balance: SessionSender.sign), and, at the wait's end, the poll
# begun just before it and, when that end is the wait's own 60 s and not the push's bound
# (`until`, which starts no call once come), the depth read after it (AnchorWrites.wait).
# Each is tried three times when it times out (kint.chain.rpc); the send is tried once.
EPOCH_READS = 7
EPOCH_SENDS = 1
# What the room keeps besides the chain's calls: the epoch's records written, the result's
# way back to the supervisor.
EPOCH_MARGIN_S = 15.0


@dataclass(frozen=True)
class ExitBound:
    """One exit push's deadlines (time.monotonic()): the end of its wait for the turn, and
    the last moment it starts an epoch; and how long the whole bound is (`seconds`), which
    its line names and whose half is the most room it keeps for an epoch."""

    turn_by: float
    ends: float
    seconds: float

    @classmethod
    def for_request(cls, given: "Deadline | None") -> "ExitBound":
        """The bound of an exit push beginning now for a request whose deadline is `given`
        (request_deadline.current(): the supervisor's, None for a call outside a request):
        it ends there, never past EXIT_BOUND_S from now, and its wait for the turn ends at
        the bound's half from when the supervisor routed it (and within EXIT_TURN_S), so a
        request that waited before it ran waits no longer for the turn and keeps the
        other half for its push. Without `given`, the bound runs from now. The module's
        values are read at the call (a test shortens them), never bound at import."""
        now = time.monotonic()
        if given is None:
            return cls(turn_by=now + EXIT_TURN_S, ends=now + EXIT_BOUND_S,
                       seconds=EXIT_BOUND_S)
        return cls(turn_by=min(now + EXIT_TURN_S, given.at - given.seconds / 2),
                   ends=min(given.at, now + EXIT_BOUND_S),
                   seconds=min(given.seconds, EXIT_BOUND_S))


def epoch_room(chain: "ChainConfig") -> float:
    """The most one epoch may take (seconds) from its signing to its result, at the
    push's own chain settings (`chain`: its call's KINT_RPC_TIMEOUT, whether its reads are
    tried again): the receipt wait, every try of its calls, the pauses between, a margin.
    A fixed room (the receipt wait and 30 s) let one epoch of a call with a long
    KINT_RPC_TIMEOUT end past the bound: three tries of each read alone outlast it."""
    pauses = RETRY_PAUSES_S if chain.rpc_retries else ()
    tries = EPOCH_READS * (1 + len(pauses)) + EPOCH_SENDS
    return (RECEIPT_TIMEOUT_S + chain.rpc_timeout_s * tries + EPOCH_READS * sum(pauses)
            + EPOCH_MARGIN_S)


def kept_room(chain: "ChainConfig", bound_s: float) -> float:
    """The room the exit push keeps before its bound (`bound_s` long) for one epoch
    (seconds): what one may take at the push's `chain` settings (`epoch_room`), but never
    more than half the bound. Uncapped, a KINT_RPC_TIMEOUT of about 37 s or more left no
    time to start any epoch, and a slow endpoint's exit push, which had run, anchored
    nothing."""
    return min(epoch_room(chain), bound_s / 2)


def late(bound: ExitBound, chain: "ChainConfig") -> str | None:
    """Why no further epoch starts within `bound` now (None: one may): less of it is left
    than the room kept for one (`kept_room`). When that room is the cap, the line says what
    is then true: an epoch begun late may end past the bound, after the supervisor's
    TIMEOUT, and only the worker's log says how it ended."""
    worst, room = epoch_room(chain), kept_room(chain, bound.seconds)
    if time.monotonic() + room < bound.ends:
        return None
    timeout = f"KINT_RPC_TIMEOUT={chain.rpc_timeout_s:g}s"
    head = f"too little is left of its bound ({int(bound.seconds)} s) for another epoch"
    if room >= worst:
        return f"{head}, which may take {round(worst)} s at {timeout}"
    return (f"{head}: half of it ({round(room)} s) is kept for one, which may take up to "
            f"{round(worst)} s at {timeout} (every call timing out thrice), so one begun "
            f"late may end past the bound, after the supervisor's TIMEOUT, said only here")


def cut(ctx: "SpaceContext", bound: ExitBound | None, chain: "ChainConfig") -> str | None:
    """Why the exit push starts no further epoch now (None: it goes on): the worker's stop
    began, or less of its bound is left than the room kept for one epoch at the push's
    `chain` settings (`late`). A push that is not the exit push (`bound` None) is never cut
    here."""
    if bound is None:
        return None
    stopped = ctx.head_ops.stopped
    if stopped is not None:
        return stopped
    return late(bound, chain)


# Why the exit push stopped in an epoch's receipt wait, cut at its bound (push._push_epochs,
# AnchorWrites.wait's `until`): with `cut_message`'s `in_wait`, the line says where.
WAIT_CUT = ("its bound came first; that epoch was sent and may still land: its journal is "
            "settled by the next push or pull, which records it if it did")


def cut_message(why: str, sent: int, planned: int, rows_sent: int, rows_left: int,
                head: str, in_wait: bool = False) -> str:
    """The exit push's one line when it stopped between epochs, or in an epoch's receipt
    wait (`in_wait`: sent, its landing left to its journal): what it anchored, why it
    stopped, and that the rest stays in the store for the next push. Its epochs are named
    by their place (the next, the first), never by a number beside the head's seq."""
    where = "in the receipt wait of" if in_wait else "before"
    if sent:
        done = (f"anchored {rows_sent} row change(s) in {sent} of {planned} epoch(s){head}; "
                f"stopped {where} the next: {why}; the other")
    else:
        done = (f"anchored none of its {planned} epoch(s); stopped {where} the first: {why}; "
                f"the")
    return f"{done} {rows_left} row change(s) stay in the store, unanchored, for the next push"


# Why the exit push stopped in its settlement of an earlier push's journal, cut at its bound
# in the receipt wait of the journal's transaction sent again (pending.SettleCut).
SETTLE_CUT = ("its bound came first; that epoch was sent again and may still land: its "
              "journal is settled by the next push or pull, which records it if it did")


def settle_cut_message(seq: int) -> str:
    """The exit push's one line when it stopped in the receipt wait of an earlier push's
    epoch `seq`, sent again by its settlement: before it read the store, so the rows are
    not counted, only said to wait for the next push."""
    return (f"anchored nothing; stopped in the settlement of an earlier push's epoch {seq}, "
            f"in the receipt wait of its transaction sent again: {SETTLE_CUT}; any row "
            f"changes of this push stay in the store, unanchored, for the next push")
