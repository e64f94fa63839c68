"""The settings a space runs with, as `SpaceContext` answers for them: a watcher timing
from the live kint-server sessions that gave one, the chain's endpoints and contract as
the chain config resolves them. The half of `kint.tenant_worker.space.SpaceContext` that
reads settings, kept apart from the store, the chain and the keys it owns, and the names
of the settings a session leaves for the watcher.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kint import settings
from kint.protocol import ProtocolError
from kint.settings.schema import STRICT
from kint.settings.wire import Kept

if TYPE_CHECKING:
    from kint.chain.config import ChainConfig

WATCHER_SETTINGS = ("KINT_QUIET_SECONDS", "KINT_POLL_SECONDS", "KINT_SIZE_TRIGGER_BYTES",
                    "KINT_PUSH_RETRY_SECONDS")
# The call-scope settings a push reads, which no call carries to the watcher's pushes: a
# session's attach leaves them for those pushes, as v0.3.0's kint-server pushed with its
# own environment's. KINT_KEY_TTL renews the data key (a harness's `30d` is not cut to the
# space's 24 h); KINT_RPC_TIMEOUT bounds each chain read and KINT_NONCE_RETRY_SECONDS a
# stuck transaction's wait (a supervisor a kint-server starts on demand takes neither:
# autostart leaves every call-scope setting out of it).
PUSH_SETTINGS = ("KINT_KEY_TTL", "KINT_RPC_TIMEOUT", "KINT_NONCE_RETRY_SECONDS")
# What a kint-server session's attach leaves for the watcher: its timings and PUSH_SETTINGS.
SESSION_SETTINGS = WATCHER_SETTINGS + PUSH_SETTINGS
CHAIN_SETTINGS = STRICT


class SpaceSettings:
    """A mixin of `SpaceContext`: the settings it answers for. `SpaceContext` owns the
    sessions, what they sent on attach, the watcher and the chain; these read them."""

    # SpaceContext's own, declared for the type checker.
    sessions: dict[str, float]
    session_settings: dict[str, tuple[float, dict[str, Any]]]
    watching: set[str]
    watcher: Any

    if TYPE_CHECKING:
        def live_sessions(self) -> int: ...

        def chain(self) -> ChainConfig: ...

    def watcher_setting(self, name: str, running: "settings.Value | None" = None
                        ) -> "settings.Value":
        """A watcher timing: the newest live session's that asked for the watcher (its
        kint-server's environment, sent on attach), else this space's settings. A
        KINT_NO_WATCHER=1 session's are for no watcher: attached last, it set the timings
        and push settings of a watcher another session asked for."""
        kept = self.kept_settings(name, watching=True)
        if kept:
            return kept[0]
        return running if running is not None else settings.lookup(name)

    def kept_settings(self, name: str, watching: bool | None = None
                      ) -> list["settings.Value"]:
        """The values of `name` the live sessions gave when they attached, the newest
        first; with `watching`, only those of the sessions that did (True) or did not
        (False) ask for the watcher."""
        self.live_sessions()  # forget sessions that went away without a word
        found = [(first, values[name])
                 for sid, (first, values) in list(self.session_settings.items())
                 if sid in self.sessions and name in values
                 and (watching is None or (sid in self.watching) == watching)]
        found.sort(key=lambda pair: pair[0], reverse=True)
        return [value for _, value in found]

    def effective_setting(self, name: str, running: "settings.Value") -> "settings.Value":
        """What this space really runs with, for a report (`kint config show`): the chain's
        endpoints and contract as the chain config resolves them, the watcher's timings as
        it runs. With no watcher running, the space's own timings (`running`): a
        KINT_NO_WATCHER=1 kint-server's values are kept all the same (`session_settings`),
        and were shown as the timings in force while nothing ran on them
        (push_settings.kept_value says them beside the row instead)."""
        if name in WATCHER_SETTINGS:
            return self.watcher_setting(name, running) if self.watcher is not None else running
        return self.chain_setting(name, running)

    def compared_setting(self, name: str, running: "settings.Value"
                         ) -> "settings.Value | Kept":
        """What a caller's value of `name` is compared with (handlers.with_settings), where
        `effective_setting` differs in one thing: a watcher timing KINT_NO_WATCHER=1
        sessions gave is compared with each of their kept values too (`Kept`, beside the
        watcher's when one runs). Such a kint-server sends its environment's on every call,
        and compared with the space's own or the watcher's it would be told on each that
        they are not used and to set them in the harness's configuration, where they
        already are; compared with the newest session's alone, an older such session was
        told so on each, and any other caller that the space "runs with" a value nothing
        ran on."""
        if name in WATCHER_SETTINGS:
            watcher = self.watcher_setting(name, running) if self.watcher is not None else None
            kept = self.kept_settings(name, watching=False)
            if not kept:
                return watcher or running
            return Kept(tuple(kept), watcher)
        return self.chain_setting(name, running)

    def chain_setting(self, name: str, running: "settings.Value") -> "settings.Value":
        """`running` as the space runs with it: for the chain's endpoints and contract, as
        the chain config resolves them (`running` when it cannot be read now)."""
        if name not in CHAIN_SETTINGS:
            return running
        try:
            chain = self.chain()
        except ProtocolError:
            return running
        if name == "KINT_CONTRACT":
            return settings.Value(running.setting, chain.anchor, chain.contract_source,
                                  chain.contract_where)
        index = 0 if name == "KINT_RPC_URL" else 1
        url = chain.rpc_urls[index] if len(chain.rpc_urls) > index else None
        if name == "KINT_RPC_URL_2":
            # Set somewhere: as it is; else it follows the primary (or there is none).
            return running if running.source != settings.DEFAULT else settings.Value(
                running.setting, url, settings.DEFAULT)
        return settings.Value(running.setting, url, chain.rpc_source, chain.rpc_where)
