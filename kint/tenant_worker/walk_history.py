"""What a pull's walk does when its endpoint will not serve an epoch below the head: the
Epoch event at the block the epoch above names (an error, or no event there), or, on a
restore from nothing, the push transaction that carries the epoch.

Why the walk does not apply what it read above the missing epoch: it reads newest first,
and an epoch applies only on the one before it (pull_plan.py), so nothing above a missing
epoch can apply, except from a snapshot read on the way (a `--full` walk goes past
snapshots). With one, the pull starts there and is whole; the epochs below it are history
only, and the backfill after the pull names where it stopped (pull.py). Without one the
pull refuses and says which epoch, at which block, and what to change: a refusal that
applied nothing is what a partial picture (push and verify refusing on it) would cost
anyway, and the next pull starts from the same place.

Why a restore from nothing stops at the first push transaction the endpoint does not
serve: a node keeps history back to a horizon (a pruned node) or keeps no transaction
index at all, so every older epoch is unserved too. Walking on to epoch 1 costs two calls
per epoch and ends in a gap at epoch 1 with nothing restored (exit 0); stopping at once
says the same thing with the setting to change. A pull that already holds epochs keeps
v0.3.0's gap (03-new-machine.md, "Gaps"): the epochs before it apply, and the next pull
retries.

Why one retry, of an answer only: v0.3.0 tries a read that failed once more
(03-new-machine.md, "Freshness: two endpoints on a cold start"); the provider already
tries a connection that failed or timed out three times (kint.chain.rpc), but never an
answer, so the walk repeats a log read the endpoint refused (an error object, a 429:
RpcErrorAnswer) once, after a pause that rides out a rate limit's burst, before it
decides the endpoint does not serve that block. Repeating a timeout too would make a hung
endpoint cost six timeouts per log read.
"""

from __future__ import annotations

import logging
import time

from kint.chain.anchor import Anchor, EpochLog, Head
from kint.chain.rpc import RpcErrorAnswer
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import ARCHIVE_HINT

log = logging.getLogger("kint.worker")

# The pause before a failed log read of the walk is asked once more.
LOG_RETRY_S = 1.0


def epoch_log_retried(anchor: Anchor, owner: str, space: str, seq: int,
                      block: int) -> EpochLog | None:
    """The Epoch event of `seq` at `block` (None: the endpoint has none there), the read
    asked once more after LOG_RETRY_S when the endpoint refused it; the second refusal, or
    any other failure (the provider's tries already spent), is raised."""
    try:
        return anchor.epoch_log(owner, space, seq, block)
    except RpcErrorAnswer as err:
        log.info("pull: reading the Epoch event of epoch %d failed (%s); asking once more",
                 seq, err)
    time.sleep(LOG_RETRY_S)
    return anchor.epoch_log(owner, space, seq, block)


def unserved_below_head(seq: int, block: int, head: Head, why: str,
                        newer: int) -> ProtocolError:
    """The refusal of a walk that cannot read epoch `seq` (at `block`) below the head,
    `why` saying what the endpoint did, with `newer` epochs read above it."""
    above = (f"; the {newer} newer epoch(s) read need it before they apply"
             if newer else "")
    return ProtocolError(ErrorCode.RPC_UNAVAILABLE,
                         f"cannot walk back to epoch {seq} at block {block} (the head is "
                         f"epoch {head.seq}): {why}{above}; nothing was applied",
                         ARCHIVE_HINT)


def unserved_transaction(seq: int, block: int, err: Exception) -> ProtocolError:
    """The refusal of a restore from nothing whose epoch `seq`'s push transaction the
    endpoint does not serve."""
    return ProtocolError(ErrorCode.RPC_UNAVAILABLE,
                         f"cannot restore from this endpoint: epoch {seq} at block {block}: "
                         f"{err}; an older epoch would be missing too, so nothing was "
                         f"applied", ARCHIVE_HINT)
