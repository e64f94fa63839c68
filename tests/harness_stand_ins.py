"""Stand-in harness CLIs for the `kint setup` tests that do not run the real clients (the
real ones cost seconds a call; test_setup_clients*.py runs them).

A stand-in is a Python script on PATH under the harness's name: it logs each call (its
argv, one JSON line) in `$HOME/<name>-calls.log`, then runs the test's script. OpenClaw's
stand-in answers `openclaw config file` as OpenClaw 2026.9 does (OPENCLAW_CONFIG_PATH,
else ~/.openclaw/openclaw.json) and `config patch --help` as 2026.9 does (naming
`--stdin`), and by default saves the entry `config patch --stdin --replace-path
mcp.servers.NAME` reads under `mcp.servers` there; a test gives it another script (one that
fails, or writes half, or an older OpenClaw's `mcp set NAME JSON`).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

# Hermes' CLI as hermes-agent 0.19 answers the two commands `kint setup hermes` runs, for a
# stand-in script that holds the profile's config as `config` and its arguments after
# `-p PROFILE` as `args`: `config get --json KEY` prints the value (a missing key: "Config
# key not set", exit 1), and `mcp add NAME --command C --env K=V...` writes the entry anew,
# with only command, env and enabled, as the real one does (the caller saves `config`).
HERMES_COMMANDS = """
def config_get(config, args):
    node = config
    for part in args[3].split("."):
        if not isinstance(node, dict) or part not in node:
            sys.exit(print(f"Config key not set: {args[3]}") or 1)
        node = node[part]
    sys.exit(print(json.dumps(node)))


def mcp_add(config, args):
    env = dict(pair.split("=", 1) for pair in args[args.index("--env") + 1:])
    config.setdefault("mcp_servers", {})[args[2]] = {
        "command": args[args.index("--command") + 1], "env": env, "enabled": True}
"""

# The rest of a stand-in Hermes over one JSON file (see hermes_script); formatted apart from
# HERMES_COMMANDS, whose braces are Python's.
HERMES_OVER_ONE_FILE = """
{prelude}
state = {state}
config = json.loads(state.read_text()) if state.exists() else {{}}
args = sys.argv[3:]
if args[:3] == ["config", "get", "--json"]:
    config_get(config, args)
if args[:2] == ["mcp", "add"]:
{before_add}
    mcp_add(config, args)
    state.write_text(json.dumps(config))
{after_save}
    sys.exit(print("Saved"))
sys.exit(print("unexpected", args) or 2)
"""


def hermes_script(state: str, *, prelude: str = "", before_add: str = "",
                  after_save: str = "") -> str:
    """A stand-in Hermes CLI (HERMES_COMMANDS) whose profile config is the JSON file at
    `state` (a Python expression, after `prelude` has run): `config get --json` answers
    from it; `mcp add` runs `before_add`, writes the entry, saves the file, runs
    `after_save` and says `Saved`; any other call exits 2. The tests differ only in where
    the file is and what an `mcp add` does beside it."""
    return HERMES_COMMANDS + HERMES_OVER_ONE_FILE.format(
        prelude=prelude, state=state, before_add=textwrap.indent(before_add, "    "),
        after_save=textwrap.indent(after_save, "    "))


STAND_IN = """#!{python}
import json, os, sys, time
from pathlib import Path
with open(Path(os.environ["HOME"]) / "{name}-calls.log", "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
{script}
"""


def stand_in(bin_dir: Path, name: str, script: str = "", python: str = sys.executable) -> Path:
    """`bin_dir/name`, a stand-in that logs its call and runs `script`."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(STAND_IN.format(python=python, name=name, script=script))
    path.chmod(0o755)
    return path


def calls(home: Path, name: str) -> list[list[str]]:
    """The argv of each call of stand-in `name` under `home`, in order."""
    log = home / f"{name}-calls.log"
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


# What `openclaw config patch --stdin --replace-path mcp.servers.NAME` does by default: save
# the entry of the patch on stdin in the config file, in place of the one there.
SAVES_DEFINITION = """\
assert sys.argv[1:4] == ["config", "patch", "--stdin"], sys.argv
name = sys.argv[5].split(".")[2]
data = json.loads(path.read_text()) if path.exists() else {}
data.setdefault("mcp", {}).setdefault("servers", {})[name] = \\
    json.load(sys.stdin)["mcp"]["servers"][name]
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps(data, indent=2))
print("Applied 1 config update(s).")
"""

OPENCLAW = """\
path = Path(os.environ.get("OPENCLAW_CONFIG_PATH")
            or Path(os.environ["HOME"]) / ".openclaw" / "openclaw.json")
if sys.argv[1:] == ["config", "file"]:
    if {config_file_fails}:
        sys.exit("error: unknown command 'file'")
    sys.exit(print(path))
if sys.argv[1:] == ["config", "patch", "--help"]:
    sys.exit(print("Usage: openclaw config patch [options]\\n  --stdin  Read a JSON5 config "
                   "patch object from stdin"))
"""


def stand_in_openclaw(bin_dir: Path, mcp_set: str = SAVES_DEFINITION,
                      config_file_fails: bool = False) -> Path:
    """A stand-in `openclaw`: `config file` names its config file (or fails, as an OpenClaw
    without the command), `config patch --help` names `--stdin`, and any other call runs
    `mcp_set` (the write), with `path` that file."""
    return stand_in(bin_dir, "openclaw",
                    OPENCLAW.format(config_file_fails=config_file_fails) + mcp_set)


# A real client's stand-in on PATH that records its command line (one JSON line in `log`)
# and execs the real one, so what runs and what it saves is the client's own.
RECORDING_SHIM = """#!{python}
import json, os, sys
with open({log!r}, "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
os.execv({real!r}, [{real!r}, *sys.argv[1:]])
"""


def recording_shim(folder: Path, name: str, real: Path, log: Path) -> Path:
    """`folder/name`, recording each command line in `log` before it execs `real`."""
    folder.mkdir(exist_ok=True)
    shim = folder / name
    shim.write_text(RECORDING_SHIM.format(python=sys.executable, log=str(log), real=str(real)))
    shim.chmod(0o755)
    return shim


def recorded(log: Path) -> list[list[str]]:
    """The command lines a recording shim wrote, in order."""
    return [json.loads(line) for line in log.read_text().splitlines()]
