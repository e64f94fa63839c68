"""kint-server's one MemoryClient, shared with Sibyl's eight tools (seed 001, "One client").

It is built like the worker's (Sibyl's account gate, kint's cap gate), put into Sibyl's
`_client_cache` with all four keys under Sibyl's own `_client_lock`, so Sibyl's tools find
it fresh and use it; no line of Sibyl is patched. Its write methods are wrapped: once a
write has returned, the row is re-read and its leaf noted to the space's worker, which is
how a write through the tools is told from an edit behind them. Nothing touches the chain
inside a Sibyl write.
"""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any, Callable

from sibyl_memory_client.exceptions import SibylMemoryError

from kint.agent_server.session import AgentSession
from kint.protocol.errors import ProtocolError
from kint.rows.export import connect_ro, read_row
from kint.sibyl_client import close_client

log = logging.getLogger("kint.server")


def _leaf(db: str, tenant: str, tier: str, category: str | None, key: str) -> str | None:
    conn = connect_ro(db)
    try:
        row = read_row(conn, tenant, tier, category, key)
    finally:
        conn.close()
    return row.leaf.hex() if row is not None else None


def wrap_writes(client: Any, session: AgentSession, db: str, tenant: str) -> None:
    """Note the leaf of every row the tools write, after the write returned."""

    def wrap(name: str, identity: Callable[..., tuple[str, str | None, str]]) -> None:
        original = getattr(client, name)

        @functools.wraps(original)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            try:
                tier, category, key = identity(*args, **kwargs)
                session.note_write(tier, category, key, _leaf(db, tenant, tier, category, key))
            except Exception:  # noqa: BLE001 - a note must never fail the write it follows
                log.exception("could not note a %s write", name)
            return result

        setattr(client, name, wrapped)

    wrap("set_entity", lambda category, name, *a, **k: ("entity", category, name))
    wrap("archive_entity", lambda category, name, *a, **k: ("entity", category, name))
    wrap("delete_entity", lambda category, name, *a, **k: ("entity", category, name))
    wrap("set_state", lambda key, *a, **k: ("state", None, key))
    wrap("set_reference", lambda key, *a, **k: ("reference", None, key))


class SharedClient:
    """Builds kint's client and keeps it in Sibyl's cache, rebuilding it when the store
    file was replaced under it (a `kint pull --discard-local` moves the store aside), and
    building it on a later call when the store could not be opened before (not a SQLite
    file, locked by another writer: kint.sibyl_client.probe_store; its folder not
    writable). Meanwhile the server
    serves: kint's tools answer from the worker, and Sibyl's tools, finding no client in
    their cache, try to build their own and say in their own words why they cannot."""

    def __init__(self, db: str, tenant: str, home: Path, session: AgentSession) -> None:
        self.db, self.tenant, self.home, self.session = db, tenant, home, session
        self.client: Any = None
        self._inode: int | None = None
        self._failed: str | None = None  # the last failure logged, logged once

    def _store_inode(self) -> int | None:
        try:
            return os.stat(self.db).st_ino
        except FileNotFoundError:
            return None

    def install(self) -> Any:
        from sibyl_memory_mcp import server as sibyl_server

        from kint.sibyl_client import open_client

        Path(self.db).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        client = open_client(self.db, self.tenant, self.home)
        wrap_writes(client, self.session, self.db, self.tenant)
        with sibyl_server._client_lock:
            old = sibyl_server._client_cache.get("client")
            sibyl_server._client_cache["client"] = client
            sibyl_server._client_cache["creds_mtime"] = sibyl_server._credentials_mtime()
            sibyl_server._client_cache["creds_path_exists"] = \
                sibyl_server.DEFAULT_CRED_PATH.exists()
            sibyl_server._client_cache["ent_mtime"] = sibyl_server._entitlement_mtime()
        if old is not client:
            close_client(old)
        try:
            sibyl_server._lifecycle_start(client)
        except Exception:  # noqa: BLE001 - Sibyl's own lifecycle is not kint's to fail
            pass
        self.client = client
        self._inode = self._store_inode()
        return client

    def close(self) -> None:
        """Close the client and take it out of Sibyl's cache (before a pull moves the store
        aside: an open connection must not hold it). `install` builds a new one."""
        from sibyl_memory_mcp import server as sibyl_server

        with sibyl_server._client_lock:
            if sibyl_server._client_cache.get("client") is self.client:
                sibyl_server._client_cache["client"] = None
        close_client(self.client)
        self.client = None

    def refresh(self) -> None:
        """Build the client when there is none, or again when the store was replaced; a
        store that cannot be opened now is logged and left for the next call."""
        inode = self._store_inode()
        if self.client is not None and (inode is None or inode == self._inode):
            return
        if self.client is not None:
            log.info("the store was replaced (a pull restored it); rebuilding the client")
        try:
            self.install()
        except (ProtocolError, sqlite3.Error, SibylMemoryError, OSError) as err:
            message = getattr(err, "message", None) or str(err)
            if message != self._failed:
                self._failed = message
                log.warning("Sibyl's client is not open: %s", message)
            return
        self._failed = None
