"""How custody files are named, written and locked under KINT_HOME.

Why it is built this way:

- Every custody file is written 0600 through a temp file, a rename and an fsync of its
  folder (`kint.paths.atomic_write`), so a reader never sees half a key and a crash never
  leaves one, nor loses one that was written.
- A file that must never be clobbered by a racing creator (`local.secret`, `session.key`) is
  published with a hard link, which fails if the name exists: the loser reads the winner's.
- Locks live in KINT_HOME, a 0700 folder this user owns. A lock at a predictable name in a
  shared temp folder could be pre-created or symlinked by another user; under KINT_HOME
  nobody else can touch it. The lock file is still opened without following a symlink and
  refused if it is not a regular file of this user.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from kint.custody.errors import LockUnsafe
from kint.custody.ids import space16
from kint.paths import atomic_write, ensure_private_dir, fsync_dir, kint_home
from kint.pid_file_lock import NotOwnFile, open_own_file

SCRYPT_LOCK_FILE = "scrypt.lock"


def home_or_default(home: Path | None) -> Path:
    """`home`, or KINT_HOME (default ~/.kint) when None."""
    return Path(home) if home is not None else kint_home()


def space_file(home: Path | None, prefix: str, space: str | bytes, suffix: str) -> Path:
    """`<home>/<prefix>-<space16><suffix>`, e.g. `wraps-fd83319f25a64bb2.json`."""
    return home_or_default(home) / f"{prefix}-{space16(space)}{suffix}"


def write_private(path: Path, data: bytes) -> None:
    """Write `path` at 0600 through an atomic replace (its folder made 0700 if missing)."""
    atomic_write(path, data)


def write_new(path: Path, data: bytes) -> None:
    """Write `path` at 0600, atomically, refusing with FileExistsError if it exists.

    The bytes go to a private temp name first, then a hard link publishes them: a link never
    replaces an existing name, so two processes creating the same file cannot overwrite each
    other, and a reader sees either nothing or the whole file.
    """
    tmp = path.with_name(f".{path.name}.new-{os.getpid()}-{os.urandom(4).hex()}")
    atomic_write(tmp, data)
    try:
        os.link(tmp, path)
    finally:
        os.unlink(tmp)
    fsync_dir(path.parent)


@contextlib.contextmanager
def home_lock(home: Path | None, name: str) -> Iterator[None]:
    """An exclusive flock on `<home>/<name>`, shared by every kint process using that home.

    Each call opens its own descriptor, so threads of one process exclude each other too.
    """
    folder = ensure_private_dir(home_or_default(home))
    path = folder / name
    try:
        fd = open_own_file(path)
    except NotOwnFile as err:
        raise LockUnsafe(path, err.why) from None
    except OSError as err:
        raise LockUnsafe(path, f"cannot be opened ({err.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def scrypt_lock(home: Path | None = None) -> contextlib.AbstractContextManager[None]:
    """Held around every expensive scrypt (the 2^17 passphrase stretch, the keystore's 2^18).

    One such scrypt takes 128 to 256 MiB; several workers running them at once on a small
    machine would swap or be killed, so they take turns.
    """
    return home_lock(home, SCRYPT_LOCK_FILE)
