"""`python run_supervisor_preloading.py --home PATH --preload a,b`: kint's own supervisor
(`run_foreground`) with the modules named preloaded into its worker forkserver, as the test
suite and `kint demo` preload theirs, for tests/test_forkserver_warm_up.py."""

import sys
from pathlib import Path

from kint.supervisor.autostart import run_foreground

if __name__ == "__main__":
    home = Path(sys.argv[sys.argv.index("--home") + 1]).absolute()
    preload = tuple(sys.argv[sys.argv.index("--preload") + 1].split(","))
    sys.exit(run_foreground(home, extra_preload=preload))
