"""Diagnostic only: preloaded into the worker forkserver by `run_supervisor_probed.py`.
Nothing of kint changes on disk; the wrapping lives only in the processes of a benchmark's
own supervisor, and only for what these variables ask:

- KINT_BENCH_TIMING=<file>: the worker's `verify` handler and its request runner
  (`Worker._run`: the handler and the reply it makes) are timed, and one
  line per verify request is appended: `<handler ms> <run ms>`.
- KINT_BENCH_PROFILE_DIR=<folder> with KINT_BENCH_PROFILE_OPS=<op,op>: each request of
  those ops runs under cProfile, dumped to `<folder>/<op>-<pid>-<n>.prof`.
- KINT_BENCH_MEMORY=<file>: after each request, one JSON line: the op, the worker's
  smaps_rollup (kB), the modules imported since the fork, the garbage collector's counts
  and frozen objects, and (with KINT_BENCH_TRACEMALLOC=1, tracing from the fork on) the
  largest allocation sites alive.

The headline figures are never measured through this launcher (they use
tests/support/run_supervisor.py); it only shows where time goes inside the worker.
"""

from __future__ import annotations

import cProfile
import itertools
import os
import threading
import time

_TIMING = os.environ.get("KINT_BENCH_TIMING")
_MEMORY = os.environ.get("KINT_BENCH_MEMORY")
_PROFILE_DIR = os.environ.get("KINT_BENCH_PROFILE_DIR")
_PROFILE_OPS = {op for op in os.environ.get("KINT_BENCH_PROFILE_OPS", "").split(",") if op}
_local = threading.local()
_lock = threading.Lock()
_count = itertools.count(1)


def _timed_verify() -> None:
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
            if request.op == "verify" and _local.handler_ms is not None:
                with _lock, open(_TIMING, "a") as fh:
                    fh.write(f"{_local.handler_ms:.4f} {took:.4f}\n")

    handlers.HANDLERS["verify"] = verify
    process.Worker._run = run


def _profiled(op: str) -> None:
    from kint.tenant_worker import handlers

    original = handlers.HANDLERS[op]

    def handler(ctx, args):  # noqa: ANN001, ANN202
        prof = cProfile.Profile()
        try:
            return prof.runcall(original, ctx, args)
        finally:
            prof.dump_stats(os.path.join(_PROFILE_DIR, f"{op}-{os.getpid()}-{next(_count)}.prof"))

    handlers.HANDLERS[op] = handler


def _memory_after_each_request() -> None:
    import gc
    import json
    import sys

    from kint.tenant_worker import process

    preloaded = set(sys.modules)
    original_run = process.Worker._run
    original_init = process.Worker.__init__
    tracing = os.environ.get("KINT_BENCH_TRACEMALLOC") == "1"

    def init(self, *args, **kwargs):  # noqa: ANN001, ANN202 - runs in the worker, after the fork
        if tracing:
            import tracemalloc

            tracemalloc.start(8)
        original_init(self, *args, **kwargs)

    def run(self, request):  # noqa: ANN001, ANN202
        try:
            return original_run(self, request)
        finally:
            rollup = {}
            with open("/proc/self/smaps_rollup") as fh:
                for line in fh.readlines()[1:]:
                    key, _, rest = line.partition(":")
                    rollup[key.strip()] = int(rest.split()[0])
            row = {"op": request.op, "pid": os.getpid(), "rollup_kb": rollup,
                   "new_modules": sorted(set(sys.modules) - preloaded),
                   "gc_count": gc.get_count(), "gc_frozen": gc.get_freeze_count(),
                   "threads": threading.active_count()}
            if tracing:
                import tracemalloc

                stats = tracemalloc.take_snapshot().statistics("traceback")
                row["traced_kb"] = tracemalloc.get_traced_memory()[0] // 1024
                row["top"] = [{"kb": st.size // 1024, "n": st.count,
                               "where": [f"{f.filename}:{f.lineno}" for f in st.traceback][:4]}
                              for st in stats[:25]]
            with _lock, open(_MEMORY, "a") as fh:
                fh.write(json.dumps(row) + "\n")

    process.Worker.__init__ = init
    process.Worker._run = run


if _TIMING:
    _timed_verify()
if _MEMORY:
    _memory_after_each_request()
if _PROFILE_DIR:
    for _op in sorted(_PROFILE_OPS):
        _profiled(_op)
