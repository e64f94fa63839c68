"""Preloaded into the worker forkserver by the test supervisor (run_supervisor.py): lets a
test kill a worker with SIGKILL at a precise step of a push.

It wraps, inside the worker process only, the functions a push goes through:

- `before_send`:        `Anchor.send_raw`, before the signed transaction is sent;
- `after_send`:         `Anchor.send_raw`, once the endpoint accepted the transaction;
- `after_receipt`:      `Anchor.wait`, once the confirmed receipt is back;
- `after_set_entity`:   Sibyl's `MemoryClient.set_entity`, once one row is written (a pull
                        killed half-way through an epoch's replay);
- `after_mirror_save`:  `record_epoch` as `kint.tenant_worker.pending` imported it, once the
                        epoch is cached, the mirror saved and the watermark raised (the
                        pending file is still there).

Nothing happens unless `KINT_TEST_CRASH_FLAG` (set only by tests) names a file that exists
and whose first word is the step. The worker deletes the file before it kills itself, so
the restarted worker does not crash again. A second word, when given, limits the crash to
the space whose 16 hex characters it is. kint's own code is unchanged; kint reads none of
this.
"""

from __future__ import annotations

import functools
import os
import signal
from typing import Any, Callable

FLAG_ENV = "KINT_TEST_CRASH_FLAG"
STEPS = ("before_send", "after_send", "after_receipt", "after_mirror_save",
         "after_set_entity")


def _crash_if(step: str) -> None:
    path = os.environ.get(FLAG_ENV)
    if not path:
        return
    try:
        with open(path, encoding="utf-8") as fh:
            words = fh.read().split()
    except FileNotFoundError:
        return
    if not words or words[0] != step:
        return
    if len(words) > 1 and words[1] != _space16():
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        return  # another thread or process took it first
    os.kill(os.getpid(), signal.SIGKILL)


def _space16() -> str | None:
    import multiprocess

    proc = multiprocess.current_process()
    name = getattr(proc, "name", "") or ""
    return name[len("kint-worker-"):] if name.startswith("kint-worker-") else None


def _around(fn: Callable[..., Any], before: str | None, after: str | None) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if before:
            _crash_if(before)
        result = fn(*args, **kwargs)
        if after:
            _crash_if(after)
        return result

    wrapper.__kint_test_faults__ = True  # type: ignore[attr-defined]
    return wrapper


def _install() -> None:
    from kint.chain.anchor import Anchor
    from kint.tenant_worker import pending

    if getattr(Anchor.send_raw, "__kint_test_faults__", False):
        return
    Anchor.send_raw = _around(Anchor.send_raw, "before_send", "after_send")  # type: ignore
    Anchor.wait = _around(Anchor.wait, None, "after_receipt")  # type: ignore
    pending.record_epoch = _around(pending.record_epoch, None, "after_mirror_save")
    from sibyl_memory_client import MemoryClient

    MemoryClient.set_entity = _around(MemoryClient.set_entity, None,  # type: ignore
                                      "after_set_entity")


_install()
