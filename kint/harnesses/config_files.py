"""A harness's configuration file, changed safely by `kint setup`: a private backup
first (`<file>.bak-<unix time>`, claimed with O_EXCL, 0600 until its bytes are in), an
atomic replace that keeps the file's mode and follows a symlinked dotfile, the backup
dropped again when a failed harness command left the file as it was, and the lines that
name what was kept or turned back on.
"""

from __future__ import annotations

import itertools
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

from kint.harnesses.failures import file_failure
from kint.paths import replace_file

def backup(path: Path) -> Path | None:
    """Copy `path` to `<path>.bak-<unix time>` (mode kept) before it is changed.

    The copy is created 0600 and only then given the original's mode: a harness's config
    can hold tokens (an MCP server's env), and a copy made with the umask's mode (0644)
    could be opened by another user while its bytes are written. A new name is claimed
    with O_EXCL, never by a look and then a write."""
    try:
        return _copy(path)
    except OSError as err:
        raise file_failure(err, "back up") from None


def _copy(path: Path) -> Path | None:
    if not path.exists():
        return None
    data = path.read_bytes()
    mode = stat.S_IMODE(path.stat().st_mode)
    stamp = int(time.time())
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for n in itertools.count():
        target = path.with_name(f"{path.name}.bak-{stamp}" + (f"-{n}" if n else ""))
        try:
            fd = os.open(target, flags, 0o600)
        except FileExistsError:
            continue
        break
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        os.fchmod(fh.fileno(), mode)
    shutil.copystat(path, target)
    return target


def write_text_atomic(path: Path, text: str) -> None:
    """Replace `path` through a temp file in its folder, keeping its mode (0600 if new). A
    symlinked file (dotfiles kept elsewhere) is written where the link points."""
    try:
        if path.is_symlink():
            path = path.resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = path.stat().st_mode & 0o7777 if path.exists() else 0o600
        replace_file(path, text.encode("utf-8"), mode=mode)
    except OSError as err:
        raise file_failure(err, "write") from None


def unless_unchanged(copy: Path | None, path: Path) -> Path | None:
    """A backup made before a harness command that then failed: removed when the file still
    holds what was copied (there is nothing to restore, and a stray copy would be taken
    for a change), else kept and returned, to be named on the failure's lines."""
    if copy is None:
        return None
    try:
        if path.read_bytes() == copy.read_bytes():
            copy.unlink()
            return None
    except OSError:
        pass
    return copy


def kept_backup(target: str, copy: Path | None, path: Path) -> list[str]:
    """The line naming a failed harness's backup, when one is still needed."""
    lines: list[str] = []
    backed_up(lines, target, unless_unchanged(copy, path))
    return lines


def backed_up(lines: list[str], target: str, copy: Path | None) -> None:
    if copy is not None:
        lines.append(f"  {target}: backup {copy}")


def reenabled(target: str, current: Any, key: str) -> list[str]:
    """The line saying that a kint entry the user had turned off (`enabled` false) is turned
    on again. Setup is run to make kint usable in the harness: reporting a registration it
    will not start as "already saved" would leave the user believing it works. The line says
    how to turn it off again, for whoever turned it off on purpose."""
    if isinstance(current, dict) and current.get("enabled") is False:
        return [f"  {target}: kint was turned off ({key} = false); setup turned it on "
                f"again, as it registers kint to be used: set {key} = false to keep it off"]
    return []
