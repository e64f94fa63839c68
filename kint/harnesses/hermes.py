"""Hermes: in every profile, `mcp_servers.kint` in its `config.yaml` and kint's memory
provider plugin (kint.harnesses.hermes_provider). The MCP entry is written by Hermes's own
CLI (`hermes -p <profile> mcp add kint --command <kint-server> --env K=V ...`), which
connects to the server and lists its tools before it saves anything.

Hermes keeps the default profile in its root (`$HERMES_HOME`, default `~/.hermes`) and each
other one under `<root>/profiles/<name>`, with a config of its own; `hermes -p <name>` runs
with HERMES_HOME set to that folder. It starts an MCP server with a bare environment (PATH,
HOME, USER, LANG, LC_ALL, TERM, SHELL, TMPDIR, XDG_*) plus the entry's `env`: nothing else
of the shell reaches it, PYTHONPATH included. So every entry pins, for its profile:

- KINT_HOME (the machine's one supervisor);
- SIBYL_MEMORY_DB: the store Sibyl's Hermes adapter writes for that profile,
  `<root>/sibyl/memory.db` for the default profile and
  `<root>/profiles/<name>/sibyl/profiles/<name>/memory.db` for the others (kint.spaces
  says why), unless `--env SIBYL_MEMORY_DB=...` names one store for all;
- KINT_TENANT (resolved now: credentials, else Sibyl's default). The store's path alone
  makes its space `<tenant>@hermes:<profile>`, the one kint's plugin uses for that store.

The entry's `env` keeps the variables of the user's own already in it (not kint settings,
not PYTHONPATH: env_checks.users_env) that `mcp add` saves as they are (hermes_refuses: a
string, under a name Hermes takes, not ending in whitespace); the others are named, with
the backup that holds them. An entry whose command and env already are these is
left alone. Otherwise the profile's
`config.yaml` is copied to `config.yaml.bak-<unix time>` and `mcp add` rewrites the entry
(answering its overwrite and "enable all tools" questions with yes). A profile Hermes runs
in container mode is refused before any `hermes` runs (hermes_run.container_mode says why),
or skipped under `kint setup all`.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kint import spaces
from kint.harnesses import hermes_provider, hermes_run
from kint.harnesses.cli_run import run_cli, tail, which
from kint.harnesses.config_files import backed_up, backup, kept_backup, reenabled
from kint.harnesses.env_checks import (ENV_NAME, left_line, refuse_users_values_on_argv,
                                       replaced_lines, type_name, users_env, users_values)
from kint.harnesses.failures import HarnessFailure, file_failure, read_config
from kint.harnesses.plan import SERVER_NAME, Plan, Report, failed
from kint.install_source import install_source
from kint.protocol.errors import ErrorCode

TIMEOUT = 120
# Profiles set up at once. Each is its own config file and store, and most of its time is
# Hermes' CLI starting, four to five times a profile: one after another, three profiles
# took 12-17 s of the suite's Hermes test; side by side, bounded, so a machine with many
# profiles does not start dozens of Pythons at once (two a profile at most, its first two
# reads: `one_profile`).
PROFILES_AT_ONCE = 4


def profiles(root: Path) -> list[str]:
    found = ["default"]
    try:
        found += sorted(p.name for p in (root / "profiles").iterdir()
                        if p.is_dir() and spaces.HERMES_PROFILE.match(p.name)
                        and p.name != "default")
    except OSError:
        pass
    return found


def profile_dir(root: Path, profile: str) -> Path:
    return root if profile == "default" else root / "profiles" / profile


def profile_store(root: Path, profile: str) -> Path:
    """Where Sibyl's Hermes adapter keeps the profile's store: under the profile's own
    HERMES_HOME, in a `sibyl/profiles/<profile>` folder of its own."""
    if profile == "default":
        return root / "sibyl" / spaces.STORE_NAME
    return profile_dir(root, profile) / "sibyl" / "profiles" / profile / spaces.STORE_NAME


def entry_env(plan: Plan, root: Path, profile: str) -> dict[str, str]:
    env = dict(plan.env)
    if "SIBYL_MEMORY_DB" in plan.explicit:
        return env
    tenant = plan.explicit.get("KINT_TENANT") or spaces.resolve_tenant()
    env["SIBYL_MEMORY_DB"] = str(profile_store(root, profile))
    env["KINT_TENANT"] = tenant
    return env


def current_entry(cli: str, profile: str) -> Any:
    """Hermes's own reading of `mcp_servers.kint` in the profile (None when not set)."""
    out = run_cli([cli, "-p", profile, "config", "get", "--json", f"mcp_servers.{SERVER_NAME}"],
                  timeout=TIMEOUT)
    unparsed = config_unparsed(out.stdout + "\n" + out.stderr)
    if unparsed is not None:
        raise HarnessFailure(f"Hermes cannot parse the config of profile {profile}: "
                             f"{unparsed}", "fix that file (Hermes serves its defaults "
                             "instead, and `hermes mcp add` would write them over it), then "
                             "run `kint setup hermes` again; nothing was changed")
    if out.returncode != 0 and "not set" in (out.stdout + out.stderr).lower():
        return None
    try:
        if out.returncode == 0:
            return json.loads(out.stdout)
    except ValueError:
        pass
    raise not_answered(profile, out)


UNPARSED = re.compile(r"Failed to parse (.*?)(?:\. Falling back|$)", re.S)
SAID_AT_MOST = 240


def config_unparsed(said: str) -> str | None:
    """What Hermes said of a profile's `config.yaml` it cannot parse, or None. Hermes then
    runs on its default config, and `mcp add` saves those defaults with kint's entry in place
    of the user's file (hermes-agent 0.19): such a profile is not touched."""
    found = UNPARSED.search(said)
    if found is None:
        return None
    text = " ".join(found.group(1).split())
    return text if len(text) <= SAID_AT_MOST else text[:SAID_AT_MOST - 3] + "..."


def not_answered(profile: str, out: Any) -> HarnessFailure:
    return HarnessFailure(f"`hermes -p {profile} config get` did not answer: {tail(out)}",
                          f"run `hermes -p {profile} config show` to see why, then run `kint "
                          "setup hermes` again", ErrorCode.HARNESS_ERROR)


def same(current: Any, command: str, env: dict[str, str]) -> bool:
    return (isinstance(current, dict) and current.get("command") == command
            and (current.get("args") or []) == [] and current.get("env") == env
            and current.get("enabled", True) is True)


def setup(plan: Plan, explicit_target: bool = True) -> list[Report]:
    cli = which("hermes")
    if cli is None:
        return [Report("hermes", "skipped", ["hermes: CLI not found, skipped"])]
    root = spaces.hermes_root()
    names = profiles(root)
    if plan.hermes_profiles:
        missing = [p for p in plan.hermes_profiles if p not in names]
        if missing:
            return [failed("hermes", HarnessFailure(
                f"no Hermes profile {', '.join(missing)} under {root}",
                "`hermes profile list` shows the profiles there", ErrorCode.BAD_REQUEST))]
        names = [p for p in names if p in plan.hermes_profiles]
    with ThreadPoolExecutor(max_workers=min(PROFILES_AT_ONCE, len(names)) + 1,
                            thread_name_prefix="kint-setup-hermes") as pool:
        no_plugin = pool.submit(plugin_blocker, cli)
        # In the profiles' order, whichever ends first.
        return list(pool.map(lambda profile: profile_report(cli, plan, root, profile,
                                                            no_plugin, explicit_target),
                             names))


def profile_report(cli: str, plan: Plan, root: Path, profile: str,
                   no_plugin: Future[str | None], explicit: bool = True) -> Report:
    """One profile's report: a profile that fails is named in its own report, and never
    stops or hides the others. A profile in container mode under `kint setup all` (Hermes
    not named) is skipped with the reason, as a harness whose CLI is missing is: nothing
    here is wrong that setup could mend, and `all` is not asked for each harness."""
    target = f"hermes[{profile}]"
    try:
        return one_profile(cli, plan, root, profile, no_plugin)
    except ContainerMode as err:
        if explicit:
            return failed(target, err)
        return Report(target, "skipped", [f"{target}: {err.message}; {err.hint}, skipped"])
    except HarnessFailure as err:
        return failed(target, err)
    except OSError as err:
        return failed(f"hermes[{profile}]", file_failure(err, "use"))


def plugin_blocker(cli: str) -> str | None:
    """Why kint's plugin cannot be installed for this `hermes`, or None when it can."""
    python = hermes_provider.hermes_python(cli)
    if python is None:
        return f"cannot tell which Python runs {cli}"
    if not hermes_provider.kint_importable(python):
        return (f"Hermes' Python ({python}) cannot import kint; install kint there "
                f"({python} -m pip install {install_source()}), then run `kint setup "
                f"hermes` again")
    return None


def one_profile(cli: str, plan: Plan, root: Path, profile: str,
                blocker: Future[str | None]) -> Report:
    """`blocker` is `plugin_blocker`'s answer, asked once for every profile, side by side
    with the profiles' first reads."""
    target = f"hermes[{profile}]"
    command = str(plan.server)
    env = entry_env(plan, root, profile)
    padded = [k for k, v in env.items() if v != v.rstrip()]
    if padded:  # `mcp add` would save them cut, and setup would say it did not save kint
        raise HarnessFailure(f"`hermes mcp add` drops the whitespace at the end of an --env "
                             f"value, and yours end in some ({', '.join(padded)})",
                             "give them without it, then run `kint setup hermes` again",
                             ErrorCode.BAD_REQUEST)
    config = profile_dir(root, profile) / "config.yaml"
    read_config(config)  # a folder, or a file this user may not read: said here, not by Hermes
    refuse_container_mode(cli, profile, profile_dir(root, profile))
    # The profile's two reads side by side (each a `hermes` start, a second or so): neither
    # changes its config (a start may lay out a new profile's folders, the same either
    # way), and neither answer decides whether the other is asked.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kint-setup-hermes") as side:
        asked = side.submit(hermes_provider.memory_provider, cli, profile)
        current = current_entry(cli, profile)
        provider = asked.result()
    theirs, left = users_env(current, env, hermes_refuses)
    env = {**theirs, **env}
    no_plugin = blocker.result()
    if provider is None:
        raise HarnessFailure(f"`hermes -p {profile} config get` did not answer",
                             f"run `hermes -p {profile} config show` to see why, then run "
                             "`kint setup hermes` again", ErrorCode.HARNESS_ERROR)
    store = env["SIBYL_MEMORY_DB"]
    switch = no_plugin is None and provider == hermes_provider.SIBYL_PROVIDER
    register = not same(current, command, env)
    copy = backup(config) if register or switch else None
    left_out: list[str] = []
    if register:
        try:
            problem, left_out = add_entry(cli, profile, command, env, current, plan.explicit)
        except HarnessFailure as err:
            return failed(target, err, *kept_backup(target, copy, config))
        if problem:
            return failed(target, HarnessFailure(problem, f"run `hermes -p {profile} mcp list` "
                                                 "to see what Hermes saved, then run `kint "
                                                 "setup hermes` again",
                                                 ErrorCode.HARNESS_ERROR),
                          *kept_backup(target, copy, config))
    lines = reenabled(target, current, "mcp_servers.kint.enabled") if register else []
    backed_up(lines, target, copy)
    if register:
        lines += dropped_keys(target, profile, current)
        lines += left_line(target, left)
        lines += replaced_lines(target, current, env, plan.explicit)
    if left_out:
        lines.append(f"  {target}: kint's entry lost variables of yours ({', '.join(left_out)}):"
                     f" {ARGV_ONLY}; the backup above holds them")
    changed = register
    if no_plugin is not None:
        lines.append(f"  {target}: plugin {hermes_provider.PLUGIN_NAME} not installed: "
                     f"{no_plugin}")
    else:
        folder = profile_dir(root, profile)
        if hermes_provider.install(folder):
            changed = True
            lines.append(f"  {target}: plugin {hermes_provider.PLUGIN_NAME} installed in "
                         f"{hermes_provider.plugin_dir(folder)}")
        if switch:
            try:
                problem = hermes_provider.select(cli, profile)
                if problem:
                    raise HarnessFailure(problem, f"run `hermes -p {profile} config set "
                                         f"memory.provider {hermes_provider.PLUGIN_NAME}` "
                                         "yourself", ErrorCode.HARNESS_ERROR)
            except HarnessFailure as err:
                said = [x for x in lines if not x.startswith(f"  {target}: backup ")]
                return failed(target, err, *kept_backup(target, copy, config), *said)
            changed = True
            lines.append(f"  {target}: memory provider {hermes_provider.SIBYL_PROVIDER} -> "
                         f"{hermes_provider.PLUGIN_NAME}")
    if not changed:
        return Report(target, "unchanged", [
            f"{target}: kint already registered (store {store}), nothing changed", *lines])
    head = f"{target}: registered kint (store {store})" if register else \
        f"{target}: kint already registered (store {store})"
    return Report(target, "changed", [head, *lines])


class ContainerMode(HarnessFailure):
    """`refuse_container_mode`'s refusal: failed for `kint setup hermes`, skipped for
    `kint setup all` (`profile_report`)."""


def refuse_container_mode(cli: str, profile: str, folder: Path) -> None:
    """A profile Hermes runs in container mode fails (ContainerMode) before any `hermes`
    runs: Hermes would re-run each command in its container with the arguments setup gives
    on stdin on a command line (hermes_run), and would register kint-server, KINT_HOME and
    the store by paths of this machine in a configuration read inside the container."""
    marker = hermes_run.container_mode(cli, folder, timeout=TIMEOUT)
    if marker is not None:
        raise ContainerMode(
            f"Hermes runs profile {profile} in container mode ({marker}, which its NixOS "
            f"module's container.enable writes): it re-runs each `hermes` command in the "
            f"container with its arguments on the container runtime's command line, where "
            f"every user of this machine can read the values setup gives it",
            "run `kint setup hermes` inside that container, where Hermes runs; nothing was "
            "changed", ErrorCode.HARNESS_ERROR)


def hermes_refuses(name: str, value: Any) -> str | None:
    """Why a variable of the user's in kint's entry cannot go back through `hermes mcp add
    --env NAME=VALUE`, or None. Hermes (0.19) refuses a name that is not `[A-Za-z_][A-Za-z0-9_]*`
    (the whole `mcp add` fails), and reads each pair as `str(pair).strip()`: a number or a
    boolean would be saved as its text (`1`, `True`), a key with no value as the text
    `None`, and the whitespace at a value's end (a `|` block's newline) is lost. Saved
    changed, the entry would not read back as given, and setup would report Hermes' save as
    failed though it wrote the file."""
    if not ENV_NAME.fullmatch(name):
        return "not a name Hermes takes"
    if not isinstance(value, str):
        return f"not a string ({type_name(value)}), which `hermes mcp add` would save as text"
    if value != value.rstrip():
        return "ends in whitespace, which `hermes mcp add` drops"
    return None


# The keys of Hermes' MCP entry that `mcp add` writes; it writes the entry anew, so any
# other key of an existing kint entry (a `timeout`, a `tools` filter) is gone after it.
ADD_WRITES = ("command", "args", "env", "enabled")


def dropped_keys(target: str, profile: str, current: Any) -> list[str]:
    """The line naming the keys of the user's own that `hermes mcp add` dropped from kint's
    entry, and where they are. Hermes' `config set` cannot put a list back as one (it saves
    its text), so setup says it rather than restore some of them and mangle the rest."""
    if not isinstance(current, dict):
        return []
    gone = [key for key in current if key not in ADD_WRITES]
    if not gone:
        return []
    return [f"  {target}: `hermes mcp add` does not keep the other keys of kint's entry "
            f"({', '.join(gone)}): the backup above holds them; set them again with `hermes "
            f"-p {profile} config set mcp_servers.kint.KEY VALUE` or in its config.yaml"]


ARGV_ONLY = ("this `hermes` is no Python script, so it takes them only on its command line, "
             "where every user of this machine can read them, and kint gave it its own "
             "settings alone (set them in the profile's config.yaml, under mcp_servers.kint.env)")


def add_entry(cli: str, profile: str, command: str, env: dict[str, str], current: Any,
              given: dict[str, str]) -> tuple[str | None, list[str]]:
    """`hermes mcp add` for kint, its arguments on stdin (hermes_run); what went wrong, or
    None once Hermes reads it back, and the variables of the user's left out. A `hermes`
    that is no Python script gets kint's settings alone on its command line: the user's
    variables kept from the entry are left out (the caller names them), and an `--env` of
    the user's (`given`) fails, named, never its value."""
    # `mcp add` asks to overwrite an existing entry, then to enable every tool it found.
    answers = ("y\n" if current is not None else "") + "Y\n"
    out = hermes_run.run(cli, add_args(profile, command, env), timeout=TIMEOUT,
                         answers=answers)
    left_out: list[str] = []
    if out is None:
        left_out = users_values(env)
        refuse_users_values_on_argv(
            "this `hermes` is no Python script, so it takes an entry's env only on its "
            "command line", [k for k in left_out if k in given],
            "set them in the profile's config.yaml under mcp_servers.kint.env once kint is "
            "registered, and run `kint setup hermes` without them")
        env = {k: v for k, v in env.items() if k not in left_out}
        out = run_cli([cli, *add_args(profile, command, env)], timeout=TIMEOUT, stdin=answers)
    try:
        saved = current_entry(cli, profile)
    except HarnessFailure:
        saved = None
    if not same(saved, command, env):
        return f"`hermes mcp add` did not save kint: {tail(out)}", left_out
    return None, left_out


def add_args(profile: str, command: str, env: dict[str, str]) -> list[str]:
    return ["-p", profile, "mcp", "add", SERVER_NAME, "--command", command,
            "--env", *[f"{k}={v}" for k, v in env.items()]]
