"""Reading kint's numeric settings from the environment, one way everywhere: a value that
is not a number is logged and the default used, a value below the minimum is raised to it.
A typo in a variable must never take a tenant down."""

from __future__ import annotations

import logging
import os

log = logging.getLogger("kint")


def env_float(name: str, default: float, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        log.warning("%s=%r is not a number; using %s", name, raw, default)
        return default
    if minimum is not None and value < minimum:
        log.warning("%s=%s is below %s; using %s", name, raw, minimum, minimum)
        return minimum
    return value


def pid_alive(pid: int) -> bool:
    """True while a process with this pid exists (it may be another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
