"""Whether a worker's log says it read a stop message, as tests wait for it.

The worker logs its first stop as `stop requested (REASON)` and one that comes once it is
stopping already (an idle stop begun first, say) as `stop requested again (REASON): ...`
(kint/tenant_worker/process.py). A wait for the first's literal words misses the second,
and would wait out its timeout although the stop was read.
"""

from __future__ import annotations


def stop_read(log_text: str, reason: str = "stop") -> bool:
    """Whether `log_text` has the worker's line for a stop of `reason`, first or again."""
    return (f"stop requested ({reason})" in log_text
            or f"stop requested again ({reason})" in log_text)
