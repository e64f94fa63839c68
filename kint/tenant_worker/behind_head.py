"""A chain head older than the newest epoch this machine anchored or pulled: an endpoint
that lags (or lies), or a chain that lost the block that carried the epoch (a
reorganisation). Push (push.py) and pull (pull.py, the watermark check) refuse both as
STALE_RPC; this module says which it is.

Why the block number: an endpoint's head alone cannot tell the two apart, since a lagging
node and a reorganised chain both answer the older head with its right digest. Its block
number can: a node that lags is behind in blocks too, below the block that carried this
machine's newest epoch, while a chain that reorganised that block away is at or past its
height again. The lagging endpoint's refusal says to check the endpoints; the other says
what happened, since waiting would never help, and asks for a second endpoint's word
before anyone concludes the chain lost an epoch, and names `kint push --reanchor`, which
sends the lost epochs again from this machine's cache (reanchor.py); the refusals
themselves keep everything as it is.
"""

from __future__ import annotations

from kint.chain.anchor import Anchor, Head
from kint.chain.endpoint_source import other_endpoint
from kint.chain.rpc import RpcUnavailable
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import REORG_HINT


def reorganised_at(anchor: Anchor, seen_block: int | None) -> int | None:
    """The endpoint's block number when it is at or past `seen_block` (the block that
    carried the newest epoch this machine saw), else None: a lagging endpoint, or one whose
    block number could not be read (the caller's words then stay the lagging ones)."""
    if not seen_block:
        return None
    try:
        at = anchor.block_number()
    except RpcUnavailable:
        return None
    return at if at >= seen_block else None


def behind_refusal(anchor: Anchor, head: Head, seen_seq: int, seen_block: int | None,
                   lagging: str, tail: str) -> ProtocolError:
    """STALE_RPC for a head older than seq `seen_seq` (anchored at `seen_block`): in
    `lagging`'s words, with the code's own hint (check the endpoints), for an endpoint
    behind in blocks, else naming the reorganisation. `tail` ends the message (what was
    left as it was)."""
    at = reorganised_at(anchor, seen_block)
    if at is None:
        return ProtocolError(ErrorCode.STALE_RPC, f"{lagging}; {tail}")  # the default hint
    lost = (f"epoch {seen_seq}" if seen_seq == head.seq + 1
            else f"epochs {head.seq + 1} to {seen_seq}")
    return ProtocolError(
        ErrorCode.STALE_RPC,
        f"the endpoint's head (seq {head.seq}) is older than the seq {seen_seq} this machine "
        f"saw anchored at block {seen_block}, yet the endpoint is at block {at}: a "
        f"reorganisation dropped {lost} from the chain, or the endpoint is lying; {tail}",
        REORG_HINT.format(endpoint=other_endpoint(anchor.config)))
