"""paths.file_signature, the one "has this file changed" kint asks (the session keystore,
the config file, the state files, the space's folders, the package's own files): a missing
file is None, and a rewrite or a replacement differs from what was there, including a
replacement of the same size and mtime (a rename over it: a new inode)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kint.paths import SIG_INO, SIG_MTIME_NS, SIG_SIZE, file_signature


def test_a_missing_file_or_folder_on_its_way_is_none(tmp_path: Path) -> None:
    assert file_signature(tmp_path / "absent") is None
    (tmp_path / "a-file").write_bytes(b"x")
    assert file_signature(tmp_path / "a-file" / "inside") is None  # ENOTDIR: no file there
    assert file_signature(str(tmp_path / "absent")) is None


def test_the_signature_names_the_file_as_stat_does(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"12345")
    st = os.stat(path)
    assert file_signature(path) == (st.st_dev, st.st_ino, 5, st.st_mtime_ns)
    assert file_signature(path) == file_signature(str(path))  # unchanged: equal


def test_a_changed_size_differs(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"12345")
    before = file_signature(path)
    st = os.stat(path)
    path.write_bytes(b"123456")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # the same mtime: the size shows
    after = file_signature(path)
    assert after is not None and before is not None
    assert (after[SIG_INO], after[SIG_MTIME_NS]) == (before[SIG_INO], before[SIG_MTIME_NS])
    assert after != before


def test_a_file_replaced_by_one_of_the_same_size_and_mtime_differs(tmp_path: Path) -> None:
    """What `kint session-key rotate` and atomic_write do: a new file renamed over the old
    one. Same size, same mtime (set by hand, as a coarse clock would leave it): only the
    inode tells, and it does."""
    path, new = tmp_path / "session.key", tmp_path / "session.key.new"
    path.write_bytes(b"old key!")
    before = file_signature(path)
    st = os.stat(path)
    new.write_bytes(b"new key!")
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(new, path)
    after = file_signature(path)
    assert after is not None and before is not None
    assert (after[SIG_SIZE], after[SIG_MTIME_NS]) == (before[SIG_SIZE], before[SIG_MTIME_NS])
    assert after[SIG_INO] != before[SIG_INO] and after != before


def test_a_link_is_followed_as_the_file_is_read(tmp_path: Path) -> None:
    target, link = tmp_path / "target", tmp_path / "link"
    target.write_bytes(b"x")
    link.symlink_to(target)
    assert file_signature(link) == file_signature(target)
    target.unlink()
    assert file_signature(link) is None  # a dangling link: no file to read


def test_a_file_that_cannot_be_looked_at_is_raised_not_called_missing(tmp_path: Path) -> None:
    """A link loop may hide a file: the caller decides (the config watch reads it again and
    refuses it; the keystore's user unlocks again and says why)."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(OSError):
        file_signature(loop)
