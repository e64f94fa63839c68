"""`python -m kint.supervisor --home PATH`: the daemon process that `kint supervisor
start` and on-demand starts launch. Its imports run under the start-up step the `kint`
console script takes too (kint.startup): the daemon keeps them for its whole life."""

import argparse
import sys
from pathlib import Path

from kint.startup import imports_frozen


def main() -> int:
    with imports_frozen():
        from kint.supervisor.autostart import run_foreground
    parser = argparse.ArgumentParser(prog="kint.supervisor")
    parser.add_argument("--home", required=True, type=Path)
    args = parser.parse_args()
    # As given: the daemon runs in /, where a relative path would name another folder;
    # run_foreground refuses one.
    return run_foreground(args.home, daemon=True)


if __name__ == "__main__":
    sys.exit(main())
