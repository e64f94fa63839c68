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

Rows anchored for the tenant are said as what becomes of them, by the rule a pull and a push
go by (changes.store_lost): a store that lost them (another file, or the rows gone without a
trace) gets them back from `kint pull`; one they were forgotten in (memory_forget archived
them) is not restored by a pull, and its next push anchors their deletion.
"""

from __future__ import annotations

import sqlite3
from typing import Callable

from kint.tenant_worker.changes import store_lost
from kint.tenant_worker.statefiles import Mirror
from kint.tenant_worker.store import TIER_TABLES, archived_entities
from kint.tenant_worker.store_errors import StoreUnreadable

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
                mirror: Callable[[], Mirror | None]) -> str | None:
    """The words after verify's `empty_store` reason for an existing store holding no row
    of `tenant`: which tenants it does hold, and what to check. None when the store holds
    some of this tenant's rows, or no tenant's and none are anchored for this one (Sibyl's
    verdict stands as it is: the store is empty), or when it cannot be counted. `mirror`
    reads this tenant's mirror (its anchored rows; None when it has none or cannot be
    read): asked only when the tenant has no row here, so it is read only on the path that
    names it."""
    try:
        counts = searchable_rows_by_tenant(conn)
    except sqlite3.DatabaseError:  # locked or damaged: nothing to say about tenants
        return None
    if counts.get(tenant, 0):
        return None  # this tenant's rows: Sibyl's words are right
    # Largest first: the tenant meant is most likely the one that wrote the most.
    others = sorted(((t, n) for t, n in counts.items() if t != tenant and n),
                    key=lambda tn: (-tn[1], tn[0]))
    anchored = mirror()
    anchored_rows = len(anchored.rows) if anchored is not None else 0
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
    if anchored is not None and anchored_rows:
        why += _anchored_words(conn, db, tenant, anchored)
    return why


def _anchored_words(conn: sqlite3.Connection, db: str, tenant: str, mirror: Mirror) -> str:
    """What becomes of the tenant's anchored rows, none of which this store holds: saying
    `kint pull` restores rows the tenant forgot here would send a user to a pull that
    restores nothing, while the next push anchors their deletion. Empty when the store's
    archive cannot be read (locked by another process, damaged): which of the two it is is
    then not known, and a locked archive read as empty said "`kint pull` restores them" of
    rows the tenant forgot."""
    n = len(mirror.rows)
    try:
        # rows=[]: the tenant holds none in the four tiers kint anchors (counted above).
        lost = store_lost(mirror, [], lambda: archived_entities(conn, tenant, db))
    except StoreUnreadable:
        return ""
    if lost:  # or the store is not the one meant: a space is the tenant, not the store
        return (f"; {n} row(s) anchored for this tenant are on chain (check --db or "
                f"SIBYL_MEMORY_DB; `kint pull` restores them)")
    return (f"; {n} row(s) anchored for this tenant were forgotten here (the next `kint push` "
            f"anchors their deletion)")
