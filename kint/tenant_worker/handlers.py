"""The worker's ops: one function per op name, each taking the space's context and the
request's validated arguments and returning the reply's result.

A handler raises `ProtocolError` to refuse with a code; anything else it raises is a bug
and becomes INTERNAL (logged with its traceback, never sent to the client).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kint.paths import space_files
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.config import WorkerConfig
from kint.tenant_worker.store import StoreReader, StoreUnreadable


@dataclass
class SpaceContext:
    """What every handler of one space shares. Lives as long as the worker process."""

    config: WorkerConfig
    store: StoreReader
    started_monotonic: float = field(default_factory=time.monotonic)


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


HANDLERS: dict[str, Handler] = {
    "status": status,
}
