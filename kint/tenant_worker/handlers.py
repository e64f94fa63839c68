"""The worker's ops: one function per op name, each taking the space's context and the
request's validated arguments and returning the reply's result.

A handler raises `ProtocolError` to refuse with a code; anything else it raises is a bug
and becomes INTERNAL (logged with its traceback, never sent to the client).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kint.paths import space_files
from kint.protocol import ErrorCode, ProtocolError
from kint.rows.export import connect_ro
from kint.tenant_worker import history as history_mod
from kint.tenant_worker.chain_head import HeadSource, NotConnected, read_head
from kint.tenant_worker.config import WorkerConfig
from kint.tenant_worker.statefiles import CorruptStateFile, SpaceState
from kint.tenant_worker.store import StoreReader, StoreUnreadable
from kint.tenant_worker.verify import verify as run_verify

log = logging.getLogger("kint.worker")

# How long verify's own head read may wait (KINT_VERIFY_HEAD_SECONDS).
VERIFY_HEAD_SECONDS = 2.0


@dataclass
class SpaceContext:
    """What every handler of one space shares. Lives as long as the worker process."""

    config: WorkerConfig
    store: StoreReader
    started_monotonic: float = field(default_factory=time.monotonic)
    head_source: HeadSource = field(default_factory=NotConnected)
    _state: SpaceState | None = None
    _client: Any = None
    _client_lock: threading.Lock = field(default_factory=threading.Lock)
    _local: threading.local = field(default_factory=threading.local)

    @property
    def state(self) -> SpaceState:
        if self._state is None:
            self._state = SpaceState(self.config.home, self.config.space_id)
        return self._state

    def client(self) -> Any:
        """The space's MemoryClient, built on first need (never at start: a status call
        must not wait on it, and a store that does not exist must not be created by one)."""
        with self._client_lock:
            if self._client is None:
                from kint.tenant_worker.sibyl_client import open_client

                self._client = open_client(self.config.db, self.config.tenant,
                                           self.config.home)
            return self._client

    def ro_connection(self) -> sqlite3.Connection:
        """This thread's read-only connection to the store."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = connect_ro(self.config.db)
            except sqlite3.Error as err:
                raise ProtocolError(ErrorCode.INTERNAL,
                                    f"store {self.config.db} cannot be opened: {err}") from None
            self._local.conn = conn
        return conn


Handler = Callable[[SpaceContext, dict[str, Any]], dict[str, Any]]


def status(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    """The space's tenant, label, id, store, row counts per tier, and its KINT_HOME files."""
    cfg = ctx.config
    try:
        facts = ctx.store.facts()
    except StoreUnreadable as err:
        raise ProtocolError(ErrorCode.INTERNAL, str(err),
                            "check the store file; kint only reads it") from None
    files: dict[str, Any] = {}
    for name, path in space_files(cfg.home, cfg.space16).items():
        if name == "epochs":
            try:
                files[name] = sum(1 for entry in os.scandir(path) if entry.name.endswith(".bin"))
            except FileNotFoundError:
                files[name] = 0
        else:
            files[name] = path.exists()
    return {
        "tenant": cfg.tenant,
        "space": cfg.space16,
        "space_id": cfg.space_id,
        "label": cfg.label,
        "store": {"path": cfg.db, "exists": facts.exists, "size_bytes": facts.size_bytes},
        "rows": facts.rows,
        "kint_home": cfg.kint_home,
        "files": files,
        "worker": {"pid": os.getpid(),
                   "uptime_s": round(time.monotonic() - ctx.started_monotonic, 3)},
    }


def verify(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    """Seed 000's verify: proceed, or refuse with the evidence."""
    if not os.path.exists(ctx.config.db):
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"store {ctx.config.db} does not exist",
                            "check --db or SIBYL_MEMORY_DB")
    head = read_head(ctx.head_source, VERIFY_HEAD_SECONDS)
    if head.unavailable:
        log.info("verify: chain head unavailable (%s); verifying against the local mirror only",
                 head.unavailable)
    return run_verify(client=ctx.client(), conn=ctx.ro_connection(), tenant=ctx.config.tenant,
                      state=ctx.state, query=args["query"], limit=args.get("limit") or 5,
                      head=head, write_refusal=args.get("write", True) is not False)


def history(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    """Every anchored version of one row, or the one live at `block`."""
    tier = args["tier"]
    if tier not in ("entity", "state", "reference"):
        raise ProtocolError(ErrorCode.BAD_REQUEST,
                            f"tier must be entity, state or reference, not {tier!r}")
    try:
        entries = history_mod.versions(ctx.state, tier, args["key"], args.get("category"))
    except CorruptStateFile as err:
        raise ProtocolError(ErrorCode.INTERNAL,
                            f"kint's state file {err.path} {err.why}; nothing was rewritten",
                            "move the file aside and run `kint pull` to fetch the epoch "
                            "again") from None
    if args.get("block") is not None:
        return {"at_block": args["block"], "version": history_mod.at_block(entries, args["block"])}
    return {"versions": entries, "count": len(entries)}


HANDLERS: dict[str, Handler] = {
    "status": status,
    "verify": verify,
    "history": history,
}
