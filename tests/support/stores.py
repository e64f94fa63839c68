"""Real Sibyl stores for the tests, written and read through Sibyl's own client.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from sibyl_memory_client import MemoryClient
from sibyl_memory_client import testing as sibyl_testing

from kint.spaces import SIBYL_DEFAULT_TENANT

TENANT = SIBYL_DEFAULT_TENANT


def sibyl_client(db: Path, tenant: str = TENANT) -> MemoryClient:
    """Sibyl's own client on `db`, as an agent's tools would hold it (NullEntitlementGate:
    Sibyl's test support, passed in code; the test process has no Sibyl account)."""
    return MemoryClient.local(str(db), tenant_id=tenant,
                              entitlement_gate=sibyl_testing.NullEntitlementGate())


def dated_back(db: str | Path, seconds: float = 60.0) -> None:
    """A store's files (the database and what SQLite keeps beside it) dated `seconds` back:
    a worker keeps its counts only for a store whose files are older than a clock tick's
    doubt (kint.tenant_worker.store.SETTLED_AFTER_NS), so a test that means a status
    answered from kept counts dates a store it has just written."""
    for path in (Path(db), Path(f"{db}-wal"), Path(f"{db}-shm")):
        if path.exists():
            then = time.time() - seconds
            os.utime(path, (then, then))


def write_rules(db: Path, tenant: str, **rules: str) -> None:
    """Rules (entities in category `rules`, body {"rule": ...}) written into `db` for
    `tenant` through Sibyl's own client."""
    client = sibyl_client(db, tenant)
    try:
        for name, rule in rules.items():
            client.set_entity("rules", name, {"rule": rule})
    finally:
        client.storage.close()



def write_store(db: Path, rows: dict[str, Any] | None = None, tenant: str = TENANT) -> Path:
    """A real Sibyl store, written through Sibyl's own client. The account gate is Sibyl's
    NullEntitlementGate (its test support, passed in code): these tests are not about the
    account gate, and no credentials exist in the sandbox."""
    client = MemoryClient.local(str(db), tenant_id=tenant,
                                entitlement_gate=sibyl_testing.NullEntitlementGate())
    for name, body in (rows or {"release-gate": {"rule": "never ship on a Friday"}}).items():
        client.set_entity("rules", name, body)
    client.write_event(acted=["wrote the rules"])
    client.storage.close()
    return db
