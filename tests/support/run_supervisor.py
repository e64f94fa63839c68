"""The test suite's supervisor launcher: `python run_supervisor.py --home PATH`.

It is kint's own `run_foreground`, with `kint_test_gate`, `kint_test_faults`,
`kint_test_timings` and `kint_test_trace` preloaded into the worker forkserver (see those
modules), and the supervisor's side of `kint_test_timings` installed here. Everything else
is the real supervisor, but for one hold and one fault:

- `KINT_TEST_HOLD_DOOR`: while the file it names exists, a door closing for the stop
  (`write_note` as kint.supervisor.front_door_stop imported it) waits, its note written
  and its socket file not yet moved aside, having first created `<file>.reached` (at most
  HOLD_MAX_S): the moment between the two, which a client's look can meet.

And one fault: `KINT_TEST_FAIL_LINK` set, the stop's door's `os.link` (its link back of
a successor's socket file it moved aside, kint.supervisor.front_door_stop) fails as on a
full disk (ENOSPC), which a test cannot have for real without mounting a filesystem; set
to `rename` too, so does its rename of that file back from its aside name.
"""

import errno
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kint_test_timings  # noqa: E402
from kint.front_closed import CLOSED_SOCKET, FrontClosed  # noqa: E402
from kint.supervisor import front_door_stop  # noqa: E402
from kint.supervisor.autostart import run_foreground  # noqa: E402

HOLD_DOOR_ENV = "KINT_TEST_HOLD_DOOR"
HOLD_MAX_S = 120.0
FAIL_LINK_ENV = "KINT_TEST_FAIL_LINK"


def hold_door(hold: str) -> None:
    """The stop's door held between its note and its socket file's move (`HOLD_DOOR_ENV`)."""
    write_note = front_door_stop.write_note

    def held_write_note(folder: Path, closed: FrontClosed) -> None:
        write_note(folder, closed)
        if closed.stopping and os.path.exists(hold):
            Path(hold + ".reached").touch()
            deadline = time.monotonic() + HOLD_MAX_S
            while os.path.exists(hold) and time.monotonic() < deadline:
                time.sleep(0.01)

    front_door_stop.write_note = held_write_note  # type: ignore[assignment]


class _LinkFails:
    """The `os` front_door_stop sees, its `link` (and, `rename` in `fails`, its rename
    back from the aside name) failing as on a full disk."""

    def __init__(self, fails: str) -> None:
        self.fails = fails

    def __getattr__(self, name: str):
        return getattr(os, name)

    @staticmethod
    def link(src, dst, **_kw) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))

    def rename(self, src, dst, **kw) -> None:
        if "rename" in self.fails and str(src).endswith(CLOSED_SOCKET):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        os.rename(src, dst, **kw)


if __name__ == "__main__":
    home = Path(sys.argv[sys.argv.index("--home") + 1]).absolute()
    kint_test_timings.install_supervisor()
    if os.environ.get(HOLD_DOOR_ENV):
        hold_door(os.environ[HOLD_DOOR_ENV])
    if os.environ.get(FAIL_LINK_ENV):
        front_door_stop.os = _LinkFails(os.environ[FAIL_LINK_ENV])  # type: ignore[assignment]
    sys.exit(run_foreground(home, extra_preload=("kint_test_gate", "kint_test_faults",
                                                 "kint_test_timings", "kint_test_trace")))
