"""Which way pycryptodome reaches its C code in kint's own processes: through ctypes.

pycryptodome calls its compiled code through cffi when cffi imports (cryptography installs
it beside kint), else through ctypes: both are its own supported ways. Through cffi, its
first import parses every C declaration it uses with pycparser, which ctypes never does.
Measured on the two-core box (bench/RESULTS.md, session 40): ~45 ms more CPU for the
first hash of a fresh `kint push` or `kint connect`, and 0.1-0.2 s more for each worker
forkserver's preload; a hash itself costs the same within a few percent either way.

Only kint's own processes choose (`claim`, called by each entry as it starts: the `kint`
script, kint-server, the supervisor daemon and its worker forkserver). The choice hides
cffi from imports while pycryptodome loads, which nothing else of a kint process imports;
in a program that imports kint (Hermes loading kint's plugin, the tests) another thread
could, so there pycryptodome is left to choose as it always does.
"""

from __future__ import annotations

import importlib
import sys

_claimed = False


def claim() -> None:
    """Mark this process as one of kint's own: pycryptodome, once `load` imports it, runs
    through ctypes. Importing nothing here keeps a command that never hashes as fast."""
    global _claimed
    _claimed = True


def load() -> None:
    """Import pycryptodome's bridge to its C code (Crypto.Util._raw_api): through ctypes in
    a process that `claim`ed it, as pycryptodome chooses anywhere else. A bridge already
    imported stays as it is: pycryptodome keeps one per process."""
    if not _claimed or "Crypto.Util._raw_api" in sys.modules:
        return
    held = sys.modules.get("cffi")
    sys.modules["cffi"] = None  # type: ignore[assignment]  # `import cffi` fails meanwhile
    try:
        importlib.import_module("Crypto.Util._raw_api")
    finally:
        if held is None:
            del sys.modules["cffi"]
        else:
            sys.modules["cffi"] = held
