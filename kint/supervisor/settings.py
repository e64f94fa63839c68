"""The supervisor's tunables: the machine's settings (kint.settings: config.toml, then the
supervisor's environment, then the defaults) and the fixed timings around them. Made again
whenever the config file changes (`Supervisor.check_config`), so a new value applies without
a restart; a bad value is refused by name and the last good one kept (kint.settings.reload).
"""

from __future__ import annotations

from dataclasses import dataclass

from kint import settings as kint_settings


@dataclass(frozen=True)
class Settings:
    heartbeat_timeout_s: float = 10.0  # KINT_WORKER_HEARTBEAT_TIMEOUT
    kill_grace_s: float = 5.0  # SIGTERM to SIGKILL for a hung worker
    idle_s: float = 900.0  # KINT_WORKER_IDLE_SECONDS
    recycle_mib: float = 22.0  # KINT_WORKER_RECYCLE_MIB (USS); 0: never
    recycle_every_s: float = 600.0  # a space's worker is recycled at most this often
    start_timeout_s: float = 30.0  # a worker that never says hello is hung
    stop_grace_s: float = 15.0  # a commanded stop waits this long before SIGKILL
    restart_window_s: float = 60.0
    max_restarts_in_window: int = 5
    backoff_initial_s: float = 30.0  # KINT_QUARANTINE_BACKOFF_SECONDS
    backoff_max_s: float = 600.0
    stable_after_s: float = 60.0  # up this long after a retry: the backoff resets
    tick_s: float = 0.25
    log_max_bytes: int = 262144  # KINT_LOG_MAX_BYTES

    @classmethod
    def load(cls) -> "Settings":
        """The tunables as the machine's settings give them now."""
        backoff = float(kint_settings.value("KINT_QUARANTINE_BACKOFF_SECONDS"))
        return cls(
            heartbeat_timeout_s=float(kint_settings.value("KINT_WORKER_HEARTBEAT_TIMEOUT")),
            idle_s=float(kint_settings.value("KINT_WORKER_IDLE_SECONDS")),
            recycle_mib=float(kint_settings.value("KINT_WORKER_RECYCLE_MIB")),
            backoff_initial_s=backoff,
            backoff_max_s=max(backoff, 600.0),
            log_max_bytes=int(kint_settings.value("KINT_LOG_MAX_BYTES")),
        )


# How long after a SIGKILL at the stop grace a stop still takes to end: the last replies'
# grace, the front socket's linger and the exit (seconds in all), with room for a loaded box.
STOP_END_MARGIN_S = 5.0
# The most a running stop takes: a worker still in its op at the stop grace is SIGKILLed
# (kint/supervisor/lifecycle.py) and the stop ends within the margin. A pause of the
# supervisor's own (stopped, or starved over a second) gives a stopping worker's grace whole
# again (workers.grace_over), so a paused stop takes longer. A client that has seen a stop
# for longer says it has not stopped, with `kill -KILL` (kint/supervisor/autostart.py): a
# stop past it waits on a worker stuck past its own 10 s grace; before, a healthy stop may
# still end by itself.
STOP_BOUND_S = Settings.stop_grace_s + STOP_END_MARGIN_S
