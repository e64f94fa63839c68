"""What the tests that act as another user (`nobody`) run that user's side with.

The suite usually runs as root, whom no mode bit stops, so a test of what another user may
not do runs a probe as `nobody`. It cannot use the venv's python: that lives under root's
0700 home. A system python3 serves; one of this interpreter's own version (major.minor)
also loads the venv's compiled packages (pyzmq, ...) from its site-packages on PYTHONPATH,
which a probe that imports kint needs.
"""

from __future__ import annotations

import os
import subprocess
import sys

_CANDIDATES = ("/usr/bin/python3", "/usr/local/bin/python3")


def _version_of(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    major, minor = out.stdout.split() if out.returncode == 0 else (None, None)
    return (int(major), int(minor)) if major is not None else None


# Any system python3: enough for a probe of the standard library alone.
SYSTEM_PYTHON = next((p for p in _CANDIDATES if os.access(p, os.X_OK)), None)

# A system python3 of this interpreter's version: for a probe that imports kint.
SYSTEM_PYTHON_LIKE_THIS = next(
    (p for p in _CANDIDATES
     if os.access(p, os.X_OK) and _version_of(p) == tuple(sys.version_info[:2])), None)
