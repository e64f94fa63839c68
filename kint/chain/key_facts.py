"""What the chain says of a session key: the wei it holds and, for an owner, whether
EpochAnchor lets it push (`canWrite`) and until when (`sessionKeyExpiry`).

The one reader of these facts. `kint status` and memory_status (the space's worker, inside
its head budget), `kint session-key show`, doctor's session key check and `kint join`'s
report each bound and word them their own way; what is read, in which order, and the
balance as ETH text are here, so the four cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from kint.chain.units import eth_text

if TYPE_CHECKING:
    from kint.chain.anchor import Anchor

# The least a session key must hold to write: 0.00002 ETH. v0.3.0's doctor passes a key
# holding more than this, and its join says `writes: on` for one holding at least this
# (09-cli.md, 03-new-machine.md); each caller keeps its own comparison.
MIN_WRITE_BALANCE_WEI = 2 * 10**13


@dataclass(frozen=True)
class KeyFacts:
    """A session key's facts as read; `authorized` and `expiry` are None when not asked
    (no owner, or the caller left the expiry out)."""

    balance_wei: int
    authorized: bool | None = None
    expiry: int | None = None

    @property
    def balance_eth(self) -> str:
        return eth_text(self.balance_wei)

    def as_json(self) -> dict[str, Any]:
        """`balance_wei`, `balance_eth`, then `authorized` and `expiry` when read: the
        fields of v0.3.0's `session-key show` and memory_status `session_key`."""
        out: dict[str, Any] = {"balance_wei": self.balance_wei,
                               "balance_eth": self.balance_eth}
        if self.authorized is not None:
            out["authorized"] = self.authorized
        if self.expiry is not None:
            out["expiry"] = self.expiry
        return out


def _unbounded() -> None:
    return None


def read_key_facts(anchor: Anchor, address: str, owner: str | None, *,
                   with_expiry: bool = True,
                   before_read: Callable[[], None] = _unbounded) -> KeyFacts:
    """The balance of `address`, then for `owner` canWrite and (`with_expiry`) the expiry:
    one bounded RPC each (the anchor's timeout). `before_read` runs before every read, so
    a caller with a budget for all of them raises there to start no more. The chain's
    failures (RpcUnavailable, ChainRefused) reach the caller, which says them its way."""
    before_read()
    balance = anchor.balance(address)
    if owner is None:
        return KeyFacts(balance)
    before_read()
    authorized = anchor.can_write(owner, address)
    if not with_expiry:
        return KeyFacts(balance, authorized)
    before_read()
    return KeyFacts(balance, authorized, anchor.session_key_expiry(owner, address))
