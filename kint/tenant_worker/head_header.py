"""The newest readable epoch header on chain: where a machine finds the wraps of the data
key (05-keys.md, "One data key, many wraps"; 06-epochs.md, "An epoch nobody can open").

Connect, rekey and recovery-code all start here. The head epoch's header decides which
keys open the vault, unless its bytes do not parse as a kint header (an epoch a leaked
session key appended, say): then the walk goes back through `prevBlock` to the newest one
that does, looking at 32 epochs at most: the head and the 31 before it, as v0.3.0 does
(12-kint-core.md, "An epoch that does not open"). Only a header that does not parse is
stepped over; a header that parses but whose wraps none of the supplied keys open stops
the caller.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from kint.chain.anchor import Anchor, CalldataRefused, Head
from kint.chain.rpc import RpcUnavailable
from kint.epochs.envelope import Header, MalformedHeader, parse_header
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import HEADER_TRANSPORT_HINT
from kint.tenant_worker.chain_refusal import chain_unavailable

log = logging.getLogger("kint.worker")

# How many epochs connect, rekey and recovery-code look at for a header that parses, the
# head included.
HEADER_WALK_EPOCHS = 32


@dataclass(frozen=True)
class ReadableHeader:
    seq: int
    block: int
    header: Header
    blob: bytes


# The hint of a walk that read every epoch it looked at and found no kint header: the chain
# answered, so the transport hint (try again, another RPC) would send the user round in
# circles. The code stays RPC_UNAVAILABLE, the class its callers act on: connect still
# answers from this machine's wraps, rekey refuses as CHAIN_UNREADABLE.
NO_KINT_HEADER_HINT = ("the chain answered: those epochs are none of them an envelope this "
                       "kint reads (another tool, a newer kint or a leaked session key wrote "
                       "them). Check --owner and the tenant; if both are right, a machine "
                       "that holds the data key anchors a readable snapshot over them with "
                       "`kint compact --over-skipped`")


def _unreadable(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.RPC_UNAVAILABLE, message,
                         HEADER_TRANSPORT_HINT)


def read_head(anchor: Anchor, owner: str, space: str) -> Head:
    try:
        return anchor.head(owner, space)
    except RpcUnavailable as err:
        raise chain_unavailable(err, "cannot read the chain head: ",
                                HEADER_TRANSPORT_HINT) from None


def newest_readable_header(anchor: Anchor, owner: str, space: str, head: Head, *,
                           command: str,
                           on_epoch: Callable[[int, int], None] | None = None) -> ReadableHeader:
    """The header of the head epoch, or of the newest of the 31 before it that parses.

    `command` names the caller (connect, rekey, recovery-code) in the refusals and the log
    lines, so a rekey's refusal does not talk about connect. `on_epoch(seq, block)` is told
    of each epoch before its reads (connect's progress line: each one is two chain calls)."""
    seq, block, digest = head.seq, head.block, head.digest
    for _ in range(HEADER_WALK_EPOCHS):
        if seq < 1:
            break
        if on_epoch is not None:
            on_epoch(seq, block)
        try:
            event = anchor.epoch_log(owner, space, seq, block)
        except RpcUnavailable as err:
            raise _unreadable(f"cannot read the head epoch: {err}") from None
        if event is None or event.digest != digest:
            raise _unreadable(f"cannot read the head epoch: no Epoch event for seq {seq} at "
                              f"block {block}; the RPC may be pruned or lying")
        try:
            blob = anchor.push_calldata(event.tx_hash, owner, space, event.prev, event.digest)
        except CalldataRefused as err:
            raise ProtocolError(ErrorCode.STALE_RPC, str(err),
                                "the RPC served bytes the Epoch event does not vouch for; "
                                f"{command} never walks past that") from None
        except RpcUnavailable as err:
            raise _unreadable(f"cannot fetch the calldata of epoch {seq}: {err}") from None
        try:
            header = parse_header(blob)
        except MalformedHeader as err:
            log.warning("%s: the head epoch %d at block %d is not a readable kint epoch "
                        "(%s)", command, seq, block, err)
            seq, block, digest = seq - 1, event.prev_block, event.prev
            continue
        if seq != head.seq:
            log.warning("%s: using epoch %d at block %d, the newest readable one",
                        command, seq, block)
        return ReadableHeader(seq, block, header, blob)
    raise ProtocolError(ErrorCode.RPC_UNAVAILABLE,
                        f"cannot read the head epoch: none of the {head.seq - seq} newest "
                        f"epochs (seq {head.seq} down to {seq + 1}) has a header that parses, "
                        f"and {command} looks at {HEADER_WALK_EPOCHS} at most",
                        NO_KINT_HEADER_HINT)
