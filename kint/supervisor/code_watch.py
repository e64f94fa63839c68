"""Noticing that kint was upgraded, or edited in place, under a running supervisor.

The supervisor and its workers hold kint's modules in memory, but import some lazily (an
op's module on its first request), and every worker is a fresh process that imports what
its forkserver did not preload. After `pip install -U kint`, or an edit of an editable
install's checkout (a `git pull`, a branch switched), such an import would load the new
file into a process running the old ones, and an op could fail in ways no test sees. So
the supervisor fingerprints every file of the kint package when it starts and looks again
at each housekeeping (every few seconds, never per request). When any changed, it lets the
requests in flight finish, stops its workers and exits with EXIT_UPGRADED: the next call
starts the new version, and systemd or launchd (which restart a non-zero exit, see
deploy/) restart a managed one. The workers are stopped for an "upgrade", not a "stop":
they hand their agent sessions over, and the supervisor names its run id to the next one
(kint/supervisor/succession.py), which takes them up, so the sessions go on across the
upgrade as across a recycle.

The fingerprint is each file's path and signature (paths.file_signature: device, inode,
size, mtime): an install writes files anew (new inodes), an editor or `git` rewrites them
(new mtimes), and a file added or removed changes the list. It is a walk of the package's
folders and a stat per file: ~220 files, under 2 ms on a laptop, every HOUSEKEEPING_EVERY_S
(5 s). The files Python writes itself (`__pycache__`), and an editor's hidden or backup
files (`.name`, `name~`), are left out: they are no code of kint's, and would end the
supervisor at each import or each save of an unsaved buffer."""

from __future__ import annotations

import os
from pathlib import Path

import kint
from kint.paths import FileSignature, file_signature

# EX_TEMPFAIL: "start me again". A commanded stop still exits 0 and stays stopped.
EXIT_UPGRADED = 75

Entry = tuple[str, FileSignature | None]
Signature = tuple[Entry, ...]


def code_signature(root: Path | None = None) -> Signature:
    """(file, signature) of every file of the kint package, in path order. A file or a
    folder that cannot be read (removed half-way through an install) has None for its
    signature, so that it, too, differs from what was there."""
    base = str(root or Path(kint.__file__).parent)
    out: list[Entry] = []
    _walk(base, "", out)
    out.sort()
    return tuple(out)


def _walk(folder: str, rel: str, out: list[Entry]) -> None:
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                name = entry.name
                if name == "__pycache__" or name.startswith(".") or name.endswith("~"):
                    continue
                path = f"{rel}/{name}" if rel else name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        _walk(entry.path, path, out)
                        continue
                    sig = file_signature(entry.path)
                except OSError:
                    sig = None
                out.append((path, sig))
    except OSError:
        out.append((rel or ".", None))
