"""kint's Hermes memory provider (`kint-sibyl`, kint/hermes_plugin/) in a Hermes profile.

hermes-agent 0.19 loads a memory provider a user installed from
`$HERMES_HOME/plugins/<name>/__init__.py`, and under `hermes -p <profile>` HERMES_HOME is
that profile's folder: so every profile needs its own copy, and a fresh profile has no
`plugins/` folder yet. The copy is two files: `plugin.yaml` (kint's package data) and an
`__init__.py` that imports `kint.hermes_plugin` from the Python Hermes runs in, so an
upgrade of kint there takes effect without reinstalling the copy. That Python must hold
kint (and with it Sibyl's Hermes adapter): setup checks it before it writes anything.

A profile whose memory provider is Sibyl's own (`sibyl`) is switched to `kint-sibyl`, which
is that same adapter with every write noted to kint; any other provider is left alone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path

from kint.harnesses.cli_run import run_cli, tail
from kint.harnesses.config_files import write_text_atomic

PLUGIN_NAME = "kint-sibyl"
SIBYL_PROVIDER = "sibyl"
TIMEOUT = 120
# Hermes' loader picks a user plugin folder as a memory provider when its __init__.py
# names register_memory_provider or MemoryProvider (plugins/memory/__init__.py).
SHIM = '''"""kint's Hermes memory provider, written by `kint setup hermes`: Sibyl's own adapter
with every write noted to kint (kint/hermes_plugin/). Hermes calls register(), which calls
ctx.register_memory_provider()."""

from kint.hermes_plugin import KintSibylAdapter, register  # noqa: F401
'''


def plugin_files() -> dict[str, str]:
    manifest = resources.files("kint").joinpath("hermes_plugin", "plugin.yaml")
    return {"__init__.py": SHIM, "plugin.yaml": manifest.read_text(encoding="utf-8")}


def plugin_dir(profile_dir: Path) -> Path:
    return profile_dir / "plugins" / PLUGIN_NAME


def install(profile_dir: Path) -> bool:
    """Write the plugin into `profile_dir`; False when it already is there, unchanged. A
    symlink in its place (an older way to install it) is replaced by the folder."""
    target = plugin_dir(profile_dir)
    files = plugin_files()
    if not target.is_symlink() and all(
            (target / name).is_file() and (target / name).read_text(encoding="utf-8") == text
            for name, text in files.items()):
        return False
    if target.is_symlink():
        target.unlink()
    target.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        write_text_atomic(target / name, text)
    return True


def hermes_python(cli: str) -> str | None:
    """The Python the `hermes` command runs in: its script's `#!` line (pip, pipx and uv
    write one), `#!/usr/bin/env python3` included; None for anything else (a shell
    wrapper)."""
    try:
        with open(os.path.realpath(cli), "rb") as fh:
            first = fh.readline(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None
    words = first[2:].split() if first.startswith("#!") else []
    if len(words) > 1 and os.path.basename(words[0]) == "env":
        words = [shutil.which(words[1]) or ""]
    python = words[0] if words else ""
    if not os.path.basename(python).startswith("python") or not os.access(python, os.X_OK):
        return None
    return python


def kint_importable(python: str) -> bool:
    """Whether Hermes' Python can import kint's plugin: without this shell's PYTHONPATH,
    and from the root folder, so a kint checkout in the working folder does not count."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        out = subprocess.run([python, "-c", "import kint.hermes_plugin"], env=env, cwd="/",
                             capture_output=True, timeout=TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


def memory_provider(cli: str, profile: str) -> str | None:
    """The profile's `memory.provider` as Hermes reads it ('' when unset), None on error."""
    out = run_cli([cli, "-p", profile, "config", "get", "--json", "memory.provider"],
                  timeout=TIMEOUT)
    if out.returncode != 0:
        return "" if "not set" in (out.stdout + out.stderr).lower() else None
    try:
        value = json.loads(out.stdout)
    except ValueError:
        return None
    return value if isinstance(value, str) else ""


def select(cli: str, profile: str) -> str | None:
    """Switch the profile's memory provider to kint's: what went wrong, or None."""
    out = run_cli([cli, "-p", profile, "config", "set", "memory.provider", PLUGIN_NAME],
                  timeout=TIMEOUT)
    if out.returncode != 0 or memory_provider(cli, profile) != PLUGIN_NAME:
        return f"`hermes config set memory.provider` did not take: {tail(out)}"
    return None
