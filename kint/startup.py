"""The start-up step both of kint's process entries share: the `kint` console script
(kint.entry) and the supervisor daemon (`python -m kint.supervisor`, kint/supervisor/
__main__.py).

The tens of thousands of objects the imports make live as long as the process, so the
cyclic collector is paused while they load and they are then frozen (`gc.freeze`): no
collection walks them again, the one at exit included. Measured on the two-core box (a
wheel install, interleaved runs): ~20% of a fresh `kint supervisor status`'s CPU time; in
the daemon, which runs for days, every full collection it makes skips them.

Only an entry point does this, never a module that is imported: a program that imports
kint.cli or the supervisor (the tests, the docs check) keeps its collector as it had it.
What a process allocates after its start-up is collected as before.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

from kint import crypto_backend


@contextmanager
def imports_frozen() -> Iterator[None]:
    """Run the entry's imports inside: the collector is off while they load, and whatever
    they made is frozen at the end (also when an import fails, before the error goes on).
    The process is claimed as kint's own first (kint.crypto_backend): pycryptodome, if
    it loads, then runs through ctypes."""
    crypto_backend.claim()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
