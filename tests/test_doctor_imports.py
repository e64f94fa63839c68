"""`kint doctor`'s `Sibyl packages` row proves the packages import once per state of the
Python environment (kint.commands.doctor_imports): the MCP SDK behind `sibyl_memory_mcp`
cost every doctor ~0.5 s of imports. What the row finds must not change: a package that
breaks after a good doctor is found by the next one, and a failure is never remembered.

Each run has a PYTHONPATH folder of its own and a fixed working folder, so its environment
is one no other test proved, whatever the venv's memo already holds."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from conftest import make_sandbox

# `kint doctor --json` in a fresh interpreter that prints, at exit, whether the MCP SDK and
# Sibyl's MCP package were loaded.
_DOCTOR_LOADING = """
import atexit, json, sys
atexit.register(lambda: print(json.dumps({m: m in sys.modules
                                          for m in ("mcp", "sibyl_memory_mcp")})))
from kint.cli import main
main(["doctor", "--json"], prog_name="kint")
"""


def _doctor(env: dict[str, str], cwd: Path) -> tuple[dict, dict, int]:
    """The `Sibyl packages` row, which of the SDK's modules were loaded, and the exit."""
    out = subprocess.run([sys.executable, "-c", _DOCTOR_LOADING], env=env, cwd=cwd, text=True,
                         capture_output=True, timeout=90, stdin=subprocess.DEVNULL)
    lines = out.stdout.splitlines()
    checks = {c["name"]: c for c in json.loads("\n".join(lines[:-1]))["checks"]}
    return checks["Sibyl packages"], json.loads(lines[-1]), out.returncode


def test_doctor_imports_once_per_environment_and_finds_a_package_broken_after(tmp_path):
    sb = make_sandbox(tmp_path / "machine")
    shadow = tmp_path / "on-path"
    shadow.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {**sb.env, "PYTHONPATH": str(shadow)}

    first, loaded, _ = _doctor(env, cwd)
    assert first["ok"] and "importable" in first["detail"], first
    assert loaded == {"mcp": True, "sibyl_memory_mcp": True}, "the first doctor imports"
    again, loaded, _ = _doctor(env, cwd)
    assert again == first
    assert loaded == {"mcp": False, "sibyl_memory_mcp": False}, \
        "a second doctor in the same environment imported the MCP SDK again"

    # Sibyl's MCP package broken on a folder of the path, at the version kint pins.
    pinned = metadata.version("sibyl-memory-mcp")
    dist_info = shadow / f"sibyl_memory_mcp-{pinned}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sibyl-memory-mcp\n"
                                        f"Version: {pinned}\n")
    (shadow / "sibyl_memory_mcp").mkdir()
    (shadow / "sibyl_memory_mcp" / "__init__.py").write_text(
        "raise RuntimeError('broken for the test')\n")
    for _ in range(2):  # found, and found again: a failure is not remembered
        broken, _, code = _doctor(env, cwd)
        assert not broken["ok"] and code == 1, broken
        assert broken["detail"] == ("sibyl_memory_mcp does not import: RuntimeError: broken "
                                    "for the test"), broken

    # Mended (the broken package removed): importable again, proven by importing.
    shutil.rmtree(shadow / "sibyl_memory_mcp")
    shutil.rmtree(dist_info)
    mended, loaded, _ = _doctor(env, cwd)
    assert mended["ok"] and mended["detail"] == first["detail"], mended
    assert loaded["sibyl_memory_mcp"], "a mended environment was not imported again"
