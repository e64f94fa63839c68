"""kint under Hermes (docs/harnesses.md, deploy/hermes/README.md): the Hermes provider
writes to its profile's store itself (journal events per turn, mirrored entities), so its
client's write methods are wrapped the way kint-server wraps its own: each write's leaf is
noted to the profile's space worker, and Hermes' own writes never hold a push.

Each Hermes profile store is a space of its own (`<tenant>@hermes:<profile>`), so several
profiles give several spaces and several workers. Use it through the Hermes plugin in
`kint/hermes_plugin/` (see deploy/hermes/README.md), or call `watch_provider` yourself on a
`sibyl_memory_hermes.SibylMemoryProvider`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from kint import spaces
from kint.agent_server.session import AgentSession
from kint.agent_server.wrapped_client import wrap_writes
from kint.paths import kint_home

log = logging.getLogger("kint.hermes")


def watch_provider(provider: Any, db_path: str | Path, *, home: Path | None = None,
                   watcher: bool = True) -> AgentSession:
    """Note every write `provider`'s client makes to the space of `db_path`, and attach a
    session to that space's worker (which starts its watcher; an attach that fails now is
    tried again in the background). Returns the session; call
    its `close()` when the provider shuts down (one exit push, finished by the worker)."""
    ref = spaces.resolve(provider.tenant_id, db_path)
    session = AgentSession(ref, home or kint_home())
    session.watcher = watcher
    wrap_writes(provider.client, session, ref.db, ref.tenant)
    try:
        session.attach()
    except Exception as err:  # noqa: BLE001 - never crash the agent over kint
        log.warning("kint: could not attach to space %s: %s; trying again in the background",
                    ref.space16, err)
    log.info("kint: watching Hermes store %s as space %s (%s)", ref.db, ref.space16, ref.label)
    return session
