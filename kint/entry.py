"""The `kint` console script's entry point: load the command line, then run it.

A fresh `kint supervisor status` is mostly Python starting, importing ZeroMQ and the
client, and tearing it all down at exit (issue 15 asks for the whole command under
100 ms). So its two plain forms, `kint supervisor status` and `kint supervisor status
--json`, run without click (`kint.commands.supervisor_status`: the same function the
click command calls); every other command line goes to `kint.cli`.

The tens of thousands of objects the imports make live as long as the process, so the
cyclic collector is paused while they load and they are then frozen (`gc.freeze`): no
collection walks them again, the one at exit included. Measured on the two-core box (a
wheel install, interleaved runs): ~20% of a fresh status's CPU time.

Done here, in the process the console script starts, and not in `kint.cli`: a program
that imports kint.cli (the tests, the docs check) keeps its collector as it had it. A
long command run from the console script (`kint supervisor start --foreground`) only
keeps its import-time objects out of collection, objects it keeps anyway.
"""

from __future__ import annotations

import gc
import sys


def main() -> None:
    gc.disable()
    try:
        from kint.commands.supervisor_status import plain_form, run_plain

        as_json = plain_form(sys.argv[1:])
        if as_json is None:
            from kint.cli import main as cli
    finally:
        gc.freeze()
        gc.enable()
    if as_json is not None:
        sys.exit(run_plain(as_json))
    cli()
