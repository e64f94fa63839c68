"""Every package of requirements.lock as a wheel, kept per lock in the venv that runs this
(under kint-test-wheelhouse/<digest of the lock>/).

`make venv` builds it once and installs the venv's packages from it, so building it costs
a fresh checkout little more than installing the lock did; tests/test_wheel.py installs
the built kint wheel's dependencies from it, offline, into a fresh venv. Before, that test
built the house itself on every fresh checkout (CI), ~25 s of the suite.

Run as a script, it builds the house when it is missing and prints its path.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

LOCK = Path(__file__).resolve().parent.parent / "requirements.lock"


def wheelhouse() -> Path:
    """The lock's wheelhouse in this venv, built first if no complete one is there."""
    digest = hashlib.sha256(LOCK.read_bytes()).hexdigest()[:16]
    house = Path(sys.prefix) / "kint-test-wheelhouse" / digest
    if (house / ".complete").exists():
        return house
    house.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix="building-", dir=house.parent))
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-cache-dir",
                          "--disable-pip-version-check", "-r", str(LOCK), "-w", str(building)],
                         text=True, capture_output=True, timeout=900, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        raise RuntimeError(f"pip wheel -r {LOCK} failed:\n{out.stdout}\n{out.stderr}")
    (building / ".complete").touch()
    try:
        building.rename(house)
    except OSError:  # another run finished first
        shutil.rmtree(building, ignore_errors=True)
    return house


if __name__ == "__main__":
    print(wheelhouse())
