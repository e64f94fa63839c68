"""A Hermes memory-provider plugin: Sibyl's own Hermes adapter, unchanged, with kint noting
every write its provider makes (kint.hermes). `kint setup hermes` installs it into every
profile as `kint-sibyl` and selects it where Sibyl's adapter was (deploy/hermes/README.md);
Hermes imports this package from its own Python, so kint must be installed there."""

from __future__ import annotations

import logging
from typing import Any

from sibyl_memory_hermes._hermes_plugin.adapter import SibylAdapter

from kint.hermes import watch_provider

log = logging.getLogger("kint.hermes")


class KintSibylAdapter(SibylAdapter):
    """Sibyl's adapter; after it initializes its provider, kint watches that provider."""

    def __init__(self) -> None:
        super().__init__()
        self._kint: Any = None

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        # Called again without shutdown(), Sibyl's adapter makes a new provider: the old
        # session says goodbye first, or its keepalive would keep it attached (its watcher
        # on, counted by the worker) for as long as Hermes runs.
        self._let_go()
        super().initialize(session_id, **kwargs)
        if self._sibyl is not None and self._db_path is not None:
            self._kint = watch_provider(self._sibyl, self._db_path)

    def shutdown(self) -> None:
        try:
            super().shutdown()
        finally:
            self._let_go()

    def _let_go(self) -> None:
        if self._kint is not None:
            self._kint.close()
            self._kint = None


def register(ctx: Any) -> None:
    """Hermes' plugin entry point."""
    ctx.register_memory_provider(KintSibylAdapter())
