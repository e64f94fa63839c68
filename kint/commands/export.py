"""`kint export`: the four tiers Sibyl's SDK writes, for the caller's tenant, one JSON object a
line, read-only.

A debug tool: it prints plaintext memory. It reads the store through a `mode=ro` connection
(kint.rows.export, the same reader push, pull and verify use), so the text it prints is
exactly what kint hashes into each row's leaf. Order: entity, state, reference, journal,
each tier in rowid order. It needs no supervisor and touches no chain.
"""

from __future__ import annotations

import os
import sqlite3
import sys

import click
import orjson

from kint.commands.common import Ctx, refuse, resolve_space
from kint.protocol import ErrorCode
from kint.rows.export import connect_ro, export_rows
from kint.store_denied import DENIED_HINT, denied_message, denied_reason
from kint.tenant_worker.store_errors import is_locked


@click.command("export", short_help="The tenant's rows as JSON lines (read-only, plaintext).")
@click.pass_obj
def export_cmd(obj: Ctx) -> None:
    """Print the tenant's rows (entity, state, reference, journal; rowid order within each)
    as one JSON object per line: tier, category, key, the stored columns and the leaf.
    Read-only; the output is plaintext memory."""
    ref = resolve_space(obj)
    denied = denied_reason(ref.db)  # first: in a folder it may not search, it reads as absent
    if denied is not None:
        refuse(ErrorCode.SIBYL_ERROR, denied_message(ref.db, denied), DENIED_HINT)
    if not os.path.exists(ref.db):
        refuse(ErrorCode.BAD_REQUEST, f"store {ref.db} does not exist",
               "check --db or SIBYL_MEMORY_DB (Sibyl creates the store on its first write)")
    try:
        conn = connect_ro(ref.db)
        try:
            rows = export_rows(conn, ref.tenant)
        finally:
            conn.close()
    except sqlite3.Error as err:
        if is_locked(err):  # a store that is fine, only taken: not one to check
            refuse(ErrorCode.BUSY, f"the store {ref.db} is locked by another process ({err})",
                   "run kint export again once the other writer lets go of the store")
        # Sibyl's store, unreadable as it stands (unreadable by this user, not Sibyl's
        # schema): nothing was changed, Sibyl's own tool says what it holds.
        refuse(ErrorCode.SIBYL_ERROR, f"store {ref.db} cannot be read: {err}",
               "check that this user can read it and that it is Sibyl's store (`sibyl "
               "status`), then run kint export again")
    out = sys.stdout.buffer
    for row in rows:
        line = {"tier": row.tier, "category": row.category, "key": row.key, **row.fields,
                "leaf": row.leaf.hex()}
        out.write(orjson.dumps(line) + b"\n")
    out.flush()
