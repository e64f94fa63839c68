"""Where verify gets the chain head from: one small interface, so verify does not know
whether a chain is configured, reachable or hung.

Until this machine is connected, no head is read: status says why, and verify checks
against the mirror alone without a word of it, as v0.3.0's (`read_head`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from kint import settings


@dataclass(frozen=True)
class ChainHead:
    seq: int
    digest: str
    block: int

    def to_json(self) -> dict[str, object]:
        return {"seq": self.seq, "digest": self.digest, "block": self.block}


@dataclass(frozen=True)
class HeadReading:
    """Either a head, or why there is none."""

    head: ChainHead | None
    unavailable: str | None = None


class HeadSource(Protocol):
    def read(self, timeout_s: float) -> HeadReading: ...


class NotConnected:
    """The head source of a machine with no chain configured."""

    def read(self, timeout_s: float) -> HeadReading:
        return HeadReading(None, "this machine is not connected to a chain")


class RefusedChain:
    """The head source of a space whose chain settings are refused (a chain setting that
    does not parse): reading it raises the refusal, so verify refuses rather than read
    another chain's head, and status shows it as the reason there is none."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def read(self, timeout_s: float) -> HeadReading:
        raise self.error


class ChainHeadSource:
    """The head of (owner, space) on the configured chain. Reads through its own
    connection whose timeout is verify's head budget, and not at all while this space's
    primary endpoint is stuck or failed in the last 30 s (another endpoint's failure, a
    cold start's second opinion or one `connect --rpc-urls` tried, says nothing of it, nor
    does a timeout of a shorter budget than this read's: RpcTracker.unavailable)."""

    def __init__(self, chain: Any, tracker: Any, anchor_for: Callable[[Any], Any], owner: str,
                 space_id: str) -> None:
        # `anchor_for(config)` gives the Anchor to read through (the space keeps one).
        self.chain, self.tracker, self.anchor_for = chain, tracker, anchor_for
        self.owner, self.space_id = owner, space_id

    def read(self, timeout_s: float) -> HeadReading:
        """The head within `timeout_s` (verify's head budget, KINT_VERIFY_HEAD_SECONDS)."""
        from kint.chain.anchor import NoContractThere
        from kint.chain.rpc import RpcUnavailable

        primary = self.chain.rpc_urls[0]  # the tracker's record of this endpoint only
        unavailable = self.tracker.unavailable(primary, bound_s=timeout_s)
        if unavailable is not None:
            return HeadReading(None, unavailable)
        try:
            # One try: the budget bounds the whole read, and a verify that misses it
            # checks against the mirror, where retries would triple the budget.
            anchor = self.anchor_for(self.chain.with_rpc_timeout(timeout_s))
            head = anchor.head(self.owner, self.space_id)
        except NoContractThere as err:  # it answered: say what, not "unresponsive"
            return HeadReading(None, str(err))
        except RpcUnavailable:
            return HeadReading(None, self.tracker.unavailable_words(primary))
        return HeadReading(ChainHead(head.seq, head.digest, head.block))


def read_head(source: HeadSource, timeout_s: float) -> HeadReading:
    """Verify's single head read: none at all under KINT_OFFLINE=1 (this call's, else the
    space's settings), nor, unsaid, on a machine that is not connected: v0.3.0 reads the
    head "for the connected owner (... not on a machine that is not connected)" and prints
    its `chain head unavailable` line only when that read fails (07-verify.md); verify's
    `this machine has never pulled or pushed` says the rest."""
    if isinstance(source, NotConnected):
        return HeadReading(None)
    if settings.value("KINT_OFFLINE"):
        return HeadReading(None, "KINT_OFFLINE=1")
    return source.read(timeout_s)
