"""A machine of several Sibyl stores whose supervisor starts under a low open-file limit
(`ulimit -n`), for the tests of the room for workers (kint/supervisor/room.py):
tests/test_open_files.py and tests/test_room_turn.py."""

from __future__ import annotations

import resource
import shutil
import subprocess
from pathlib import Path

from conftest import KINT, Sandbox, write_store


def profile_stores(sb: Sandbox, numbers: list[int]) -> list[Path]:
    """The stores of Hermes profiles p<n>, in the order of `numbers`: one written by
    Sibyl's client, copied for the others (a second each)."""
    dbs: list[Path] = []
    for n in numbers:
        db = sb.profile_db(f"p{n}")
        db.parent.mkdir(parents=True)
        dbs.append(shutil.copyfile(dbs[0], db) and db if dbs else write_store(db))
    return dbs


def start_limited(sb: Sandbox, limit: int) -> None:
    """`kint supervisor start` under RLIMIT_NOFILE `limit`, soft and hard, as `ulimit -n`
    sets them: the daemon, its forkserver and its workers inherit it from the command."""
    out = subprocess.run(
        [KINT, "supervisor", "start"], env=sb.env, text=True, capture_output=True,
        timeout=90, stdin=subprocess.DEVNULL,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)))
    assert out.returncode == 0, out.stderr
