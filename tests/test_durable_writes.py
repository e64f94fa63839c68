"""A file kint writes under KINT_HOME survives a crash once the write has returned: the
temp file is fsynced, renamed over the old one, and then its folder is fsynced, without
which the rename itself may be lost with the power (the push journal a broadcast was made
under, a nonce's record, RECOVERY-<space>.txt just reported written). A record of crash
state removed (a pull's apply journal, a lost store's restore, a nonce given back) is
followed by its folder's fsync the same way: without it the removal may be lost with the
power, and the record come back naming a step already finished.

A power cut cannot be had in a test, so the order of the system calls is what is checked:
a real Python process runs the writes under strace, and the trace must show the folder's
fsync after each rename (and after the hard link of a file created once)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STRACE = shutil.which("strace")

pytestmark = pytest.mark.skipif(STRACE is None, reason="strace is not installed")

REPLACE = """
import sys
from pathlib import Path
from kint.paths import atomic_write
atomic_write(Path(sys.argv[1]) / "state.json", b"{}")
"""
CREATE = """
import sys
from pathlib import Path
from kint.custody.files import write_new
write_new(Path(sys.argv[1]) / "once.secret", b"x")
"""


def _trace(tmp_path: Path, script: str) -> tuple[Path, list[str]]:
    """The file system calls of one real process running `script` on a fresh home."""
    home = tmp_path / "k"
    out = tmp_path / "trace"
    subprocess.run([STRACE, "-f", "-y", "-o", str(out), "-e",
                    "trace=fsync,fdatasync,rename,renameat,renameat2,link,linkat,unlink,"
                    "unlinkat",
                    sys.executable, "-c", script, str(home)],
                   cwd=ROOT, check=True, capture_output=True, timeout=120)
    return home, [line for line in out.read_text().splitlines() if str(home) in line]


def _folder_synced_after(lines: list[str], step: str, folder: Path,
                         before: str | None = None) -> None:
    """`folder` is fsynced after the first line matching `step` (and, with `before`,
    ahead of the next line matching it)."""
    at = next(i for i, line in enumerate(lines) if re.search(step, line))
    rest = lines[at + 1:]
    if before is not None:
        rest = rest[:next((i for i, line in enumerate(rest) if re.search(before, line)),
                          len(rest))]
    synced = [line for line in rest
              if re.search(r"\bf(data)?sync\(\d+<" + re.escape(str(folder)) + r">\)", line)]
    assert synced, f"no fsync of {folder} after {lines[at]!r}:\n" + "\n".join(lines)


def test_a_replaced_file_is_followed_by_its_folders_fsync(tmp_path):
    home, lines = _trace(tmp_path, REPLACE)
    _folder_synced_after(lines, r"rename\w*\(.*state\.json\"", home)


def test_a_file_created_once_is_followed_by_its_folders_fsync(tmp_path):
    home, lines = _trace(tmp_path, CREATE)
    _folder_synced_after(lines, r"link\w*\(.*once\.secret\"", home)


REMOVE = """
import sys
from pathlib import Path
from kint.chain.nonces import NonceBook
from kint.paths import ensure_private_dir
from kint.tenant_worker import apply_journal, lost_restore
from kint.tenant_worker.statefiles import SpaceState
home = Path(sys.argv[1])
ensure_private_dir(home)
state = SpaceState(home, "ab" * 32)
apply_journal.begin(state, b"epoch")
lost_restore.begin(state, {})
book = NonceBook(home)
nonce = book.allocate("0x" + "11" * 20, 5, "ab" * 8)
apply_journal.end(state)
lost_restore.end(state)
book.give_back(nonce)
"""


def test_a_removed_record_of_crash_state_is_followed_by_its_folders_fsync(tmp_path):
    """Each removal is checked before the next one: a later fsync of the same folder
    would otherwise vouch for an earlier removal that had none of its own."""
    home, lines = _trace(tmp_path, REMOVE)
    removal = r"unlink\w*\(.*(applying-|restoring-|nonces/\d+\.json)"
    for record, folder in ((r"applying-abababababababab\.json\.gz\"", home),
                           (r"restoring-abababababababab\.json\"", home),
                           (r"nonces/000000000005\.json\"", home / "nonces")):
        step = r"unlink\w*\(.*" + record
        _folder_synced_after(lines, step, folder,
                             before=removal)
