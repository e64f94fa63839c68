"""`kint doctor`'s checks of the Python environment this kint runs in, made locally.

v0.3.0's doctor checked these three, and each explains failures no other check names:
Sibyl's packages must be the versions kint pins (kint replays and hashes their storage
format byte for byte), the Python must be one kint supports, and a `PYTHONPATH`
in the shell can shadow the packages of kint's own environment (so every `kint setup`
registration keeps it out of kint-server). None of them reads the network.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import platform
import re
import sys
from typing import Any

from kint.commands.doctor_imports import DETAIL_CHARS, import_problems
from kint.protocol.checks import check as _check

SIBYL_PREFIX = "sibyl-memory"


def environment_checks() -> list[dict[str, Any]]:
    return [sibyl_packages(), python_version(), pythonpath()]


def _kint_requirements() -> list[str]:
    try:
        return metadata.requires("kint") or []
    except metadata.PackageNotFoundError:
        return []


def sibyl_pins() -> dict[str, str]:
    """Sibyl's packages and the exact versions kint's own metadata (pyproject) pins."""
    pins = {}
    for requirement in _kint_requirements():
        found = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;]+)\s*", requirement)
        if found and found.group(1).lower().startswith(SIBYL_PREFIX):
            pins[found.group(1).lower()] = found.group(2)
    return pins


def _module_of(dist: metadata.Distribution, name: str) -> str:
    top = (dist.read_text("top_level.txt") or "").split()
    return top[0] if top else name.replace("-", "_")


def sibyl_packages() -> dict[str, Any]:
    pins = sibyl_pins()
    if not pins:
        return _check("Sibyl packages", False, "kint's own package metadata names no Sibyl pin",
                      "reinstall kint (pip install -e . or the wheel) so its metadata is there")
    problems, found, modules = [], [], []
    for name, pinned in sorted(pins.items()):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name} is not installed (kint pins {pinned})")
            continue
        if dist.version != pinned:
            problems.append(f"{name} {dist.version} installed where kint pins {pinned}")
            continue
        modules.append(_module_of(dist, name))
        found.append(f"{name} {dist.version}")
    problems += import_problems(modules)  # those at their pins (kint.commands.doctor_imports)
    if problems:
        return _check("Sibyl packages", False, "; ".join(problems),
                      "install kint's pinned versions (pip install -r requirements.lock), and "
                      "run kint with PYTHONPATH unset")
    return _check("Sibyl packages", True, ", ".join(found) + " (the pinned versions, importable)")


def _minimum_python() -> tuple[int, int] | None:
    try:
        spec = metadata.metadata("kint").get("Requires-Python") or ""
    except metadata.PackageNotFoundError:
        return None
    found = re.fullmatch(r"\s*>=\s*(\d+)\.(\d+)\s*", spec)
    return (int(found.group(1)), int(found.group(2))) if found else None


# v0.3.0's note beside the Python version while PYTHONPATH is set (10-configuration.md);
# the PYTHONPATH check after it says what the variable holds.
PYTHONPATH_NOTE = " (PYTHONPATH is set: run with env -u PYTHONPATH)"


def python_version() -> dict[str, Any]:
    """v0.3.0's `python` row: the version, and its PYTHONPATH note while the variable is set."""
    version = platform.python_version()
    note = PYTHONPATH_NOTE if os.environ.get("PYTHONPATH") else ""
    minimum = _minimum_python()
    if minimum is None:
        return _check("python", True, f"{version} ({sys.executable}){note}")
    wanted = f"{minimum[0]}.{minimum[1]}"
    ok = sys.version_info[:2] >= minimum
    return _check("python", ok, f"{version} ({sys.executable}); kint needs {wanted} or "
                  f"newer{note}", f"install kint under Python {wanted} or newer")


def pythonpath() -> dict[str, Any]:
    value = os.environ.get("PYTHONPATH", "")
    if not value:
        return _check("PYTHONPATH", True, "not set")
    return _check("PYTHONPATH", True, f"set ({value[:DETAIL_CHARS]}): its packages come before "
                  f"those of kint's environment", "run kint with it unset: env -u PYTHONPATH "
                  "kint ...", warn=True)
