"""Noticing that kint was upgraded under a running supervisor.

The supervisor and its workers hold kint's modules in memory, but import some lazily (an
op's module on its first request). After `pip install -U kint`, such an import would load
the new version's file into an old process, and an op could fail in ways no test sees. So
the supervisor fingerprints a few of kint's installed files when it starts and looks again
every few seconds. When they changed, it lets the requests in flight finish, stops its
workers and exits with EXIT_UPGRADED: the next call starts the new version, and systemd or
launchd (which restart a non-zero exit, see deploy/) restart a managed one. The workers
are stopped for an "upgrade", not a "stop": they hand their agent sessions over, and the
supervisor names its run id to the next one (kint/supervisor/succession.py), which takes
them up, so the sessions go on across the upgrade as across a recycle.
"""

from __future__ import annotations

import os
from pathlib import Path

import kint

# EX_TEMPFAIL: "start me again". A commanded stop still exits 0 and stays stopped.
EXIT_UPGRADED = 75

# Files every release rewrites: the package, and the modules of the long-lived processes.
_WATCHED = ("__init__.py", "supervisor/daemon.py", "tenant_worker/process.py",
            "protocol/envelope.py")

Signature = tuple[tuple[str, int | None, int | None, int | None], ...]


def code_signature(root: Path | None = None) -> Signature:
    """(file, inode, size, mtime) of each watched file: an install writes new files."""
    base = root or Path(kint.__file__).parent
    out = []
    for rel in _WATCHED:
        try:
            st = os.stat(base / rel)
            out.append((rel, st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((rel, None, None, None))
    return tuple(out)
