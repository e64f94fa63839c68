"""Diagnostic launcher: tests/support/run_supervisor.py (kint's own `run_foreground` with
the test gate preloaded) plus `bench_worker_timing`, which times the worker's verify
handler. Used only for the verify benchmark's overhead split, never for its headline
figures. Needs PYTHONPATH=<repo>/tests/support:<repo>/bench/support and KINT_BENCH_TIMING.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "tests" / "support"))

from kint.supervisor.autostart import run_foreground  # noqa: E402

if __name__ == "__main__":
    home = Path(sys.argv[sys.argv.index("--home") + 1]).absolute()
    sys.exit(run_foreground(home, extra_preload=("kint_test_gate", "bench_worker_timing")))
