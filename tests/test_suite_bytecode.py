"""The suite caches its bytecode however it was started (tests/conftest.py). Started with
PYTHONDONTWRITEBYTECODE=1 (as some shells set it), pytest wrote no rewritten test module
to __pycache__, so every process that collected the suite rewrote the asserts of all of
them again: ~9 s of CPU of each xdist worker's ~12 s collection. Where the file is written
(a PYTHONPYCACHEPREFIX, a folder that cannot be written) is Python's and pytest's; what is
checked is that this process may write it and passes the permission on."""

from __future__ import annotations

import os
import sys


def test_the_suite_writes_its_bytecode_whatever_the_environment_said():
    assert sys.dont_write_bytecode is False
    # ...nor does a process the suite starts inherit the refusal (the xdist workers).
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ
