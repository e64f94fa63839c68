"""Diagnostic launcher: what tests/support/run_supervisor.py runs (kint's own
`run_foreground` with the test gate preloaded), plus `bench_worker_probe` (timers or
cProfile inside the worker, see that module). Never used for headline figures.
Needs PYTHONPATH=<repo>/tests/support:<repo>/bench/support (the forkserver imports its
preload by name).
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "tests" / "support"))

from kint.supervisor.autostart import run_foreground  # noqa: E402

if __name__ == "__main__":
    home = Path(sys.argv[sys.argv.index("--home") + 1]).absolute()
    sys.exit(run_foreground(home, extra_preload=("kint_test_gate", "bench_worker_probe")))
