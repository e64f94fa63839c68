"""The supervisor's tunables, read once at start. A bad value is logged and defaulted,
never fatal: a typo in an environment variable must not take every tenant down."""

from __future__ import annotations

from dataclasses import dataclass

from kint.envsettings import env_float


@dataclass(frozen=True)
class Settings:
    heartbeat_timeout_s: float = 10.0  # KINT_WORKER_HEARTBEAT_TIMEOUT
    kill_grace_s: float = 5.0  # SIGTERM to SIGKILL for a hung worker
    idle_s: float = 900.0  # KINT_WORKER_IDLE_SECONDS
    start_timeout_s: float = 30.0  # a worker that never says hello is hung
    stop_grace_s: float = 15.0  # a commanded stop waits this long before SIGKILL
    restart_window_s: float = 60.0
    max_restarts_in_window: int = 5
    backoff_initial_s: float = 30.0  # KINT_QUARANTINE_BACKOFF_SECONDS
    backoff_max_s: float = 600.0
    stable_after_s: float = 60.0  # up this long after a retry: the backoff resets
    tick_s: float = 0.25

    @classmethod
    def from_env(cls) -> "Settings":
        backoff = env_float("KINT_QUARANTINE_BACKOFF_SECONDS", 30.0, 0.1)
        return cls(
            heartbeat_timeout_s=env_float("KINT_WORKER_HEARTBEAT_TIMEOUT", 10.0, 1.0),
            idle_s=env_float("KINT_WORKER_IDLE_SECONDS", 900.0, 1.0),
            backoff_initial_s=backoff,
            backoff_max_s=max(backoff, 600.0),
        )
