"""The suite caches its bytecode however it was started (tests/conftest.py). Started with
PYTHONDONTWRITEBYTECODE=1 (as this box's shells are), pytest wrote no rewritten test module
to __pycache__, so every process that collected the suite rewrote the asserts of all of
them again: ~9 s of CPU of each xdist worker's ~12 s collection."""

from __future__ import annotations

import sys
from pathlib import Path

from _pytest.assertion.rewrite import PYC_TAIL


def test_the_suite_writes_and_keeps_its_rewritten_test_modules():
    assert sys.dont_write_bytecode is False  # whatever the environment said
    cached = Path(__file__).parent / "__pycache__" / f"{Path(__file__).stem}{PYC_TAIL}"
    assert cached.is_file(), cached  # this very module, rewritten on its import
