"""Where kint keeps its files, and how it writes them.

Everything lives under KINT_HOME (default ~/.kint, mode 0700). State files are written
0600 and replaced atomically, so a reader never sees half a file and a crash never leaves
one. Where the ZeroMQ sockets are (`run/`, or a short private folder for a long KINT_HOME)
is kint/socket_paths.py's.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

class UnsafePathError(Exception):
    """A folder kint must own privately exists with another owner, mode or type, or is
    named by a relative path; or a file kint writes in one is a link. Carries what to do
    about it (`hint`)."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


# The code a KINT_HOME that cannot be kint's folder is refused with, as every refusal
# carries one: bad input, of the environment rather than of the command line.
HOME_REFUSAL_CODE = "BAD_REQUEST"

# What to do about such a KINT_HOME: kint refuses it (never follows, never takes it over)
# rather than keep keys where someone else could read or replace them. The one hint the
# command line, the client and a foreground supervisor give.
UNSAFE_HOME_HINT = ("point KINT_HOME at a folder of your own (kint creates it, mode 0700), or "
                    "unset it for ~/.kint")
# A relative KINT_HOME is taken from the current folder: two commands run from two folders
# would use two homes (two supervisors, two sets of keys) and never say so.
RELATIVE_PROBLEM = "is a relative path (a different folder from each current folder)"
RELATIVE_HOME_HINT = ("set KINT_HOME to an absolute path (a leading ~ is expanded), or unset it "
                      "for ~/.kint")


def home_hint(path: Path) -> str:
    """What to do about a KINT_HOME that `folder_problem` refused."""
    return UNSAFE_HOME_HINT if path.is_absolute() else RELATIVE_HOME_HINT


def kint_home() -> Path:
    """KINT_HOME, with a leading `~` expanded as a shell would: a harness's config (an MCP
    server's env) passes the value to kint unexpanded. A relative value is returned as it
    is, never made absolute from the current folder: every program refuses it
    (`home_refusal`, `ensure_private_dir`)."""
    from kint.settings.environ import environ_value

    raw = environ_value("KINT_HOME")
    if not raw:
        return (Path.home() / ".kint").absolute()
    try:
        return Path(raw).expanduser()
    except RuntimeError:  # `~` with no home folder to expand it to: refused as relative
        return Path(raw)


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and parents) as 0700, or tighten it to 0700 if it is ours.

    A path that is a symlink, not a folder, or owned by another user is refused: someone
    else could then read or replace what kint puts there. So is a relative path, before
    anything is created: it names another folder from each current folder.
    """
    if not path.is_absolute():
        raise UnsafePathError(f"{path} {RELATIVE_PROBLEM}", RELATIVE_HOME_HINT)
    missing = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):  # every folder kint creates is 0700, parents included
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
        else:
            os.chmod(folder, 0o700)
    problem = folder_problem(path)
    if problem is not None:
        raise UnsafePathError(f"{path} {problem}", UNSAFE_HOME_HINT)
    if stat.S_IMODE(path.lstat().st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def home_refusal(home: Path, program: str = "kint") -> str | None:
    """The two lines (error, hint) a program that keeps its files in `home` (KINT_HOME)
    prints before it exits 2 when `home` cannot be kint's folder, or None when it can: the
    command line, `supervisor status`'s fast path and kint-server say it the same way."""
    problem = folder_problem(home)
    if problem is None:
        return None
    return (f"{program}: error: KINT_HOME {home} {problem} [{HOME_REFUSAL_CODE}]\n"
            f"hint: {home_hint(home)}")


def folder_problem(path: Path) -> str | None:
    """Why `path` cannot be a folder of kint's own (`is not a plain folder`, ...), or None
    when it can: a folder of this user's, or nothing yet (kint creates it)."""
    if not path.is_absolute():
        return RELATIVE_PROBLEM
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    except OSError as err:  # a file where a parent folder should be, or no permission
        return f"cannot be used ({err.strerror})"
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return "is not a plain folder"
    if st.st_uid != os.getuid():
        return f"is owned by uid {st.st_uid}, not by this user"
    return None


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` as 0600 through a temp file, fsync, rename and an fsync of the
    folder, in a folder checked to be this user's own (0700): every file under KINT_HOME
    is written this way."""
    ensure_private_dir(path.parent)
    replace_file(path, data, mode=0o600)


def replace_file(path: Path, data: bytes, *, mode: int) -> None:
    """Replace `path` with `data` (mode `mode`) through a temp file in its folder, fsync and
    rename, so a reader or a crash sees the old file or the new one, never half of one; then
    the folder is fsynced, so the new one is what a crash leaves: until then the rename may
    be lost with the power, and a caller that went on to act on the file (broadcast the
    push its journal names, tell the user a recovery file is written) would find the old
    one or none after the restart. A
    write that fails (a full disk) leaves `path` as it was and raises an OSError naming
    `path`: the error from write() names no file, and a refusal must say which one. The
    folder is not checked: `atomic_write` does that for KINT_HOME; a harness's own config
    file (~/.codex/config.toml) lives in a folder kint does not own."""
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(err, OSError) and err.filename is None and err.errno is not None:
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise
    fsync_dir(path.parent)


def remove_file(path: Path) -> None:
    """Remove `path` (nothing to do when it is gone already), then fsync its folder, as
    `replace_file` does after its rename. Every record of crash state under KINT_HOME (a
    push's pending epoch, a pull's apply journal, a lost store's restore, a nonce given
    back, a converted layout's old files) is removed this way: until the folder is
    synced the removal may be lost with the power, and the record would come back after
    the restart, naming a step already finished (a push settled, an epoch recorded) that
    the next start would act on again."""
    path.unlink(missing_ok=True)
    fsync_dir(path.parent)


def read_small_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file at `path`, of at most `max_bytes`: never through a
    link, never waiting on a FIFO, never reading more than that. For the small records a
    process reads from a folder it shares with others of this user (a note, a notice):
    what stands there may be anything. An OSError for anything else: no file, a link, not
    a regular file, or larger."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise OSError(f"larger than {max_bytes} bytes")
    return data


def fsync_dir(folder: Path) -> None:
    """Make a rename or link in `folder` durable (best effort: not every OS allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# What a file is now, to tell later whether it changed: (device, inode, size, mtime_ns). A
# rewrite moves its mtime (and mostly its size), a replacement by rename (atomic_write, an
# install, `kint session-key rotate`) gives a new inode even at the same size and mtime, and
# a file put back from another disk has another device. A plain tuple, compared and hashed
# as one: it is built several times for every request, where a NamedTuple's construction
# costs three times a tuple's (~250 ns more each). Its fields by index: SIG_DEV, SIG_INO,
# SIG_SIZE, SIG_MTIME_NS.
FileSignature = tuple[int, int, int, int]
SIG_DEV, SIG_INO, SIG_SIZE, SIG_MTIME_NS = range(4)


def file_signature(path: str | os.PathLike[str]) -> FileSignature | None:
    """`path`'s signature, through a symlink (as the file is read), or None when there is
    no file there (it, or a folder on its way, is missing). None rather than an exception
    because every caller compares signatures, and "no file" is a state like any other: a
    file that appears or goes away is a change, one still missing is none. Any other
    failure of the stat (no permission, a link loop) is raised: the file may be there, and
    only the caller knows what to make of a file it cannot see."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def run_dir(home: Path | None = None) -> Path:
    return (home or kint_home()) / "run"


def is_private_dir(path: Path | str) -> bool:
    """True when `path` is a plain folder (not a symlink) of this user that nobody else can
    enter or write: the only kind of folder kint binds or connects a socket in."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and stat.S_IMODE(st.st_mode) & 0o077 == 0)


def log_path(home: Path | None = None) -> Path:
    return (home or kint_home()) / "supervisor.log"


# The machine's local secret, when neither the environment nor a Keychain holds it
# (kint.custody.local_secret); named here so that what reads modes under the home knows it
# without importing custody.
LOCAL_SECRET_FILE = "local.secret"


def space_files(home: Path, space16: str) -> dict[str, Path]:
    """Every file of one space under KINT_HOME, by the name the seed gives it."""
    return {
        "enrol": home / f"enrol-{space16}.json",
        "wraps": home / f"wraps-{space16}.json",
        "vault": home / f"vault-{space16}.aes",
        "recovery": home / f"RECOVERY-{space16}.txt",
        "mirror": home / f"mirror-{space16}.json.gz",
        "watermark": home / f"watermark-{space16}.json",
        "pending": home / f"pending-{space16}.json",
        "head_lock": home / f"head-{space16}.lock",
        "epochs": home / "epochs" / space16,
    }


def worker_lock_path(home: Path, space16: str) -> Path:
    """The file a space's worker holds an exclusive flock on for its whole life, its pid and
    its supervisor's written in it (kint.tenant_worker.worker_lock): one live worker per
    space of a KINT_HOME. Not among the files `status` lists."""
    return home / f"worker-{space16}.lock"


def apply_journal_path(home: Path, space16: str) -> Path:
    """A pull's apply journal (kint.tenant_worker.apply_journal): present only while an
    epoch's rows are being written, so not among the files `status` lists."""
    return home / f"applying-{space16}.json.gz"


def lost_restore_path(home: Path, space16: str) -> Path:
    """A lost store's restore in progress (kint.tenant_worker.lost_restore): present only
    from the restore's start until the mirror reaches the chain's head."""
    return home / f"restoring-{space16}.json"


def settled_notice_path(home: Path, space16: str) -> Path:
    """What settling an interrupted push's journal found that no command has said yet
    (kint.tenant_worker.settled_notice): present only from that settlement until the next
    push (compact's too; not the watcher's or the exit push's), pull, rekey or
    recovery-code says it."""
    return home / f"settled-{space16}.json"


def session_handoff_path(home: Path, space16: str) -> Path:
    """The agent sessions a worker recycled for its memory, restarted or stopped for an
    upgrade hands to its successor (kint.tenant_worker.session_handoff): present only from
    that worker's exit until the next one of the space starts."""
    return home / f"sessions-{space16}.json"


_FOOTPRINT_TTL_S = 1.0
_footprint_cache: dict[Path, tuple[float, int]] = {}


# The folder under KINT_HOME where `kint devchain start` keeps its anvil (its state, its
# log, the `--dev` owners' keys): a local chain's blocks, not the memory kint keeps. Every
# module that writes there names it through `devchain_dir`, so a rename moves the cap's
# exception with it (footprint_bytes).
DEVCHAIN_DIR = "devchain"


def devchain_dir(home: Path) -> Path:
    """KINT_HOME's devchain folder (DEVCHAIN_DIR)."""
    return home / DEVCHAIN_DIR


def footprint_bytes(home: Path | None = None) -> int:
    """Bytes of every file under KINT_HOME but its devchain folder (the kint half of the cap
    gate's count). The devchain's anvil keeps the local chain's blocks and transactions in
    it (every epoch pushed adds its block), which on Base live on the chain, not here:
    counted, they would eat into the free cap's 5 MiB at every push on the devchain (~130
    pushes took it all while anvil also kept every block's state there), the cap gate then
    refusing every Sibyl write for a memory of a few rows, and `kint status` called them
    `kint state (mirror, epoch cache, keys)`.

    Sibyl asks for it on every write; a replay of thousands of rows would otherwise walk
    the folder thousands of times. The walk is reused for one second, a window in which
    kint's state grows by at most the epochs being recorded, which the next walk counts."""
    import time

    home = home or kint_home()
    now = time.monotonic()
    hit = _footprint_cache.get(home)
    if hit is not None and now - hit[0] < _FOOTPRINT_TTL_S:
        return hit[1]
    total = _walk_bytes(home)
    _footprint_cache[home] = (now, total)
    return total


def _walk_bytes(home: Path) -> int:
    total = 0
    for root, dirs, files in os.walk(home):
        if root == str(home) and DEVCHAIN_DIR in dirs:
            dirs.remove(DEVCHAIN_DIR)
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total
