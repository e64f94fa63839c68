"""`python -m kint.demo_supervisor --home PATH`: the supervisor of one `kint demo` sandbox.

It is kint's own supervisor with `kint.demo_gate` preloaded into its workers. It runs only
for a KINT_HOME inside a folder the demo marked as its sandbox, so it can never serve a
person's real memory without Sibyl's account gate.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kint.supervisor.autostart import run_foreground

SANDBOX_MARKER = ".kint-demo-sandbox"


def main() -> int:
    # As given, like kint.supervisor's own entry: a relative path is refused by
    # run_foreground, never made absolute from whatever folder this was started in.
    home = Path(sys.argv[sys.argv.index("--home") + 1])
    if not any((parent / SANDBOX_MARKER).is_file() for parent in home.parents):
        print(f"kint: {home} is not inside a kint demo sandbox", file=sys.stderr)
        return 2
    return run_foreground(home, extra_preload=("kint.demo_gate",))


if __name__ == "__main__":
    sys.exit(main())
