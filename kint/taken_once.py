"""A file one process leaves its successor, read once: `run/succession.json` from a
supervisor exiting for an upgrade (supervisor/succession.py) and a space's session
handoff from a worker recycled or restarted (tenant_worker/session_handoff.py).

Both are taken the same way, written once here so they cannot drift apart: the file is
removed whether it reads or not (a bad one would otherwise be read, and refused, at every
start; what cannot be removed, a directory standing there, is said, not raised), and one
that cannot be read or does not hold what it must is logged, by its reader's words, and
taken as none: the sessions attach again at their next keepalive.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, TypeVar

import orjson

from kint.paths import remove_file

T = TypeVar("T")


def take_once(path: Path, read: Callable[[Any], T | None],
              refused: tuple[type[Exception], ...],
              said: Callable[[str], None]) -> T | None:
    """What `read` makes of the JSON in `path`, the file removed either way; None when
    there is none. A file that cannot be read or parsed, or that `read` refuses by raising
    one of `refused`, gives None after `said` is told why ("is unreadable (...)", "does not
    hold what it must (...)")."""
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError) as err:
        said(f"is unreadable ({err}){removed(path)}")
        return None
    remove_file(path)
    try:
        return read(data)
    except refused as err:
        said(f"does not hold what it must ({err})")
        return None


def removed(path: Path) -> str:
    """Remove a file that did not read, or say why it could not be (", and cannot be
    removed (...)"; "" once removed): what stands there may be no file (a directory), and
    a start that raised on it would never get past it. Also settled_notice.py's, whose
    reader runs in every push and pull."""
    try:
        remove_file(path)
    except OSError as err:
        return f", and cannot be removed ({err.strerror})"
    return ""
