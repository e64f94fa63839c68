"""The test suite's supervisor launcher: `python run_supervisor.py --home PATH`.

It is kint's own `run_foreground`, with `kint_test_gate`, `kint_test_faults` and
`kint_test_timings` preloaded into the worker forkserver (see those modules). Everything
else is the real supervisor.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kint.supervisor.autostart import run_foreground  # noqa: E402

if __name__ == "__main__":
    home = Path(sys.argv[sys.argv.index("--home") + 1]).absolute()
    sys.exit(run_foreground(home, extra_preload=("kint_test_gate", "kint_test_faults",
                                                 "kint_test_timings")))
