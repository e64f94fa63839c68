"""The worker's ops: one function per op name, each taking the space's context and the
request's validated arguments and returning the reply's result.

A handler raises `ProtocolError` to refuse with a code; anything else it raises is a bug
and becomes INTERNAL (logged with its traceback, never sent to the client).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable

from kint.paths import space_files
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker import history as history_mod
from kint.tenant_worker.chain_head import read_head
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import CorruptStateFile
from kint.tenant_worker.store import StoreUnreadable
from kint.tenant_worker.verify import verify as run_verify

log = logging.getLogger("kint.worker")



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
    head = read_head(ctx.head_source(), ctx.verify_head_seconds)
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


def connect(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    from kint.tenant_worker.connect import connect as run

    return run(ctx, args)


def push(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    from kint.tenant_worker.push import push as run

    return run(ctx, args)


def pull(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    from kint.tenant_worker.pull import pull as run

    return run(ctx, args)


HANDLERS: dict[str, Handler] = {
    "status": status,
    "verify": verify,
    "history": history,
    "connect": connect,
    "push": push,
    "pull": pull,
}
