"""Why verify found nothing in a store that exists: the tenant it searched holds no rows there.

Sibyl's `empty_store` verdict says only that the search found no rows. For a store that
does not exist, verify says so (handlers._store_absent); for one that exists, the usual
cause is the tenant: a mistyped `--tenant` or KINT_TENANT, or one that differs from the
agent's, searches a tenant nobody wrote, and the refusal read as if the whole store were
empty, with nothing pointing at the tenant. Here the store's rows are counted per tenant
(one Sibyl store holds many), so the refusal names the tenant searched and the others.

Only the tables Sibyl's `empty_store` covers are counted: the four a search reaches
(sibyl_memory_client.verdicts `_SEARCHABLE_TABLES`, which are kint's TIER_TABLES; a test
holds them equal). A tenant with only relations, archives or error events is one Sibyl
calls empty, and such rows are no memory to name another tenant by.
"""

from __future__ import annotations

import sqlite3
from typing import Callable

from kint.tenant_worker.store import TIER_TABLES

# How many other tenants the reason names, largest first (their row counts beside them).
NAMED_TENANTS = 3


def searchable_rows_by_tenant(conn: sqlite3.Connection) -> dict[str, int]:
    """Every tenant's rows in the tables a Sibyl search reaches, read through `conn` (the
    verify's own connection, so the file Sibyl searched); a table the store lacks holds
    none."""
    present = {name for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    counts: dict[str, int] = {}
    for table in TIER_TABLES.values():
        if table not in present:
            continue
        for tenant, n in conn.execute(
                f"SELECT tenant_id, count(*) FROM {table} GROUP BY tenant_id"):
            counts[str(tenant)] = counts.get(str(tenant), 0) + int(n)
    return counts


def no_rows_why(conn: sqlite3.Connection, db: str, tenant: str,
                anchored: Callable[[], int]) -> str | None:
    """The words after verify's `empty_store` reason for an existing store holding no row
    of `tenant`: which tenants it does hold, and what to check. None when the store holds
    some of this tenant's rows, or no tenant's and none are anchored for this one (Sibyl's
    verdict stands as it is: the store is empty), or when it cannot be counted. `anchored`
    counts this tenant's anchored rows (the mirror's): asked only when the tenant has no
    row here, so the mirror is read only on the path that names it."""
    try:
        counts = searchable_rows_by_tenant(conn)
    except sqlite3.DatabaseError:  # locked or damaged: nothing to say about tenants
        return None
    if counts.get(tenant, 0):
        return None  # this tenant's rows: Sibyl's words are right
    # Largest first: the tenant meant is most likely the one that wrote the most.
    others = sorted(((t, n) for t, n in counts.items() if t != tenant and n),
                    key=lambda tn: (-tn[1], tn[0]))
    anchored_rows = anchored()
    if not (others or anchored_rows):
        return None  # a store nobody wrote: Sibyl's words are right
    why = f"the store {db} holds no rows of tenant {tenant}"
    if others:
        named = ", ".join(f"{t} ({n} rows)" for t, n in others[:NAMED_TENANTS])
        if len(others) > NAMED_TENANTS:
            named += f" and {len(others) - NAMED_TENANTS} more"
        why += (f"; it holds those of {len(others)} other tenant(s): {named} (the tenant "
                f"searched is mistyped, or has written nothing yet: --tenant or KINT_TENANT "
                f"picks it)")
    if anchored_rows:
        why += (f"; {anchored_rows} row(s) anchored for this tenant are on chain (`kint "
                f"pull` restores them)")
    return why
