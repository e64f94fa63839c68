"""The `kint` console script's entry point: load the command line, then run it.

A fresh `kint supervisor status` is mostly Python starting, importing click, ZeroMQ and
the client, and tearing it all down at exit (issue 15 asks for the whole command under
100 ms). The tens of thousands of objects those imports make live as long as the process,
so the cyclic collector is paused while they load and they are then frozen (`gc.freeze`):
no collection walks them again, the one at exit included. Measured on the two-core box
(a wheel install, interleaved runs): ~20% of a fresh status's CPU time.

Done here, in the process the console script starts, and not in `kint.cli`: a program
that imports kint.cli (the tests, the docs check) keeps its collector as it had it. A
long command run from the console script (`kint supervisor start --foreground`) only
keeps its import-time objects out of collection, objects it keeps anyway.
"""

from __future__ import annotations

import gc


def main() -> None:
    gc.disable()
    try:
        from kint.cli import main as cli
    finally:
        gc.freeze()
        gc.enable()
    cli()
