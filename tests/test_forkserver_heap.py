"""A worker shares its forkserver's heap instead of copying it (issue 15, item 2).

A worker's memory is what it writes to of the pages it shares with the worker forkserver.
Two things made a connected worker ~28 MiB against ~15 for an idle one: a full garbage
collection in the worker wrote to the header of every object the forkserver had imported
(~24 MiB of web3, eth_account and Sibyl became private copies), and the chain ops' modules
were imported inside each worker that connected or pushed. The real Spawner's forkserver is
started in a child process (tests/support/forkserver_probe.py) and one of its children, as
a worker, reports what it inherited and what a full collection costs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SUPPORT = Path(__file__).resolve().parent / "support"
# Without the frozen heap a full collection made ~20-24 MiB private; with it, well under 1.
FULL_COLLECTION_LIMIT_KB = 4 * 1024


def test_a_forked_worker_keeps_the_forkserver_heap_shared(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(SUPPORT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    out = subprocess.run([sys.executable, str(SUPPORT / "forkserver_probe.py")], env=env,
                         cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    # Everything the forkserver imported is frozen: no collection in a worker walks it.
    assert found["frozen"] > 10_000, found
    assert found["full_collection_kb"] < FULL_COLLECTION_LIMIT_KB, found
    # The chain ops' modules come built from the forkserver, not imported per worker.
    assert all(found["loaded"].values()), found
    # The forkserver is kint's own process (kint.supervisor.forkserver_start): its workers
    # reach pycryptodome's C code through ctypes, and nothing imported cffi's parser.
    assert found["pycryptodome"] == "ctypes", found
    assert found["cffi_imported"] is False, found
    # The collector, paused for the preload's imports, runs again in every child.
    assert found["collecting"] is True, found
