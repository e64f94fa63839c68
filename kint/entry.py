"""The `kint` console script's entry point: load the command line, then run it.

A fresh `kint supervisor status` is mostly Python starting, importing ZeroMQ and the
client, and tearing it all down at exit (bench/README.md's `bench_cli_start.py` asks for
the whole command under 100 ms). So its two plain forms, `kint supervisor status` and `kint
supervisor status --json`, run without click (`kint.commands.supervisor_status`: the same
function the click command calls); every other command line goes to `kint.cli`.

Its imports run under the start-up step it shares with the supervisor daemon
(kint.startup: the collector paused while they load, their objects frozen after). Done
here, in the process the console script starts, and not in `kint.cli`. A long command run
from the console script (`kint supervisor start --foreground`) only keeps its import-time
objects out of collection, objects it keeps anyway.
"""

from __future__ import annotations

import sys

from kint.startup import imports_frozen


def main() -> None:
    with imports_frozen():
        from kint.commands.supervisor_status import plain_form, run_plain

        as_json = plain_form(sys.argv[1:])
        if as_json is None:
            from kint.cli import main as cli
    if as_json is not None:
        sys.exit(run_plain(as_json))
    cli()
