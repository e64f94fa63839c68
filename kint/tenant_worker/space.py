"""`SpaceContext`: what every op of one space shares, for the life of the worker process.

It owns the space's state files, its Sibyl client (built on first need), a read-only
connection per thread, the chain settings and RPC tracker, and the keys once unlocked
(the session key costs one scrypt unlock, done once per keystore file and never per
request: a `kint session-key rotate` while the worker runs is noticed by the file's
identity, and the new key unlocked on its next use). The settings it runs with (a watcher
timing a session gave, the chain's endpoints as resolved) are read in space_settings.py.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
import contextlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from kint import settings
from kint.chain.config import ChainConfig, ChainConfigError, load_chain_config
from kint.chain.rpc import RpcTracker
from kint.paths import FileSignature, file_signature
from kint.protocol import ErrorCode, ProtocolError
from kint.rows.canon import Row
from kint.rows.export import connect_ro, export_rows
from kint.sibyl_client import store_file_id
from kint.store_denied import DENIED_HINT, denied_message, denied_reason
from kint.tenant_worker.chain_head import HeadSource, NotConnected
from kint.tenant_worker.config import SESSION_TTL_S, WorkerConfig
from kint.tenant_worker.drift import DriftBaseline
from kint.tenant_worker.enrolled_chain import other_chain
from kint.tenant_worker.enrolment import Enrolment, load_enrolment
from kint.tenant_worker.head_lock import HeadTurn
from kint.tenant_worker.shared_client import SpaceClient
from kint.tenant_worker.space_settings import SpaceSettings
from kint.tenant_worker.state_health import corrupt_error
from kint.tenant_worker.statefiles import CorruptStateFile, SpaceState
from kint.tenant_worker.store import StoreReader
from kint.tenant_worker.store_errors import sqlite_code
from kint.tenant_worker.store_readers import StoreReaders
from kint.tenant_worker.unanchored import UnanchoredTally

log = logging.getLogger("kint.worker")


@dataclass
class SpaceContext(SpaceSettings):
    config: WorkerConfig
    store: StoreReader
    started_monotonic: float = field(default_factory=time.monotonic)
    # This worker's pid, asked once (status reports it on every call).
    pid: int = field(default_factory=os.getpid)
    tracker: RpcTracker = field(default_factory=RpcTracker)
    # Serialises this worker's head-moving ops (push, pull, connect, rekey): a second gets
    # BUSY; one that comes during the start settlement waits for it (head_lock.HeadTurn).
    head_ops: HeadTurn = field(default_factory=HeadTurn)
    # Set once this space is connected: the watcher then says why it cannot count.
    enrolment_checked: bool = False
    # The last reason verify could not read the head (logged once per change).
    last_head_unavailable: str | None = None
    # What a long op is doing now ("pull: epoch 3 of 10"), for the heartbeat.
    progress: str | None = None
    # The head-moving op running now and when it began (monotonic), beside its progress
    # line in the heartbeat: the supervisor shows a line until the next beat, so a client
    # tells the line of the op it asked for from the last one of an op before it.
    head_op_began: tuple[str, float] | None = None
    # The agent sessions over this store (id -> last seen), the drift baseline of their
    # writes, and the one watcher of the space.
    sessions: dict[str, float] = field(default_factory=dict)
    # The sessions that said goodbye (detach, exit_push): id -> when. An attach of one of
    # them is not taken back: it was sent before the goodbye and ran after it (attach and
    # detach run on the op pool), and would count a gone server until SESSION_TTL_S.
    ended_sessions: dict[str, float] = field(default_factory=dict)
    # Guards `sessions`, `session_settings` and `ended_sessions` (attach, detach,
    # keepalive, the heartbeat).
    sessions_lock: threading.Lock = field(default_factory=threading.Lock)
    # The watcher's timings each session sent when it first attached (its kint-server's
    # environment): id -> (first attach, values). The newest live session's win.
    session_settings: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)
    # The sessions that asked for the watcher: only theirs run it (`watcher_setting`).
    watching: set[str] = field(default_factory=set)
    drift: DriftBaseline = field(default_factory=DriftBaseline)
    watcher: Any = None
    # Asks the worker's loop for a beat now, from any thread (the worker sets it: work
    # that ends with no request or answer, the watcher's push, says so at once).
    beat_soon: Callable[[], None] = field(default=lambda: None, repr=False)
    # The last unanchored count an op made, which the heartbeat carries, and why each
    # counter last could not count (unanchored.py).
    unanchored: UnanchoredTally = field(default_factory=UnanchoredTally)
    # The endpoints the last chain() returned: a change forgets the old ones' failures, and
    # the heartbeat names the endpoint a call waits on by its place among them.
    _endpoints: tuple[str, ...] | None = None
    _state: SpaceState | None = None
    # The space's Sibyl client, never closed under an op using it (shared_client.py).
    _shared: SpaceClient = field(init=False)
    # Every thread's read-only connection to the store (`reading`).
    readers: StoreReaders = field(init=False)
    _session: Any = None
    # The keystore file `_session` was unlocked from, by its signature.
    _session_file: FileSignature | None = None
    _session_lock: threading.Lock = field(default_factory=threading.Lock)
    # Verify's head reads: one Anchor per chain configuration (endpoints, contract, head
    # budget), kept so its HTTP connections are reused from one verify to the next.
    _head_anchor: tuple[Any, Any] | None = None

    def __post_init__(self) -> None:
        self.readers = StoreReaders(self._connect_ro)
        self._shared = SpaceClient(self.config.db, self.config.tenant, self.config.home)

    @property
    def verify_head_seconds(self) -> float:
        """verify's (and status's) bound on the chain head read, read at each call: a config
        reload changes it for the next read."""
        return settings.value("KINT_VERIFY_HEAD_SECONDS")

    @property
    def state(self) -> SpaceState:
        if self._state is None:
            self._state = SpaceState(self.config.home, self.config.space_id)
        return self._state

    # -- Sibyl -------------------------------------------------------------------------

    def client(self, store: tuple[int, int] | None = None) -> Any:
        """The space's MemoryClient, built on first need (never at start: a status call
        must not wait on it, and a store that does not exist must not be created by one),
        and again when the store file is no longer the one it was built on: deleted or
        replaced under it, SQLite would go on writing into the old file, unlinked, and
        every row written there (a pull's replay, a refusal's write-back) would be lost.
        `store`: the store file's identity as the caller read it for this request (one
        stat for both in a verify, not one each); None: read it here. Called within
        `using_client`, which keeps it open until the block ends."""
        return self._shared.get(store)

    def using_client(self) -> contextlib.AbstractContextManager[None]:
        """A block in which the client stays open: a discard waits for it to end, and one
        in progress is waited for before it begins (shared_client.py)."""
        return self._shared.using()

    @contextmanager
    def store_released(self, what: str) -> Iterator[None]:
        """No client open, and every read-only connection no thread is reading through
        closed, for the block (a pull that moves the store aside; it builds a new client
        after); ops that would use the client wait for its end. BUSY naming `what` when
        an op holds the client past shared_client.RELEASE_WAIT_S."""
        with self._shared.released(what):
            busy = self.readers.close_idle()
            if busy:
                log.info("space %s: %d read-only connection(s) to the store are in use by "
                         "other ops and stay open", self.config.space16, busy)
            yield

    def reset_client(self) -> None:
        """`store_released` for a moment: the client and the idle connections closed."""
        with self.store_released("pull --discard-local"):
            pass

    @contextmanager
    def reading(self, store: tuple[int, int] | None = None) -> Iterator[sqlite3.Connection]:
        """This thread's read-only connection to the store (kint.tenant_worker.store_readers),
        reopened when the store file was replaced (a pull with --discard-local moves it
        aside), for the block's length. `store` as for `client`. One this user may not open
        is said as that (kint.store_denied), as `store_rows` says it, never as a fault in
        kint."""
        with self.readers.reading(store or store_file_id(self.config.db)) as conn:
            yield conn

    def _connect_ro(self) -> sqlite3.Connection:
        try:
            return connect_ro(self.config.db)
        except sqlite3.Error as err:
            db = self.config.db
            denied = denied_reason(db, err)
            if denied is not None:
                raise ProtocolError(ErrorCode.SIBYL_ERROR, denied_message(db, denied),
                                    DENIED_HINT) from None
            raise ProtocolError(ErrorCode.INTERNAL, f"store {db} cannot be opened: "
                                f"{err}{sqlite_code(err)}") from None

    def store_rows(self) -> list[Row] | None:
        """The store's rows, read through this thread's read-only connection, or None when
        the store does not exist yet (Sibyl creates it on its first write; a read-only open
        would fail where the caller means "no rows", or "refuse", as push does). A store
        this user may not open is refused first (kint.store_denied): in a folder it may not
        search it would read as not created yet, and with its file closed as damaged."""
        db = self.config.db
        denied = denied_reason(db)
        if denied is not None:
            raise ProtocolError(ErrorCode.SIBYL_ERROR, denied_message(db, denied), DENIED_HINT)
        if not os.path.exists(db):
            return None
        with self.reading() as conn:
            return export_rows(conn, self.config.tenant)

    # -- chain and keys ----------------------------------------------------------------

    def chain(self) -> ChainConfig:
        """The chain settings in force for this space and this call (Base mainnet unless a
        devchain or a setting says otherwise), with this space's own endpoints when it has
        them. New endpoints (the config file changed) start with a clean record."""
        try:
            enrolment = self.enrolment()
        except CorruptStateFile:
            enrolment = None  # every op that needs the enrolment refuses it by name
        try:
            config = load_chain_config(self.config.home,
                                       enrolment.rpc_urls if enrolment is not None else None)
        except ChainConfigError as err:
            raise ProtocolError(ErrorCode(err.code), str(err), err.hint) from None
        if config.rpc_urls != self._endpoints:
            self.tracker.use(config.rpc_urls, changed=self._endpoints is not None)
            self._endpoints = config.rpc_urls
        return config

    @property
    def endpoints(self) -> tuple[str, ...] | None:
        """The space's endpoints as its last chain settings named them (None before any):
        read by the heartbeat, which reads no file."""
        return self._endpoints

    def session_lapses_at(self) -> float | None:
        """When (monotonic) the attached session seen longest ago is forgotten by
        `live_sessions`, if none is seen again before; None without sessions."""
        with self.sessions_lock:
            oldest = min(self.sessions.values(), default=None)
        return None if oldest is None else oldest + SESSION_TTL_S

    def live_sessions(self) -> int:
        """How many agent sessions are attached, after forgetting those not seen for
        SESSION_TTL_S (a kint-server killed without a detach), so the worker can go idle."""
        now = time.monotonic()
        with self.sessions_lock:
            for sid in [s for s, seen in self.sessions.items() if now - seen > SESSION_TTL_S]:
                del self.sessions[sid]
            for sid in [s for s in self.session_settings if s not in self.sessions]:
                del self.session_settings[sid]
            self.watching &= self.sessions.keys()
            for sid in [s for s, at in self.ended_sessions.items() if now - at > SESSION_TTL_S]:
                del self.ended_sessions[sid]
            return len(self.sessions)

    def enrolment(self) -> Enrolment | None:
        return load_enrolment(self.state.files["enrol"])

    def seen_here(self) -> int:
        """The highest epoch of this space this machine has anchored or pulled (its mirror's
        head, its watermark), 0 for none: what a refusal to read another chain or contract
        says of the one the space was connected on, and what lets connect move the
        enrolment off it (on a 0). A file that does not read, while the other shows no
        epoch, is raised (CorruptStateFile: CORRUPT_STATE naming it), never counted as
        none: it may be the one that held the epochs. With the other showing some, that
        one says how far this machine got."""
        seen, unread = 0, None
        for read, seq_of in ((self.state.mirror, lambda m: m.head.seq),
                             (self.state.watermark, lambda w: w.seq)):
            try:
                found = read()
            except CorruptStateFile as err:
                unread = unread or err
                continue
            seen = max(seen, seq_of(found) if found is not None else 0)
        if unread is not None and seen == 0:
            raise unread
        return seen

    def head_source(self) -> HeadSource:
        from kint.tenant_worker.chain_head import ChainHeadSource, RefusedChain

        enrolment = self.enrolment()
        if enrolment is None:
            return NotConnected()
        try:
            chain = self.chain()
        except ProtocolError as err:  # refused when read (not under KINT_OFFLINE=1)
            return RefusedChain(err)
        try:
            elsewhere = other_chain(enrolment, chain, self.seen_here)
        except CorruptStateFile as err:  # on another chain, with the files to say so unread
            return RefusedChain(corrupt_error(err))
        if elsewhere is not None:  # another chain's head says nothing of this space's
            return RefusedChain(elsewhere)
        return ChainHeadSource(chain, self.tracker, self.head_anchor, enrolment.owner,
                               self.config.space_id)

    def head_anchor(self, chain: ChainConfig) -> Any:
        """The Anchor verify reads the head through, for `chain` (with its head budget as
        the RPC timeout). A new Anchor per verify was a new web3 provider, a new HTTP
        session and a new TCP connection each time, and memory the worker kept growing (the
        many-tenants bench, bench/README.md); it is made again only when the configuration
        changes. web3 keeps one session per thread, so pool threads can share it."""
        from kint.chain.anchor import Anchor

        kept = self._head_anchor
        if kept is not None and kept[0] == chain:
            return kept[1]
        anchor = Anchor(chain, self.tracker)
        self._head_anchor = (chain, anchor)
        return anchor

    def session_account(self) -> Any:
        """This machine's session key, unlocked once per keystore file (one scrypt at a
        time machine-wide, inside `unlock_session_key`). NO_SESSION_KEY when it cannot be.

        Why the file is looked at on every use: `kint session-key rotate` renames a new
        keystore over session.key while the worker runs, and the owner then authorizes the
        new key and may revoke the old one. A key kept for the worker's life went on
        signing with the old one (NotAuthorized once revoked) until a restart. One stat per
        use is cheap; the unlock (~1 s of scrypt) runs again only when the file's identity
        (paths.file_signature) changed."""
        from kint.custody.errors import CustodyError
        from kint.custody.session_key import session_key_path, unlock_session_key
        from kint.tenant_worker.custody_errors import as_protocol_error

        try:  # through a symlink, as the keystore is read
            seen = file_signature(session_key_path(self.config.home))
        except OSError:  # not to be seen: the unlock below says why
            seen = None
        with self._session_lock:
            if self._session is None or seen is None or seen != self._session_file:
                self._session, self._session_file = None, None
                try:
                    self._session = unlock_session_key(self.config.home)
                except CustodyError as err:
                    raise as_protocol_error(err) from None
                # Read before the unlock: a file replaced during it is unlocked again at
                # the next use, never kept under the new file's identity.
                self._session_file = seen
            return self._session
