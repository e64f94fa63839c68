"""kint-server's one MemoryClient, shared with Sibyl's eight tools (docs/how-it-works.md,
"One client").

It is built like the worker's (Sibyl's account gate, kint's cap gate), put into Sibyl's
`_client_cache` with all four keys under Sibyl's own `_client_lock`, so Sibyl's tools find
it fresh and use it, and put there again before any tool call at which Sibyl's server would
build its own (credentials changed under it); no line of Sibyl is patched. Its write
methods are wrapped: once a write has returned, the row is re-read and its leaf noted to
the space's worker, which is how a write through the tools is told from an edit behind
them. Nothing touches the chain inside a Sibyl write.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable

from sibyl_memory_client.exceptions import SibylMemoryError

from kint.agent_server.restore_wait import RESTORE_RUNNING, RestoreUnderWay
from kint.agent_server.session import AgentSession
from kint.client import KintError
from kint.protocol.errors import ProtocolError
from kint.rows.export import connect_ro, read_row
from kint.sibyl_client import close_client, store_file_id

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


# kint-server's own code (beside the supervisor's SUPERVISOR_UNAVAILABLE) for a call refused
# because the store its client had open was deleted under it.
STORE_GONE = "STORE_GONE"
STORE_GONE_HINT = ("call memory_pull: it restores the anchored rows into a new store (what "
                   "was written since the last anchoring went with the deleted file)")
# The tools that still run while the store is gone or being restored: they do not touch
# it, or restore it (a second pull meets the worker's BUSY). Every other (Sibyl's eight,
# memory_verify, memory_push) is refused until it is back.
SERVED_WITHOUT_STORE = frozenset({"memory_status", "memory_pull", "memory_connect",
                                  "memory_history"})
# How long a tool call that needs the store waits for the worker to say what was anchored
# from a deleted one (its status call is bounded at 30 s), before it is refused as gone.
DELETION_CHECK_WAIT_S = 35.0


class _DeletionCheck:
    """The worker being asked what was anchored from a store deleted under the client:
    `message` is what `gone` says meanwhile, `done` is set once the answer is in."""

    def __init__(self, db: str) -> None:
        self.message = (f"the store {db} was deleted while kint-server had it open; asking "
                        f"the worker what was anchored from it")
        self.done = threading.Event()


def _sibyl_files() -> dict[str, Any]:
    """What Sibyl's server keeps beside its cached client, read now: the state of
    credentials.json and entitlement.json whose change makes it build a new client."""
    from sibyl_memory_mcp import server as sibyl_server

    return {"creds_mtime": sibyl_server._credentials_mtime(),
            "creds_path_exists": sibyl_server.DEFAULT_CRED_PATH.exists(),
            "ent_mtime": sibyl_server._entitlement_mtime()}


class SharedClient:
    """Builds kint's client and keeps it in Sibyl's cache, rebuilding it when the store
    file was replaced under it (a `kint pull --discard-local` moves the store aside) or
    Sibyl's credentials changed (`_still_sibyls`), and
    building it on a later call when the store could not be opened before (not a SQLite
    file, locked by another writer: kint.sibyl_client.probe_store; its folder not
    writable). Meanwhile the server serves: kint's tools answer from the worker, and
    Sibyl's tools, finding no client in their cache, try to build their own and say in
    their own words why they cannot.

    A store deleted under an open client is a file SQLite goes on writing into, unlinked:
    every row written there is lost when the process ends, and Sibyl's own tools would
    build a client of their own on a new, empty file, which hides the loss from the next
    pull. So the client is closed at the next tool call, and while rows anchored from the
    store are on chain, that call and every one that needs the store is refused
    (`STORE_GONE`) until memory_pull restores it; with nothing anchored, a new store is made
    as at a first start.

    A restore the pull tool stopped waiting for (`restore`, kint.agent_server.restore_wait)
    keeps the client closed and the same tools refused (`RESTORE_RUNNING`) until it ends;
    its own thread then opens the restored store (`restore_ended`). Every change of the
    client and of `restore` is made under `_lock`, which that thread takes too.

    The worker's answer about a deleted store (a status call, up to 30 s) is waited for
    outside `_lock`, so memory_status, memory_pull and the restore thread are not held
    behind it. Meanwhile `gone` says the check is under way, so no call makes a new store
    over the loss, and the calls that need the store wait for the answer (`_check`)."""

    def __init__(self, db: str, tenant: str, home: Path, session: AgentSession) -> None:
        self.db, self.tenant, self.home, self.session = db, tenant, home, session
        self.client: Any = None
        self._ident: tuple[int, int] | None = None
        self._failed: str | None = None  # the last failure logged, logged once
        # Why the tools that need the store are refused: it was deleted under the client,
        # or a restore the tool call stopped waiting for still runs (restore_wait).
        self.gone: str | None = None
        self.restore: RestoreUnderWay | None = None
        # The last restore that ended after its call answered, for memory_status.
        self.last_restore: RestoreUnderWay | None = None
        # The worker being asked about a deleted store, outside the lock (the class).
        self._check: _DeletionCheck | None = None
        self._lock = threading.RLock()

    def install(self) -> Any:
        from sibyl_memory_mcp import server as sibyl_server

        from kint.sibyl_client import open_client

        Path(self.db).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        client = open_client(self.db, self.tenant, self.home)
        wrap_writes(client, self.session, self.db, self.tenant)
        with sibyl_server._client_lock:
            old = sibyl_server._client_cache.get("client")
            sibyl_server._client_cache.update(client=client, **_sibyl_files())
        if old is not client:
            close_client(old)
        try:
            sibyl_server._lifecycle_start(client)
        except Exception:  # noqa: BLE001 - Sibyl's own lifecycle is not kint's to fail
            pass
        self.client = client
        self._ident = store_file_id(self.db)
        return client

    def close(self) -> None:
        """Close the client and take it out of Sibyl's cache (before a pull moves the store
        aside: an open connection must not hold it). `install` builds a new one."""
        from sibyl_memory_mcp import server as sibyl_server

        with self._lock, sibyl_server._client_lock:
            if sibyl_server._client_cache.get("client") is self.client:
                sibyl_server._client_cache["client"] = None
        close_client(self.client)
        self.client = None

    def before_call(self, tool: str, sibyls: bool) -> dict[str, Any] | None:
        """Run before every tool call: the refusal to answer `tool` with while the store is
        gone, else None (and the client built or rebuilt when it needs to be). `sibyls`:
        whether `tool` is one of Sibyl's, the only calls that read Sibyl's client cache
        (`_still_sibyls`); kint's tools are answered by the worker."""
        self.refresh(sibyls=sibyls)
        check = self._check
        if check is not None and tool not in SERVED_WITHOUT_STORE:
            check.done.wait(DELETION_CHECK_WAIT_S)  # refused as gone if still unanswered
        with self._lock:
            if tool in SERVED_WITHOUT_STORE:
                return None
            if self.restore is not None:
                return {"ok": False, "error": RESTORE_RUNNING,
                        "message": self.restore.message(), "hint": self.restore.hint()}
            if self.gone is None:
                return None
            return {"ok": False, "error": STORE_GONE, "message": self.gone,
                    "hint": STORE_GONE_HINT}

    def follow(self, restore: RestoreUnderWay) -> None:
        """From now until `restore_ended`, the store stays closed for `restore`."""
        with self._lock:
            self.close()  # this server's own connection must not hold the store
            self.restore = restore

    def restore_ended(self, restore: RestoreUnderWay) -> None:
        """`restore` has ended (on its thread, or on the tool call's that waited for it):
        the store it left is opened now."""
        with self._lock:
            if self.restore is restore:
                self.restore = None
                if restore.outlasted_call():  # its own call never said how it ended
                    self.last_restore = restore
            self.refresh()

    def refresh(self, sibyls: bool = True) -> None:
        """Build the client when there is none, or again when the store was replaced; a
        store that cannot be opened now is logged and left for the next call. A store
        deleted under the client closes it (see the class). With `sibyls`, also when
        Sibyl's server would build a client of its own at this call (`_still_sibyls`).
        Nothing is opened while a restore is followed (`restore`)."""
        with self._lock:
            if self.restore is not None:
                return
            check = self._refresh(sibyls)
        if check is not None:
            self._settle_deletion(check, sibyls)

    def _refresh(self, sibyls: bool) -> _DeletionCheck | None:
        """Under `_lock`. The check to run (outside it) when the store was found deleted
        under the client, else None."""
        ident = store_file_id(self.db)
        if self.client is not None:
            if ident == self._ident and (not sibyls or self._still_sibyls()):
                return None
            self.close()
            if ident is None:
                self._check = _DeletionCheck(self.db)
                self.gone = self._check.message
                return self._check
            elif ident != self._ident:
                log.info("the store was replaced (a pull restored it); rebuilding the client")
            else:
                log.info("Sibyl's credentials or entitlement changed; rebuilding the client "
                         "with them")
        if self.gone is not None:
            if ident is None:
                return None
            log.info("the store is back at %s; opening it", self.db)
            self.gone = None
        try:
            self.install()
        except (ProtocolError, sqlite3.Error, SibylMemoryError, OSError) as err:
            message = getattr(err, "message", None) or str(err)
            if message != self._failed:
                self._failed = message
                log.warning("Sibyl's client is not open: %s", message)
            return None
        self._failed = None
        return None

    def _still_sibyls(self) -> bool:
        """Whether Sibyl's tools will use kint's client at this call. Sibyl's server builds
        a client of its own when its cache holds another, or when credentials.json or
        entitlement.json changed since the cached one was put there (`sibyl upgrade`,
        `sibyl init` while the server runs): one that counts only Sibyl's stores against
        the cap and notes no write to the worker, whose next push would then be held over
        the tools' own writes.

        It stats Sibyl's two files (and reads entitlement.json when it changed), ~0.1 ms,
        the very check Sibyl's `_open_client` makes at the same call: asked only before
        Sibyl's tools, whose next step is that check, and never before kint's, which do not
        reach Sibyl's cache (a change meanwhile is found before the next Sibyl call)."""
        from sibyl_memory_mcp import server as sibyl_server

        with sibyl_server._client_lock:
            cache = sibyl_server._client_cache
            return cache.get("client") is self.client and all(
                cache.get(key) == value for key, value in _sibyl_files().items())

    def _settle_deletion(self, check: _DeletionCheck, sibyls: bool) -> None:
        """The store was deleted under the client just closed: ask the worker (without
        `_lock`), then refuse the tools that need it while rows anchored from it are on
        chain (or the worker cannot say), or make a new store when none were. A store that
        came back meanwhile (a restore, a pull) is left as its refresh found it."""
        try:
            anchored = self._anchored()
            with self._lock:
                if self.gone is not check.message:  # settled meanwhile by a refresh
                    return
                if not anchored:
                    log.warning("the store %s was deleted under kint-server; nothing of it "
                                "was anchored: a new store is made, as at a first start",
                                self.db)
                    self.gone = None
                    if self.restore is None:
                        self._refresh(sibyls)
                    return
                rows = (f"{anchored} row(s) anchored from it are on chain" if anchored > 0
                        else "rows anchored from it may be on chain (the worker did not say)")
                self.gone = (f"the store {self.db} was deleted while kint-server had it "
                             f"open; {rows}")
                log.warning("%s: refusing the tools that need it until memory_pull restores "
                            "it", self.gone)
        finally:
            with self._lock:
                if self._check is check:
                    self._check = None
            check.done.set()

    def _anchored(self) -> int | None:
        """How many rows anchored from the store the worker holds in its mirror (None or 0:
        none); -1 when it cannot say."""
        try:
            # The mirror comes with the chain facts (a head read within verify's budget).
            status = self.session.call("status", {"chain": True}, timeout_s=30)
            # A state file the worker cannot read leaves mirror_rows out: unknown, not none.
            anchored = -1 if status.get("state_error") else status.get("mirror_rows")
        except KintError as err:
            log.warning("the store %s was deleted; the worker cannot say what was anchored "
                        "from it (%s)", self.db, err.message)
            return -1
        return anchored
