"""What a worker is told when it is spawned: which space it owns and where everything is."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


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

    @property
    def space16(self) -> str:
        return self.space_id[:16]

    @property
    def home(self) -> Path:
        return Path(self.kint_home)
