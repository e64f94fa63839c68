"""Hermes: `mcp_servers.kint` in every profile's `config.yaml`, written by Hermes's own CLI
(`hermes -p <profile> mcp add kint --command <kint-server> --env K=V ...`), which
connects to the server and lists its tools before it saves anything.

Hermes keeps the default profile in its root (`$HERMES_HOME`, default `~/.hermes`) and each
other one under `<root>/profiles/<name>`, with a config of its own. It starts an MCP
server with a bare environment (PATH, HOME, USER, LANG, LC_ALL, TERM, SHELL, TMPDIR,
XDG_*) plus the entry's `env`: nothing else of the shell reaches it, PYTHONPATH included.
So every entry pins, for its profile:

- KINT_HOME (the machine's one supervisor);
- SIBYL_MEMORY_DB: the profile's own Sibyl store, `<root>/sibyl/memory.db` for the default
  profile and `<root>/sibyl/profiles/<name>/memory.db` for the others (where kint's Hermes
  plugin and `kint supervisor discover` find them), unless `--env SIBYL_MEMORY_DB=...`
  names one store for all;
- KINT_TENANT (resolved now: credentials, else Sibyl's default) and KINT_SPACE
  `<tenant>@hermes:<profile>`: each profile is its own space with its own worker, the
  same space kint's Hermes plugin uses for that store. (Without KINT_SPACE a server whose
  SIBYL_MEMORY_DB is a profile store would take the tenant's own space, and two profiles
  would collide on it.)

An entry whose command and env already are these is left alone. Otherwise the profile's
`config.yaml` is copied to `config.yaml.bak-<unix time>` and `mcp add` rewrites the entry
(answering its overwrite and "enable all tools" questions with yes).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kint import settings, spaces
from kint.harnesses import (SERVER_NAME, Plan, Report, backed_up, backup, run_cli, tail,
                            which)

TIMEOUT = 120
PROFILE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")  # Hermes's own rule


def hermes_root() -> Path:
    """Hermes's root: HERMES_HOME (its grandparent when it names a profile folder), else
    ~/.hermes."""
    home = Path(settings.value("HERMES_HOME")).expanduser().absolute()
    return home.parent.parent if home.parent.name == "profiles" else home


def profiles(root: Path) -> list[str]:
    found = ["default"]
    try:
        found += sorted(p.name for p in (root / "profiles").iterdir()
                        if p.is_dir() and PROFILE_NAME.match(p.name) and p.name != "default")
    except OSError:
        pass
    return found


def profile_dir(root: Path, profile: str) -> Path:
    return root if profile == "default" else root / "profiles" / profile


def profile_store(root: Path, profile: str) -> Path:
    base = root / "sibyl"
    return base / "memory.db" if profile == "default" else base / "profiles" / profile / "memory.db"


def entry_env(plan: Plan, root: Path, profile: str) -> dict[str, str]:
    env = dict(plan.env)
    if "SIBYL_MEMORY_DB" in plan.explicit:
        return env
    tenant = plan.explicit.get("KINT_TENANT") or spaces.resolve_tenant()
    env["SIBYL_MEMORY_DB"] = str(profile_store(root, profile))
    env["KINT_TENANT"] = tenant
    env.setdefault("KINT_SPACE", f"{tenant}@hermes:{profile}")
    return env


def current_entry(cli: str, profile: str) -> tuple[bool, Any]:
    """(answered, entry): Hermes's own reading of `mcp_servers.kint` in the profile."""
    out = run_cli([cli, "-p", profile, "config", "get", "--json", f"mcp_servers.{SERVER_NAME}"],
                  timeout=TIMEOUT)
    if out.returncode != 0:
        return ("not set" in (out.stdout + out.stderr).lower(), None)
    try:
        return True, json.loads(out.stdout)
    except ValueError:
        return False, None


def same(current: Any, command: str, env: dict[str, str]) -> bool:
    return (isinstance(current, dict) and current.get("command") == command
            and (current.get("args") or []) == [] and current.get("env") == env
            and current.get("enabled", True) is True)


def setup(plan: Plan, explicit_target: bool = True) -> list[Report]:
    cli = which("hermes")
    if cli is None:
        return [Report("hermes", "skipped", ["hermes: CLI not found, skipped"])]
    root = hermes_root()
    names = profiles(root)
    if plan.hermes_profiles:
        missing = [p for p in plan.hermes_profiles if p not in names]
        if missing:
            return [Report("hermes", "failed", [f"hermes: failed: no Hermes profile "
                                                f"{', '.join(missing)} under {root}"])]
        names = [p for p in names if p in plan.hermes_profiles]
    return [one_profile(cli, plan, root, p) for p in names]


def one_profile(cli: str, plan: Plan, root: Path, profile: str) -> Report:
    target = f"hermes[{profile}]"
    command = str(plan.server)
    env = entry_env(plan, root, profile)
    answered, current = current_entry(cli, profile)
    if not answered:
        return Report(target, "failed",
                      [f"{target}: failed: `hermes -p {profile} config get` did not answer"])
    store = env["SIBYL_MEMORY_DB"]
    if same(current, command, env):
        return Report(target, "unchanged",
                      [f"{target}: kint already registered (store {store}), nothing changed"])
    lines: list[str] = []
    backed_up(lines, target, backup(profile_dir(root, profile) / "config.yaml"))
    argv = [cli, "-p", profile, "mcp", "add", SERVER_NAME, "--command", command,
            "--env", *[f"{k}={v}" for k, v in env.items()]]
    # `mcp add` asks to overwrite an existing entry, then to enable every tool it found.
    answers = ("y\n" if current is not None else "") + "Y\n"
    out = run_cli(argv, timeout=TIMEOUT, stdin=answers)
    _, saved = current_entry(cli, profile)
    if not same(saved, command, env):
        return Report(target, "failed",
                      [f"{target}: failed: `hermes mcp add` did not save kint: {tail(out)}",
                       *lines])
    return Report(target, "changed",
                  [f"{target}: registered kint (store {store})", *lines])
