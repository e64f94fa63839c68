"""The environment `kint setup` writes into a harness's configuration, checked before
anything is written: `--env KEY=VALUE` names and values (a kint setting as config.toml
checks it, never a secret, PYTHONPATH or an endpoint URL that may carry an API key), the
path settings made absolute, and `--tenant`/`--db` pinned without contradicting an `--env`.
Plain text in a harness's file, started later where no one reads its log: so refused now.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from kint.harnesses.failures import HarnessFailure, SetupError
from kint.paths import RELATIVE_HOME_HINT, RELATIVE_PROBLEM
from kint.protocol.errors import ErrorCode

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # whole names only: `fullmatch`
# Never written into a harness's configuration (plain text there): the owner's key, the
# session key's passphrase, and PYTHONPATH, which setup keeps out of the server.
REFUSED_ENV = {
    "KINT_OWNER_KEY": "the owner's private key is read from the environment of `kint "
                      "authorize` only",
    "KINT_SESSION_PASSPHRASE": "a secret; leave it unset and let kint and kint-server "
                               "both read ~/.kint/local.secret",
    "PYTHONPATH": "setup keeps PYTHONPATH out of kint-server",
}


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
    from kint.settings.schema import BY_NAME
    from kint.settings.values import BadValue, given, parse

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
    if not ENV_NAME.fullmatch(key):
        raise SetupError(f"--env {key!r} is not a variable name",
                         "a name is letters, digits and _, not starting with a digit")
    if key in REFUSED_ENV:
        raise SetupError(f"--env {key} is refused: {REFUSED_ENV[key]}",
                         "setup writes --env values into the harness's configuration in "
                         "plain text")


# Why a value of the user's in kint's entry is not given to a harness again: it does not
# take it (a type its schema refuses fails the whole entry), or would change it.
Refusal = Callable[[str, Any], str | None]


def users_env(current: Any, pinned: dict[str, str], refused: Refusal
              ) -> tuple[dict[str, Any], dict[str, str]]:
    """The variables of the user's own in the `env` of kint's entry already saved (`current`,
    the entry), kept by setup beside what it pins (`pinned`): a proxy or a tool's variable
    the user added there would otherwise be replaced without a word each time setup
    rewrites the entry. Those the harness does not take as they are (`refused` says why,
    for a name and its value) are left out, apart, name -> why, for the caller to name with
    the backup that holds them: given as they are, one would fail the whole entry or be
    saved changed."""
    env = current.get("env") if isinstance(current, dict) else None
    if not isinstance(env, dict):
        return {}, {}
    kept: dict[str, Any] = {}
    left: dict[str, str] = {}
    for name, value in env.items():
        if not users_own(name, pinned):
            continue
        why = refused(name, value)
        if why is None:
            kept[name] = value
        else:
            left[shown_name(name)] = why
    return kept, left


def string_only(name: str, value: Any) -> str | None:
    """A `Refusal` for a harness that takes only strings as `env` values (Claude Code's
    schema, Codex's config)."""
    return None if isinstance(value, str) else f"not a string ({type_name(value)})"


def type_name(value: Any) -> str:
    """A YAML/JSON/TOML value's type as the user wrote it: `1` a number, `true` a boolean,
    an empty `KEY:` nothing at all (no value, not the empty string)."""
    if value is None:
        return "no value"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


def left_line(target: str, left: dict[str, str]) -> list[str]:
    """The line naming the variables of the user's own that setup did not give the harness
    again (`users_env`'s second half), each with why, and where they are: the backup named
    above it, since the entry is rewritten without them."""
    if not left:
        return []
    said = "; ".join(f"{name}: {why}" for name, why in left.items())
    return [f"  {target}: kint's entry lost variables of yours, which this harness does not "
            f"take as they are ({said}); the backup above holds them"]


def replaced_lines(target: str, current: Any, written: dict[str, Any],
                   explicit: dict[str, str]) -> list[str]:
    """A line for each variable of kint's entry already saved (`current`, the entry) whose
    value of the user's setup did not write back: one under a name setup writes itself (a
    kint setting, one it pins) that now holds another value (`written`, the variables the
    harness gives kint-server after this run) or none, or PYTHONPATH, which setup keeps out.
    Named only, never with its value, which may be a secret; a name the user gave this run
    (`explicit`, an `--env`) is theirs already, and says nothing."""
    env = current.get("env") if isinstance(current, dict) else None
    lines: list[str] = []
    for name, value in (env if isinstance(env, dict) else {}).items():
        if name in explicit or (name in written and written[name] == value):
            continue
        shown = shown_name(name)
        if name == "PYTHONPATH":
            lines.append(f"  {target}: removed your PYTHONPATH=... from kint's entry: "
                         f"{REFUSED_ENV['PYTHONPATH']}")
        elif not users_own(name, written):
            keep = f"(give yours with --env {shown}=... to keep it)"
            lines.append(f"  {target}: replaced your {shown}=... in kint's entry with kint's "
                         f"{keep}" if name in written else
                         f"  {target}: removed your {shown}=... from kint's entry, where kint's "
                         f"settings are setup's {keep}")
    return lines


def shown_name(name: str) -> str:
    """A variable's name as a line shows it: quoted when it is not a plain name."""
    return name if ENV_NAME.fullmatch(name) else repr(name)


def users_own(name: str, pinned: dict[str, str]) -> bool:
    """Whether a variable of kint's entry is the user's own, to keep: not a kint setting,
    which is setup's to write (this run's value, or none), nor PYTHONPATH, which setup
    keeps out of the server, nor one setup pins (an `--env` of the user's wins)."""
    from kint.settings.schema import BY_NAME

    return name not in BY_NAME and name != "PYTHONPATH" and name not in pinned


def refuse_users_values_on_argv(takes_only_argv: str, names: list[str], hint: str) -> None:
    """An entry a harness CLI takes only on its command line (`takes_only_argv`: "this
    Claude Code takes an entry only on its command line") that would carry values of the
    user's (`names`, from `users_values`) fails that harness (HarnessFailure), naming them,
    never their values: every user of the machine reads a command line."""
    if names:
        raise HarnessFailure(
            f"{takes_only_argv}, where every user of this machine can read it, and kint's "
            f"holds values of yours ({', '.join(names)})", hint, ErrorCode.HARNESS_ERROR)


def users_values(env: dict[str, str]) -> list[str]:
    """The names in `env` that are not kint settings: values of the user's own (an `--env`,
    a variable kept from kint's entry), which kint has not checked, so they are never put
    on another program's command line (every user of the machine reads /proc/<pid>/cmdline).
    kint's settings are checked before setup writes them: no secret, no keyed URL."""
    from kint.settings.schema import BY_NAME

    return sorted(k for k in env if k not in BY_NAME)
