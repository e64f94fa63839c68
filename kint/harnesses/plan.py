"""What `kint setup` registers (`Plan`) and what it says it did (`Report`).

One plan for every harness: the absolute `kint-server` (next to the `kint` binary, else on
PATH) and the environment it must be started with, resolved once in the caller's
environment (docs/harnesses.md, kint/harnesses/__init__.py for why each variable is
pinned). A report per target (or Hermes profile), with a failed one's code and hint apart
from its lines for `--json`.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kint import settings, spaces
from kint.harnesses.env_checks import absolute_paths, check_env_name
from kint.harnesses.failures import HarnessFailure, SetupError
from kint.paths import kint_home
from kint.protocol.errors import ErrorCode

TARGETS = ("claude", "codex", "hermes", "openclaw")
SERVER_NAME = "kint"
SERVER_NOT_FOUND = "kint-server not found next to kint or on PATH"


@dataclass
class Report:
    """What setup did for one target (or one Hermes profile); a failed one carries its
    code and hint apart from its lines, for a script reading `--json`."""

    target: str
    status: str  # "changed", "unchanged", "skipped" or "failed"
    lines: list[str] = field(default_factory=list)
    code: str | None = None
    hint: str | None = None
    # Variables of kint's entry the harness will not give kint-server, though the entry
    # holds them (OpenClaw's host-env policy): said in `lines` too.
    dropped_env: list[str] = field(default_factory=list)


def failed(target: str, err: HarnessFailure, *lines: str) -> Report:
    """The report of a harness that failed: its line with the code, the hint under it,
    then any lines already said (a backup kept)."""
    return Report(target, "failed", [f"{target}: failed: {err.message} [{err.code}]",
                                     f"  {target}: hint: {err.hint}", *lines],
                  code=err.code, hint=err.hint)


@dataclass
class Plan:
    server: Path
    env: dict[str, str]          # what every registration pins (Hermes adds its own)
    explicit: dict[str, str]     # what the caller set: --env, and --tenant/--db
    hermes_profiles: list[str] | None = None  # None: every profile


def find_kint_server() -> Path:
    """`kint-server` next to the running `kint` binary, else on PATH, as an absolute path
    (symlinks kept: a venv's or pipx's own link is the stable name)."""
    argv0 = sys.argv[0] if sys.argv else ""
    if Path(argv0).name.startswith("kint"):
        # A bare name was found on PATH by the shell; a path is where it is.
        located = argv0 if os.sep in argv0 else shutil.which(argv0)
        if located:
            candidate = Path(located).absolute().parent / "kint-server"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    found = shutil.which("kint-server")
    if found:
        return Path(found).absolute()
    raise SetupError(SERVER_NOT_FOUND, "install kint with its kint-server command (the same "
                     "package), or put the folder holding kint-server on PATH",
                     ErrorCode.INTERNAL)


def make_plan(env: dict[str, str], hermes_profiles: list[str] | None = None) -> Plan:
    """The plan for `env` (the caller's --env pairs, and --tenant/--db as KINT_TENANT and
    SIBYL_MEMORY_DB), resolved in this process's environment."""
    for key in env:
        check_env_name(key)
    server = find_kint_server()
    pinned: dict[str, str] = {"KINT_HOME": str(kint_home())}
    db = env.get("SIBYL_MEMORY_DB")
    pinned["SIBYL_MEMORY_DB"] = str(Path(db).expanduser().absolute() if db
                                    else spaces.sibyl_default_db())
    tenant = settings.value("KINT_TENANT")
    if tenant:
        pinned["KINT_TENANT"] = tenant
    credentials = settings.lookup("SIBYL_CREDENTIALS")
    if credentials.source != settings.DEFAULT:  # a path: the server's cwd is not this one
        pinned["SIBYL_CREDENTIALS"] = str(Path(credentials.value).expanduser().absolute())
    explicit = absolute_paths(env)
    pinned.update(explicit)
    return Plan(server=server, env=pinned, explicit=explicit, hermes_profiles=hermes_profiles)
