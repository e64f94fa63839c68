"""A file kint writes under KINT_HOME survives a crash once the write has returned: the
temp file is fsynced, renamed over the old one, and then its folder is fsynced, without
which the rename itself may be lost with the power (the push journal a broadcast was made
under, a nonce's record, RECOVERY-<space>.txt just reported written).

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
                    "trace=fsync,fdatasync,rename,renameat,renameat2,link,linkat",
                    sys.executable, "-c", script, str(home)],
                   cwd=ROOT, check=True, capture_output=True, timeout=120)
    return home, [line for line in out.read_text().splitlines() if str(home) in line]


def _folder_synced_after(lines: list[str], step: str, folder: Path) -> None:
    at = next(i for i, line in enumerate(lines) if re.search(step, line))
    synced = [line for line in lines[at + 1:]
              if re.search(r"\bf(data)?sync\(\d+<" + re.escape(str(folder)) + r">\)", line)]
    assert synced, f"no fsync of {folder} after {lines[at]!r}:\n" + "\n".join(lines)


def test_a_replaced_file_is_followed_by_its_folders_fsync(tmp_path):
    home, lines = _trace(tmp_path, REPLACE)
    _folder_synced_after(lines, r"rename\w*\(.*state\.json\"", home)


def test_a_file_created_once_is_followed_by_its_folders_fsync(tmp_path):
    home, lines = _trace(tmp_path, CREATE)
    _folder_synced_after(lines, r"link\w*\(.*once\.secret\"", home)
