"""What a worker is told when it is spawned: which space it owns and where everything is."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# A session (kint-server) not seen for this long is forgotten: it was killed without a
# word. Also how long what a worker or a supervisor hands to its successor stays takeable
# (kint.tenant_worker.session_handoff, kint.supervisor.succession): here, where both the
# worker and the supervisor (which imports no more of the worker than this) can read it.
SESSION_TTL_S = 180.0


@dataclass(frozen=True)
class WorkerConfig:
    space_id: str
    label: str
    tenant: str
    db: str
    kint_home: str
    back_address: str
    supervisor_pid: int
    # How often this worker beats once idle (worker_wire.idle_beat_seconds of the
    # supervisor's heartbeat timeout when it was spawned).
    idle_beat_s: float
    threads: int = 4
    # A random id the supervisor drew at its start: a pid can come back after a restart,
    # this does not (what a worker leaves its successor is taken only under the same one).
    supervisor_run: str = ""
    # The run id of the supervisor this one took over from on an upgrade (empty when it
    # started from nothing: a first start, a crash, a stop on command): what that
    # supervisor's workers handed over is taken too (kint.supervisor.succession).
    predecessor_run: str = ""

    @property
    def space16(self) -> str:
        return self.space_id[:16]

    @property
    def home(self) -> Path:
        return Path(self.kint_home)
