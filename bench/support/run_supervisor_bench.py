"""The benchmarks' supervisor launcher: kint's own `run_foreground` with only the test
gate preloaded into the worker forkserver (tests/support/kint_test_gate.py: Sibyl's
NullEntitlementGate with KINT_TEST_GATE=null, so no account is needed).

The test suite's launcher (tests/support/run_supervisor.py) also preloads
`kint_test_faults`, whose hooks wrap the reply encoder and the push's steps to crash a
worker on a flag file; each reply then pays for an environment lookup no user's worker
makes. No benchmark sets that flag, so a benchmark measures the supervisor a user runs.
BENCH_WORKER_NICE (bench/nice_ab.py's A/B) also preloads bench_worker_nice.py.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "tests" / "support"))

from kint.supervisor.autostart import run_foreground  # noqa: E402

if __name__ == "__main__":
    home = Path(sys.argv[sys.argv.index("--home") + 1]).absolute()
    # By its dotted name: the forkserver finds its preload on PYTHONPATH (the checkout).
    nice = (("bench.support.bench_worker_nice",) if os.environ.get("BENCH_WORKER_NICE")
            else ())
    sys.exit(run_foreground(home, extra_preload=("kint_test_gate", *nice)))
