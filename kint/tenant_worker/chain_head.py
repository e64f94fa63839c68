"""Where verify gets the chain head from: one small interface, so verify does not know
whether a chain is configured, reachable or hung.

Until this machine is connected to a chain (the chain issue plugs that in), every reading
is unavailable and verify checks against the mirror alone, saying so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol


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


def read_head(source: HeadSource, timeout_s: float) -> HeadReading:
    """Verify's single head read: none at all under KINT_OFFLINE=1."""
    if os.environ.get("KINT_OFFLINE") == "1":
        return HeadReading(None, "KINT_OFFLINE=1")
    return source.read(timeout_s)
