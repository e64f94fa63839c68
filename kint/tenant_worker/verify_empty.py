"""Why verify found nothing in a store that exists: the tenant it searched holds no rows there.

Sibyl's `empty_store` verdict says only that the search found no rows. For a store that
does not exist, verify says so (handlers._store_absent); for one that exists, the usual
cause is the tenant: a mistyped `--tenant` or KINT_TENANT, or one that differs from the
agent's, searches a tenant nobody wrote, and the refusal read as if the whole store were
empty, with nothing pointing at the tenant. Here the store's rows are counted per tenant
(one Sibyl store holds many), so the refusal names the tenant searched and the others.
"""

from __future__ import annotations

from typing import Callable

from kint.tenant_worker.store import rows_by_tenant
from kint.tenant_worker.store_errors import StoreUnreadable

# How many other tenants the reason names (their row counts beside them).
NAMED_TENANTS = 3


def no_rows_why(db: str, tenant: str, anchored: Callable[[], int]) -> str | None:
    """The words after verify's `empty_store` reason for an existing store holding no row
    of `tenant`: which tenants it does hold, and what to check. None when the store holds
    some of this tenant's rows, or no tenant's and none are anchored for this one (Sibyl's
    verdict stands as it is: the store is empty), or when it cannot be counted. `anchored`
    counts this tenant's anchored rows (the mirror's): asked only when the tenant has no
    row here, so the mirror is read only on the path that names it."""
    try:
        counts = rows_by_tenant(db)
    except StoreUnreadable:  # denied, locked or damaged: nothing to say about tenants
        return None
    if counts.get(tenant, 0):
        return None  # this tenant's rows: Sibyl's words are right
    others = sorted((t, n) for t, n in counts.items() if t != tenant and n)
    anchored_rows = anchored()
    if not (others or anchored_rows):
        return None  # a store nobody wrote: Sibyl's words are right
    why = f"the store {db} holds no rows of tenant {tenant}"
    if others:
        named = ", ".join(f"{t} ({n} rows)" for t, n in others[:NAMED_TENANTS])
        if len(others) > NAMED_TENANTS:
            named += f" and {len(others) - NAMED_TENANTS} more"
        why += (f"; it holds those of {len(others)} other tenant(s): {named} (check "
                f"--tenant or KINT_TENANT: the tenant picks the rows searched)")
    if anchored_rows:
        why += (f"; {anchored_rows} row(s) anchored for this tenant are on chain (`kint "
                f"pull` restores them)")
    return why
