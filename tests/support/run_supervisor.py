"""The test suite's supervisor launcher: `python run_supervisor.py --home PATH`.

It is kint's own `run_foreground`, with `kint_test_gate`, `kint_test_faults`,
`kint_test_timings` and `kint_test_trace` preloaded into the worker forkserver (see those
modules), and the supervisor's side of `kint_test_timings` installed here. Everything else
is the real supervisor.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kint_test_timings  # noqa: E402
from kint.supervisor.autostart import run_foreground  # noqa: E402

if __name__ == "__main__":
    home = Path(sys.argv[sys.argv.index("--home") + 1]).absolute()
    kint_test_timings.install_supervisor()
    sys.exit(run_foreground(home, extra_preload=("kint_test_gate", "kint_test_faults",
                                                 "kint_test_timings", "kint_test_trace")))
