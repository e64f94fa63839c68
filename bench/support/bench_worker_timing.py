"""Diagnostic only: preloaded into the worker forkserver by `run_supervisor_timed.py`, it
wraps the worker's `verify` handler and its request runner (`Worker._run`: decode, handler,
encode, hand-off to the main thread) with timers and appends one line per request to the
file named by KINT_BENCH_TIMING:

    <handler ms> <run ms>

Nothing of kint is changed on disk; the wrapping exists only in the processes of a
benchmark's own supervisor, and only when KINT_BENCH_TIMING is set. The headline figures
are measured without it (tests/support/run_supervisor.py); this pass only splits the
routed overhead into worker-side and transport parts.
"""

from __future__ import annotations

import os
import threading
import time

_PATH = os.environ.get("KINT_BENCH_TIMING")
_local = threading.local()
_lock = threading.Lock()


def _install() -> None:
    from kint.tenant_worker import handlers, process

    original_verify = handlers.HANDLERS["verify"]
    original_run = process.Worker._run

    def verify(ctx, args):  # noqa: ANN001, ANN202
        t0 = time.perf_counter_ns()
        try:
            return original_verify(ctx, args)
        finally:
            _local.handler_ms = (time.perf_counter_ns() - t0) / 1e6

    def run(self, request):  # noqa: ANN001, ANN202
        _local.handler_ms = None
        t0 = time.perf_counter_ns()
        try:
            return original_run(self, request)
        finally:
            took = (time.perf_counter_ns() - t0) / 1e6
            if request.get("op") == "verify" and _local.handler_ms is not None:
                with _lock, open(_PATH, "a") as fh:
                    fh.write(f"{_local.handler_ms:.4f} {took:.4f}\n")

    handlers.HANDLERS["verify"] = verify
    process.Worker._run = run


if _PATH:
    _install()
