"""`python run_supervisor_start_held.py --home PATH`: kint's own supervisor, as
`kint supervisor start --foreground` runs it (`run_foreground`), held in its start: once it
holds the pid lock and its file names it, and before it hands the stop signals to the
supervisor it built (autostart._serve), it prints `held` and waits for its stdin to close.
A test sends it a stop signal there, at an event and not after a guessed time: where a
service manager's stop or a Ctrl-C lands in a start's first moments. For
tests/test_pid_lock_stopped.py."""

import sys
from collections.abc import Iterable
from pathlib import Path

from kint.supervisor import tighten
from kint.supervisor.autostart import run_foreground

_tighten_home = tighten.tighten_home


def _held_tighten_home(home: Path, stores: Iterable[Path] = ()) -> int:
    """The step of the start just before its signal handlers: held until stdin closes."""
    print("held", flush=True)
    sys.stdin.read()
    return _tighten_home(home, stores)


if __name__ == "__main__":
    tighten.tighten_home = _held_tighten_home
    home = Path(sys.argv[sys.argv.index("--home") + 1]).absolute()
    sys.exit(run_foreground(home, refuse_beside_running=True))
