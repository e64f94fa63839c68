"""The run's order of files (tests/support/file_order.py): the long files first, then the
rest as pytest-xdist orders them, and xdist told to keep that order."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from support.file_order import LONG_FILES, pytest_collection_modifyitems

TESTS = Path(__file__).resolve().parent


def _items(*files: tuple[str, int]) -> list:
    """Collected tests as the hook sees them (only their ids are read): `count` of each
    file's, in the order given."""
    return [SimpleNamespace(nodeid=f"tests/{name}::test_{n}")
            for name, count in files for n in range(count)]


def test_every_long_file_is_one_of_the_suites():
    """A file renamed or removed would drop out of the order unseen: the table names files
    that exist, each test files of the suite."""
    missing = [name for name in LONG_FILES if not (TESTS / name).is_file()]
    assert not missing, f"support/file_order.py names files the suite has not: {missing}"
    assert all(name.startswith("test_") for name in LONG_FILES)


def test_long_files_come_first_longest_first_and_the_rest_by_their_number_of_tests():
    longest, long_ = sorted(LONG_FILES, key=LONG_FILES.__getitem__, reverse=True)[:2]
    collected = _items(("test_a_few.py", 2), (long_, 1), ("test_many.py", 5),
                       ("test_also_a_few.py", 2), (longest, 3), ("test_one.py", 1))
    items = list(collected)
    pytest_collection_modifyitems(items)
    order = [item.nodeid for item in items]
    files = list(dict.fromkeys(nodeid.split("::")[0] for nodeid in order))
    assert files == [f"tests/{name}" for name in (longest, long_, "test_many.py",
                                                  "test_a_few.py", "test_also_a_few.py",
                                                  "test_one.py")]
    # Every test kept, each file's together and in the order they were collected.
    assert sorted(order) == sorted(item.nodeid for item in collected)
    for file in files:
        assert [n for n in order if n.startswith(f"{file}::")] == \
            [i.nodeid for i in collected if i.nodeid.startswith(f"{file}::")]


def test_xdist_keeps_the_collected_order(request):
    """pytest-xdist's --loadscope-reorder (on by default) would sort the files again by
    their number of tests, the long ones (a few tests each) last."""
    if not request.config.pluginmanager.hasplugin("xdist"):
        pytest.skip("pytest-xdist is not loaded")
    assert request.config.option.loadscopereorder is False
