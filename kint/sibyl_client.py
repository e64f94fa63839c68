"""The space's Sibyl client, built the way Sibyl's own MCP server builds it, with two
deliberate differences (DESIGN §6):

- the cap gate's size function is Sibyl's `aggregate_db_size` plus every byte under
  KINT_HOME, so what kint keeps on disk counts against the same cap Sibyl enforces;
- its TierCache is given a path (beside the store, as Sibyl's server keeps it), because
  TierCache's default would create ~/.sibyl-memory.

The account gate is Sibyl's own `EntitlementGate` over the user's credentials. There is no
switch, variable or argument that replaces it. Tests and the sandboxed demo replace it in
code, by setting `GATE_FACTORY` from a module they preload into the worker forkserver.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from kint.paths import footprint_bytes
from kint.spaces import sibyl_credentials_path

# Set in code only (tests, `kint demo`): builds the account gate instead of Sibyl's own.
GATE_FACTORY: Callable[[Path], Any] | None = None


def _credentials(path: Path) -> dict[str, Any]:
    try:
        if path.exists() and not path.is_symlink():
            creds = json.loads(path.read_text(encoding="utf-8"))
            return creds if isinstance(creds, dict) else {}
    except (OSError, ValueError):
        pass
    return {}


def cap_sizes(db: str, kint_home: Path) -> tuple[int, int]:
    """(Sibyl's own measurement of its stores, the bytes under KINT_HOME)."""
    from sibyl_memory_client._capcheck import aggregate_db_size

    return aggregate_db_size(db), footprint_bytes(kint_home)


def account_gate() -> Any:
    """Sibyl's account gate over the user's credentials (or GATE_FACTORY's): what a client
    asks before every operation, and what a pull that is about to move the store aside asks
    first, without opening (or creating) a store."""
    from sibyl_memory_client._entitlement import EntitlementGate

    cred_path = sibyl_credentials_path()
    return GATE_FACTORY(cred_path) if GATE_FACTORY is not None else EntitlementGate(cred_path)


def open_client(db: str, tenant: str, kint_home: Path) -> Any:
    """A MemoryClient on `db` for `tenant`, gated by Sibyl's account and cap gates."""
    from sibyl_memory_client import CapGate, MemoryClient, Storage, TierCache

    cred_path = sibyl_credentials_path()
    creds = _credentials(cred_path)
    gate = account_gate()
    storage = Storage(db)
    tier = creds.get("tier", "free")

    def size() -> int:
        sibyl, kint = cap_sizes(db, kint_home)
        return sibyl + kint

    cap_gate = CapGate(
        account_id=creds.get("account_id"),
        session_token=creds.get("session_token"),
        db_size_fn=size,
        local_tier_hint=tier,
        cache=TierCache(Path(db).parent / "tier_cache.json"),
        entitlement_tier_fn=lambda: gate.tier,
        entitlement_token_fn=lambda: gate.token,
        on_auth_denied=gate.notify_server_rejected,
    )
    return MemoryClient(
        storage,
        tenant_id=tenant,
        tier=tier,
        account_id=creds.get("account_id"),
        session_token=creds.get("session_token"),
        cap_gate=cap_gate,
        credentials_path=cred_path,
        entitlement_gate=gate,
    )


def close_client(client: Any) -> None:
    """Close a client's store connections, best effort: it is being replaced or let go of,
    and a failure to close must not fail the op that replaces it."""
    if client is None:
        return
    try:
        client.storage.close()
    except Exception:  # noqa: BLE001 - closing is best effort
        pass
