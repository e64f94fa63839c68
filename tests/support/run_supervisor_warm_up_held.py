"""`python run_supervisor_warm_up_held.py --home PATH`: kint's own supervisor
(`run_foreground`) whose worker forkserver's warm-up waits, before it opens anything, for
the file named by KINT_TEST_WARM_UP_HOLD to exist (at most a minute, so a test that fails
never leaves it waiting). The warm-up then opens its descriptors (the forkserver, its
pipes, the first child) when the test lets it go, with a crowd of clients already in: what
a crowd that arrives as a supervisor starts meets on a loaded box, where the warm-up's
thread gets its turn late. For tests/test_many_clients.py."""

import os
import sys
import time
from pathlib import Path

from kint.supervisor import spawner
from kint.supervisor.autostart import run_foreground

_check_preload = spawner.Spawner._check_preload


def _held_check_preload(self: spawner.Spawner) -> list[str]:
    hold = os.environ.get("KINT_TEST_WARM_UP_HOLD")
    deadline = time.monotonic() + 60
    while hold and not os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _check_preload(self)


if __name__ == "__main__":
    spawner.Spawner._check_preload = _held_check_preload  # type: ignore[method-assign]
    home = Path(sys.argv[sys.argv.index("--home") + 1]).absolute()
    sys.exit(run_foreground(home))
