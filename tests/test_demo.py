"""`kint demo` (what `make demo` runs) plays its story end to end and leaves nothing behind."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from conftest import KINT


def test_demo_shows_three_spaces_and_cleans_up(sandbox):
    before = set(Path(tempfile.gettempdir()).glob("kint-demo-*"))
    out = subprocess.run([KINT, "demo"], env=sandbox.env, text=True, capture_output=True,
                         timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.rstrip().endswith("demo: done")
    rows = [line for line in out.stdout.splitlines()
            if re.match(r"^[0-9a-f]{16}  .* ready ", line)]
    assert len(rows) == 3, out.stdout
    assert "@hermes:research" in out.stdout and "@hermes:ops" in out.stdout
    assert "supervisor stopped" in out.stdout
    assert set(Path(tempfile.gettempdir()).glob("kint-demo-*")) == before
    assert not sandbox.kint_home.exists(), "the demo must not use the caller's KINT_HOME"
