"""Running Hermes' CLI with its arguments on stdin, for the one command that carries the
user's values: `hermes mcp add kint --command ... --env K=V ...` takes the entry's
environment only as arguments (hermes-agent 0.19 has no stdin, file or `-` form for it, and
`hermes config set` takes its value as an argument too), and a process's argv is readable
by every user of the machine (/proc/<pid>/cmdline, `ps`).

So setup starts the Python that runs the `hermes` script (its `#!` line, as for kint's
plugin) on a short program that reads the arguments from the first line of its stdin, sets
them as `sys.argv` and runs that same script as `__main__`: what runs is Hermes' own CLI,
its checks, its test connection to kint-server and its save, and the rest of stdin answers
its questions as before. Its command line shows the script's path alone. A `hermes` that is
no Python script (a shell wrapper) cannot be run that way: `run` returns None, and the
caller gives Hermes kint's own settings alone on the command line.

Hermes in container mode would undo that: hermes-agent 0.19's `main()` (hermes_cli/main.py)
first asks `get_container_exec_info()` (hermes_cli/config.py), which reads
`$HERMES_HOME/.container-mode` (written by its NixOS module's `container.enable`), and
`_exec_in_container()` then execs `[sudo -n] docker exec -i -u USER CONTAINER HERMES_BIN`
followed by Hermes' own arguments, the ones RUNNER took from stdin: on the command lines of
the container runtime and of the `hermes` inside. `container_mode` finds such a profile
before anything runs, and setup refuses it (hermes.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from kint.harnesses import hermes_provider
from kint.harnesses.cli_run import run_cli, shown_command

# The arguments are the first line of stdin, read a byte at a time from fd 0 so that the rest
# (the answers) stays there for Hermes, or for a program a `hermes` script hands over to;
# sys.path[0] as Python sets it for a script (its folder), not `-c`'s working folder.
RUNNER = """import json, os, runpy, sys
line = b""
while not line.endswith(b"\\n"):
    byte = os.read(0, 1)
    if not byte:
        break
    line += byte
script = sys.argv[1]
sys.argv = [script, *json.loads(line)]
sys.path[0] = os.path.dirname(script)
runpy.run_path(script, run_name="__main__")
"""


def run(cli: str, args: list[str], *, timeout: float, answers: str = ""
        ) -> subprocess.CompletedProcess[str] | None:
    """`hermes <args>` with `args` on its stdin (then `answers`), never on a command line;
    None when this `hermes` is not a Python script."""
    python = hermes_provider.hermes_python(cli)
    if python is None:
        return None
    return run_cli([python, "-c", RUNNER, os.path.realpath(cli)], timeout=timeout,
                   stdin=json.dumps(args) + "\n" + answers, shown=shown_command([cli, *args]))


CONTAINER_MODE = ".container-mode"
# Hermes' own answer, under the profile's HERMES_HOME: None unless it would re-run itself in
# the container (HERMES_DEV=1, or running inside a container already, turns that off).
ASK_CONTAINER = ("import json; from hermes_cli.config import get_container_exec_info; "
                 "print(json.dumps(get_container_exec_info() is not None))")
# Where Hermes tells it runs inside a container already (hermes-agent 0.19's
# hermes_constants.is_container), for a `hermes` that cannot be asked: either file there,
# KUBERNETES_SERVICE_HOST set, or one of the markers in the file it reads them from.
CONTAINER_FILES = ("/.dockerenv", "/run/.containerenv")
CONTAINER_ENV = "KUBERNETES_SERVICE_HOST"
CONTAINER_MARKS = (("/proc/1/cgroup", ("docker", "podman", "/lxc/", "kubepods", "containerd",
                                       "crio")),
                   ("/proc/self/mountinfo", ("kubepods", "containerd", "crio")))


def container_mode(cli: str, home: Path, *, timeout: float) -> Path | None:
    """`home`'s `.container-mode` when `hermes`, run with that HERMES_HOME, would re-run
    itself in a container with its arguments on a command line; None when it runs them
    itself. Hermes is asked only when the file is there; an answer other than false counts
    as container mode: setup would rather refuse a profile than put the user's values on a
    command line. A `hermes` that is no Python script (the NixOS module's wrapper, the
    usual one where the file is) cannot be asked: Hermes' own two exemptions are applied
    here instead (`hermes_exempt`)."""
    marker = home / CONTAINER_MODE
    if not os.path.lexists(marker):
        return None
    python = hermes_provider.hermes_python(cli)
    if python is None:
        return None if hermes_exempt() else marker
    out = run_cli([python, "-c", ASK_CONTAINER], timeout=timeout,
                  env={**os.environ, "HERMES_HOME": str(home)})
    said = out.stdout.split()
    return None if out.returncode == 0 and said[-1:] == ["false"] else marker


def hermes_exempt() -> bool:
    """Whether Hermes runs its commands itself whatever `.container-mode` says
    (hermes_cli/config.py `get_container_exec_info`): HERMES_DEV is "1", or this is a
    container already (`CONTAINER_FILES` and the rest, as Hermes reads them)."""
    if os.environ.get("HERMES_DEV") == "1":
        return True
    if any(os.path.exists(path) for path in CONTAINER_FILES) or os.environ.get(CONTAINER_ENV):
        return True
    for path, marks in CONTAINER_MARKS:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        if any(mark in text for mark in marks):
            return True
    return False
