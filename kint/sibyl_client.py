"""The space's Sibyl client, built the way Sibyl's own MCP server builds it, with two
deliberate differences:

- the cap gate's size function is Sibyl's `aggregate_db_size` plus every byte under
  KINT_HOME but the devchain's anvil (paths.footprint_bytes), so what kint keeps on disk
  counts against the same cap Sibyl enforces;
- its TierCache is given a path (beside the store, as Sibyl's server keeps it), because
  TierCache's default would create ~/.sibyl-memory.

The account gate is Sibyl's own `EntitlementGate` over the user's credentials. There is no
switch, variable or argument that replaces it. Tests and the sandboxed demo replace it in
code, by setting `GATE_FACTORY` from a module they preload into the worker forkserver.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Callable

from kint.paths import footprint_bytes
from kint.protocol.errors import ErrorCode, ProtocolError
from kint.seconds_text import seconds_text
from kint.spaces import sibyl_credentials_path
from kint.store_denied import DENIED_HINT, denied_message, denied_reason

# How long the probe before a client is built waits for another writer's lock. Sibyl's own
# open waits up to 180 s for one (it takes a writer to be another opener's migration),
# longer than a tool call or a start-up may take.
LOCK_PROBE_S = 2.0
LOCKED_HINT = "wait for that process to finish its write, then try again"
UNREADABLE_HINT = ("check SIBYL_MEMORY_DB (or --db) names Sibyl's store; a store that is "
                   "damaged goes aside, and `kint pull --discard-local` restores the anchored "
                   "rows")

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


def store_file_id(db: str) -> tuple[int, int] | None:
    """The (device, inode) of the store file at `db`, or None when there is none: what a
    connection or a client was opened on, compared later to see the store deleted or
    replaced under it (SQLite would go on with the old file, unlinked). Not
    paths.file_signature: the store is written all the time, and only its replacement
    counts here."""
    try:
        st = os.stat(db)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def account_gate() -> Any:
    """Sibyl's account gate over the user's credentials (or GATE_FACTORY's): what a client
    asks before every operation, and what a pull that is about to move the store aside asks
    first, without opening (or creating) a store."""
    from sibyl_memory_client._entitlement import EntitlementGate

    cred_path = sibyl_credentials_path()
    return GATE_FACTORY(cred_path) if GATE_FACTORY is not None else EntitlementGate(cred_path)


def probe_store(db: str) -> None:
    """Refuse, at once, a store Sibyl's client would fail on or wait for: a file that is not
    a SQLite database (SIBYL_ERROR, where Sibyl's own open raises sqlite3's error), or one
    another process holds a write transaction on for more than LOCK_PROBE_S (BUSY, where
    Sibyl's open waits up to 180 s). A store that does not exist yet passes: Sibyl makes it.
    One in a folder this user may not search is refused first: it would read as missing."""
    denied = denied_reason(db)
    if denied is not None:
        raise ProtocolError(ErrorCode.SIBYL_ERROR, denied_message(db, denied), DENIED_HINT)
    if not os.path.exists(db):
        return
    try:
        conn = sqlite3.connect(f"file:{db}?mode=rw", uri=True, timeout=LOCK_PROBE_S,
                               isolation_level=None)
        try:
            conn.execute("PRAGMA schema_version").fetchone()  # reads the header
            conn.execute("BEGIN IMMEDIATE")  # the write lock Sibyl's schema check takes
            conn.execute("ROLLBACK")
        finally:
            conn.close()
    except sqlite3.OperationalError as err:
        if "locked" in str(err) or "busy" in str(err):
            raise ProtocolError(
                ErrorCode.BUSY, f"the store {db} is locked by another process's write "
                f"(held for more than {seconds_text(LOCK_PROBE_S)})", LOCKED_HINT) from None
        raise _unreadable(db, err) from None
    except sqlite3.Error as err:
        raise _unreadable(db, err) from None


def _unreadable(db: str, err: sqlite3.Error) -> ProtocolError:
    """SIBYL_ERROR naming the store: one this user may not open said as that, with how to
    fix it (kint.store_denied), never as a store to move aside."""
    denied = denied_reason(db, err)
    if denied is not None:
        return ProtocolError(ErrorCode.SIBYL_ERROR, denied_message(db, denied), DENIED_HINT)
    return ProtocolError(ErrorCode.SIBYL_ERROR, f"the store {db} cannot be opened: {err}",
                         UNREADABLE_HINT)


def open_client(db: str, tenant: str, kint_home: Path) -> Any:
    """A MemoryClient on `db` for `tenant`, gated by Sibyl's account and cap gates, once
    `probe_store` found the store openable now."""
    from sibyl_memory_client import CapGate, MemoryClient, Storage, TierCache

    probe_store(db)
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
