"""`kint setup`: register kint-server in each harness's own configuration.

One plan for every harness (`Plan`): the absolute `kint-server` (next to the `kint` binary,
else on PATH) and the environment it must be started with. Harnesses start MCP servers
with very different environments: Claude Code passes its own whole environment, Codex only
a short whitelist (HOME, PATH, ...) plus what the entry names in `env_vars`, Hermes a bare
one (PATH, HOME, USER, LANG, ...). So the variables that decide *which* supervisor, store
and tenant the server serves are written into every registration as values:

- KINT_HOME, always (resolved, absolute): without it a server started under Codex or
  Hermes falls back to `~/.kint` of whatever HOME it got and starts a second supervisor;
- SIBYL_MEMORY_DB, always (absolute): Sibyl's store (a Hermes profile's store for Hermes);
- KINT_TENANT and SIBYL_CREDENTIALS when set (in the environment, by `kint --tenant/--db`
  or `--env`), and every `--env KEY=VALUE`, which wins.

PYTHONPATH never reaches the server: a polluting one shadows the packages of kint's own
environment. Each harness module says how it keeps it out.

Each harness module has `setup(plan) -> list[Report]`. A file is copied to
`<file>.bak-<unix time>` before setup changes it, and setup changes nothing when the
registration already is what it would write, so a second run is a no-op.

A harness that cannot be registered is reported as a `HarnessFailure`
(kint.harnesses.failures): a code of kint.protocol's closed set, a one-line message naming
the file or the command, and a hint, printed as `<target>: failed: MESSAGE [CODE]` and
`  <target>: hint: HINT`. A config file that is a folder, unreadable or in a folder this
user cannot write, a harness command that hangs or cannot be started, all end there rather
than as an exception's repr.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kint import settings, spaces
from kint.harnesses.failures import RERUN, HarnessFailure, file_failure, read_config
from kint.paths import RELATIVE_HOME_HINT, RELATIVE_PROBLEM, kint_home, replace_file
from kint.protocol.errors import ErrorCode

TARGETS = ("claude", "codex", "hermes", "openclaw")
SERVER_NAME = "kint"
SERVER_NOT_FOUND = "kint-server not found next to kint or on PATH"

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Never written into a harness's configuration (plain text there): the owner's key, the
# session key's passphrase, and PYTHONPATH, which setup keeps out of the server.
REFUSED_ENV = {
    "KINT_OWNER_KEY": "the owner's private key is read from the environment of `kint "
                      "authorize` only",
    "KINT_SESSION_PASSPHRASE": "a secret; leave it unset and let kint and kint-server "
                               "both read ~/.kint/local.secret",
    "PYTHONPATH": "setup keeps PYTHONPATH out of kint-server",
}


class SetupError(Exception):
    """Setup cannot run at all (no kint-server, a bad --env); `hint` says what to do, and
    `code` (kint.protocol's closed set) is BAD_REQUEST for a value given on the command
    line, INTERNAL for a kint installed without its kint-server."""

    def __init__(self, message: str, hint: str = "",
                 code: ErrorCode = ErrorCode.BAD_REQUEST) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code.value


@dataclass
class Report:
    """What setup did for one target (or one Hermes profile); a failed one carries its
    code and hint apart from its lines, for a script reading `--json`."""

    target: str
    status: str  # "changed", "unchanged", "skipped" or "failed"
    lines: list[str] = field(default_factory=list)
    code: str | None = None
    hint: str | None = None


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


def parse_env(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`--env KEY=VALUE` pairs, in order (a later key wins)."""
    env: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise SetupError(f"--env {pair!r} is not KEY=VALUE",
                             "give each variable as --env KEY=VALUE")
        key, value = pair.split("=", 1)
        check_env_name(key)
        check_env_value(key, value)
        env[key] = value
    return env


def check_env_value(key: str, value: str) -> None:
    """A value of a kint setting is checked as `config.toml` checks it, now rather than in
    a log line of a server the harness starts later: one that does not parse, or is below
    the setting's minimum, is refused (kint-server would use the default, or the minimum,
    instead, saying so only in its log), and so
    is a relative KINT_HOME (refused by every kint program). An empty value is unset.

    An endpoint setting whose URL may carry an API key (a user, path or query part) is
    refused too: setup writes it into the harness's configuration in plain text, and some
    harnesses take it on their command line. kint-server reads KINT_HOME/config.toml
    itself, which is where such an endpoint belongs."""
    from kint.settings.urls import redact_url, url_may_hold_a_key
    from kint.settings.schema import BY_NAME, BadValue, given, parse

    setting = BY_NAME.get(key)
    if setting is None or not value.strip():
        return
    try:
        parsed = parse(setting, value)
    except BadValue as err:
        raise SetupError(f"--env {key}={given(setting, value)} {err}",
                         "give a value kint takes (docs/settings.md), or leave it out: "
                         "kint-server would not use this one") from None
    if setting.minimum is not None and parsed < setting.minimum:
        raise SetupError(f"--env {key}={value} is below its minimum {setting.minimum:g}",
                         f"give {key} a value of at least {setting.minimum:g} "
                         f"(docs/settings.md)")
    if key == "KINT_HOME" and not Path(value).expanduser().is_absolute():
        raise SetupError(f"--env KINT_HOME={value} {RELATIVE_PROBLEM}", RELATIVE_HOME_HINT)
    if setting.kind == "url" and url_may_hold_a_key(value):
        raise SetupError(f"--env {key}: {redact_url(value.strip())} has a user, path or query "
                         f"part, where providers put API keys",
                         "kint-server reads $KINT_HOME/config.toml itself: give the endpoint "
                         "there (docs/settings.md), not in the harness's configuration")


def absolute_paths(env: dict[str, str]) -> dict[str, str]:
    """`env` with the value of every path setting (the store, Sibyl's credentials, Hermes'
    root, ...) made absolute here, `~` expanded: a harness starts kint-server in a folder
    of its own and expands nothing, so a relative path would name another file there."""
    from kint.settings.schema import BY_NAME

    out = dict(env)
    for key, value in env.items():
        setting = BY_NAME.get(key)
        if setting is not None and setting.kind == "path" and value.strip():
            out[key] = str(Path(value).expanduser().absolute())
    return out


def pin_flag(env: dict[str, str], name: str, flag: str, value: str | None) -> None:
    """Pin a global flag's value (`--tenant` as KINT_TENANT, `--db` as SIBYL_MEMORY_DB) in
    `env`. An `--env` of the same variable that names another tenant or store is refused:
    one of the two would be dropped without a word."""
    if not value:
        return
    given_value = env.get(name)
    if given_value is None:
        env[name] = value
        return
    if name == "SIBYL_MEMORY_DB":
        differs = (Path(given_value).expanduser().absolute()
                   != Path(value).expanduser().absolute())
    else:
        differs = given_value != value
    if differs:
        raise SetupError(f"{flag} {value} and --env {name}={given_value} name two different "
                         f"{'stores' if name == 'SIBYL_MEMORY_DB' else 'tenants'}",
                         f"give one of them: {flag} alone pins it as {name}")


def check_env_name(key: str) -> None:
    if not ENV_NAME.match(key):
        raise SetupError(f"--env {key!r} is not a variable name",
                         "a name is letters, digits and _, not starting with a digit")
    if key in REFUSED_ENV:
        raise SetupError(f"--env {key} is refused: {REFUSED_ENV[key]}",
                         "setup writes --env values into the harness's configuration in "
                         "plain text")


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


def env_command() -> str:
    """`env`, to start the server with PYTHONPATH unset (and, for harnesses that take no
    environment of their own, with kint's variables)."""
    return "/usr/bin/env" if Path("/usr/bin/env").exists() else (shutil.which("env") or "env")


def which(cli: str) -> str | None:
    return shutil.which(cli)


COMMAND_WORD = re.compile(r"^-{0,2}[A-Za-z][-A-Za-z0-9_]*$")


def shown_command(argv: list[str]) -> str:
    """The harness command as a failure line names it: the CLI's name and its leading
    words (`claude mcp add-json --scope user kint`), never the JSON or env it was given."""
    words = [Path(argv[0]).name]
    for word in argv[1:]:
        if not COMMAND_WORD.match(word) or len(words) == 7:
            break
        words.append(word)
    return " ".join(words)


def run_cli(argv: list[str], *, timeout: float, stdin: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    """A harness's CLI, its output captured. One that does not finish within `timeout`
    (stuck, or waiting on a question setup did not answer) or cannot be started (a broken
    script) fails the harness with a line naming the command, not an exception's repr
    carrying its whole argv."""
    try:
        return subprocess.run(argv, input=stdin if stdin is not None else "", text=True,
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise HarnessFailure(f"`{shown_command(argv)}` did not finish within {timeout:g} s",
                             f"run `{shown_command(argv)}` yourself to see what it waits "
                             f"for, then {RERUN}", ErrorCode.TIMEOUT) from None
    except OSError as err:
        raise HarnessFailure(f"cannot run {argv[0]}: {err.strerror or err}",
                             f"check that `{Path(argv[0]).name} --version` runs, then "
                             f"{RERUN}", ErrorCode.HARNESS_ERROR) from None


def tail(proc: subprocess.CompletedProcess[str], lines: int = 3, noise: str = "") -> str:
    """The last `lines` lines a harness's CLI printed, for a failure's line; lines that
    contain `noise` (a plugin's chatter) are left out."""
    text = "\n".join(x for x in (proc.stdout + "\n" + proc.stderr).splitlines()
                     if x.strip() and not (noise and noise in x.lower()))
    last = text.splitlines()[-lines:]
    return " | ".join(s.strip() for s in last) or f"exit status {proc.returncode}"


def backup(path: Path) -> Path | None:
    """Copy `path` to `<path>.bak-<unix time>` (mode kept) before it is changed.

    The copy is created 0600 and only then given the original's mode: a harness's config
    can hold tokens (an MCP server's env), and a copy made with the umask's mode (0644)
    could be opened by another user while its bytes are written. A new name is claimed
    with O_EXCL, never by a look and then a write."""
    try:
        return _copy(path)
    except OSError as err:
        raise file_failure(err, "back up") from None


def _copy(path: Path) -> Path | None:
    if not path.exists():
        return None
    data = path.read_bytes()
    mode = stat.S_IMODE(path.stat().st_mode)
    stamp = int(time.time())
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for n in itertools.count():
        target = path.with_name(f"{path.name}.bak-{stamp}" + (f"-{n}" if n else ""))
        try:
            fd = os.open(target, flags, 0o600)
        except FileExistsError:
            continue
        break
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        os.fchmod(fh.fileno(), mode)
    shutil.copystat(path, target)
    return target


def write_text_atomic(path: Path, text: str) -> None:
    """Replace `path` through a temp file in its folder, keeping its mode (0600 if new). A
    symlinked file (dotfiles kept elsewhere) is written where the link points."""
    try:
        if path.is_symlink():
            path = path.resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = path.stat().st_mode & 0o7777 if path.exists() else 0o600
        replace_file(path, text.encode("utf-8"), mode=mode)
    except OSError as err:
        raise file_failure(err, "write") from None


def unless_unchanged(copy: Path | None, path: Path) -> Path | None:
    """A backup made before a harness command that then failed: removed when the file still
    holds what was copied (there is nothing to restore, and a stray copy would be taken
    for a change), else kept and returned, to be named on the failure's lines."""
    if copy is None:
        return None
    try:
        if path.read_bytes() == copy.read_bytes():
            copy.unlink()
            return None
    except OSError:
        pass
    return copy


def kept_backup(target: str, copy: Path | None, path: Path) -> list[str]:
    """The line naming a failed harness's backup, when one is still needed."""
    lines: list[str] = []
    backed_up(lines, target, unless_unchanged(copy, path))
    return lines


def backed_up(lines: list[str], target: str, copy: Path | None) -> None:
    if copy is not None:
        lines.append(f"  {target}: backup {copy}")


def reenabled(target: str, current: Any, key: str) -> list[str]:
    """The line saying that a kint entry the user had turned off (`enabled` false) is turned
    on again. Setup is run to make kint usable in the harness: reporting a registration it
    will not start as "already saved" would leave the user believing it works. The line says
    how to turn it off again, for whoever turned it off on purpose."""
    if isinstance(current, dict) and current.get("enabled") is False:
        return [f"  {target}: kint was turned off ({key} = false); setup turned it on "
                f"again, as it registers kint to be used: set {key} = false to keep it off"]
    return []


def expand_targets(targets: list[str] | tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for target in targets:
        names = TARGETS if target == "all" else (target,)
        for name in names:
            if name not in TARGETS:
                raise SetupError(f"unknown harness {name!r}",
                                 f"one of: all, {', '.join(TARGETS)}")
            if name not in out:
                out.append(name)
    return out


def run_setup(targets: list[str] | tuple[str, ...], env: dict[str, str],
              hermes_profiles: list[str] | None = None) -> list[Report]:
    """Register kint-server in each target (`all` = claude, codex, hermes, openclaw, in that
    order). A target that fails is reported and the rest carry on. Raises SetupError when
    setup cannot run at all (no kint-server, a refused --env)."""
    from kint.harnesses import claude, codex, hermes, openclaw
    from kint.harnesses.setup_lock import setup_lock
    from kint.paths import UnsafePathError

    names = expand_targets(targets)
    plan = make_plan(env, hermes_profiles)
    try:
        with setup_lock():
            return run_targets(names, plan, explicit="all" not in targets,
                               modules={"claude": claude, "codex": codex, "hermes": hermes,
                                        "openclaw": openclaw})
    except UnsafePathError as err:
        raise SetupError(str(err), err.hint, ErrorCode.BAD_REQUEST) from None


def run_targets(names: list[str], plan: Plan, *, explicit: bool, modules: dict[str, Any]
                ) -> list[Report]:
    reports: list[Report] = []
    for name in names:
        try:
            reports += modules[name].setup(plan, explicit_target=explicit)
        except HarnessFailure as err:
            reports.append(failed(name, err))
        except OSError as err:
            reports.append(failed(name, file_failure(err, "use")))
        except Exception as err:  # noqa: BLE001 - one harness never stops the others
            reports.append(failed(name, HarnessFailure(
                f"{type(err).__name__}: {err}", "this is a bug in kint setup: report it with "
                "this line; the other harnesses were set up", ErrorCode.INTERNAL)))
    return reports


__all__ = ["HarnessFailure", "Plan", "Report", "SetupError", "TARGETS", "failed",
           "file_failure", "find_kint_server", "kept_backup", "make_plan", "parse_env",
           "pin_flag", "read_config", "reenabled", "run_setup", "unless_unchanged"]
