"""Where a home's ZeroMQ sockets are: `run/` under KINT_HOME, or, when that path would be
too long for a unix socket, a short private folder under the system temp directory
(README, "Files"). That folder's name is predictable, so another user (or a symlink) may
be there first: the supervisor then binds in a fresh private folder and records it in
`run/socket-dir`, and no kint process talks to a socket in a folder that is not this
user's alone. Kept apart from kint/paths.py's files and folders, which it builds on.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kint.paths import atomic_write, ensure_private_dir, is_private_dir, kint_home, run_dir

# sun_path is 108 bytes on Linux (104 on macOS) including the NUL; stay well inside.
MAX_SOCKET_PATH_BYTES = 100

FRONT_SOCKET = "kint.sock"
BACK_SOCKET = "workers.sock"


SOCKET_DIR_RECORD = "socket-dir"


def _sockets_fit(folder: Path) -> bool:
    longest = max(len(FRONT_SOCKET), len(BACK_SOCKET))
    return len(os.fsencode(str(folder / ("x" * longest)))) <= MAX_SOCKET_PATH_BYTES


def _short_socket_dir(home: Path) -> Path:
    """The fallback's first choice: a hash of KINT_HOME, so every client computes it
    without reading anything."""
    import hashlib
    import tempfile

    digest = hashlib.sha256(os.fsencode(str(home))).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"kint-{os.getuid()}-{digest}"


def _recorded_socket_dir(home: Path) -> Path | None:
    """The folder a supervisor recorded in run/socket-dir, if it is still private."""
    run = run_dir(home)
    if not is_private_dir(run):
        return None
    try:
        raw = (run / SOCKET_DIR_RECORD).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    folder = Path(raw)
    if not folder.is_absolute() or not _sockets_fit(folder) or not is_private_dir(folder):
        return None
    return folder


def socket_dir(home: Path | None = None) -> Path:
    """The folder holding the sockets: `run/`, or a short private temp folder.

    For a long KINT_HOME: the folder the supervisor recorded in `run/socket-dir`, else the
    hashed default. Callers that connect check `is_private_dir` first.
    """
    home = home or kint_home()
    preferred = run_dir(home)
    if _sockets_fit(preferred):
        return preferred
    return _recorded_socket_dir(home) or _short_socket_dir(home)


def prepare_socket_dir(home: Path) -> tuple[Path, str | None]:
    """For the supervisor, before it binds: the socket folder, private. Returns the folder
    and, when the default short folder was refused, why (for the log).

    The default short folder is used when it is missing (created 0700) or already this
    user's 0700 folder. Anything else there (another user's folder, a symlink, a file, or
    our own folder left open to others, who may have put anything in it) is refused, never
    followed or tightened: the sockets go to the folder recorded before, if still private,
    or to a fresh one from `mkdtemp` (created 0700, never someone else's).
    """
    run = ensure_private_dir(run_dir(home))
    if _sockets_fit(run):
        return run, None
    default = _short_socket_dir(home)
    refused: str | None = None
    try:
        default.mkdir(mode=0o700)
    except FileExistsError:
        pass
    else:
        os.chmod(default, 0o700)  # whatever the umask
    if is_private_dir(default):
        folder = default
    else:
        try:
            st = default.lstat()
            what = ("a symlink" if stat.S_ISLNK(st.st_mode) else
                    f"owned by uid {st.st_uid}" if st.st_uid != os.getuid() else
                    f"mode {stat.S_IMODE(st.st_mode):o}" if stat.S_ISDIR(st.st_mode) else
                    "not a folder")
        except OSError as err:
            what = f"unreadable ({err.strerror})"
        refused = f"the socket folder {default} is {what}"
        recorded = _recorded_socket_dir(home)
        if recorded is not None and recorded != default:
            folder = recorded
        else:
            import tempfile

            folder = Path(tempfile.mkdtemp(prefix=f"kint-{os.getuid()}-", dir=default.parent))
    atomic_write(run / SOCKET_DIR_RECORD, f"{folder}\n".encode())
    return folder, refused


def front_address(home: Path | None = None) -> str:
    return f"ipc://{socket_dir(home) / FRONT_SOCKET}"


def back_address(home: Path | None = None) -> str:
    return f"ipc://{socket_dir(home) / BACK_SOCKET}"
