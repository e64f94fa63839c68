"""`$KINT_HOME/config.toml`: read with the standard library's tomllib and checked key by
key, so a bad value is refused with the file and the key named.

```toml
rpc_timeout = 5                      # the machine's value (every space)
quiet_seconds = 120

[spaces."alice@hermes:work"]         # one space: its label, or its id (16 or 64 hex)
rpc_url = "https://base.example/v1"
quiet_seconds = 30
```

A key is a setting's name without `KINT_`, in lower case. Secrets are refused: they are
read from the environment only. So is anything that is not a kint setting, so a typo is
named instead of being silently ignored.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from kint.settings.schema import BY_KEY, SETTINGS, Setting
from kint.settings.values import BadValue, given, parse, shown

CONFIG_NAME = "config.toml"
SPACES_TABLE = "spaces"
MAX_CONFIG_BYTES = 1024 * 1024
_SECRET_KEYS = {s.key: s for s in SETTINGS if s.secret}
_NOT_IN_FILE = {s.key: s for s in SETTINGS if not s.in_file and not s.secret}


class ConfigError(Exception):
    """A config file kint refuses: which file, which key, and why."""

    def __init__(self, path: Path, key: str | None, why: str) -> None:
        self.path, self.key, self.why = path, key, why
        where = f"{path}: {key}" if key else str(path)
        super().__init__(f"{where}: {why}")


@dataclass(frozen=True)
class ConfigFile:
    """A config file that passed every check: the machine's values and each space's table
    (setting name -> value of its type)."""

    path: Path
    exists: bool = False
    machine: dict[str, Any] = field(default_factory=dict)
    spaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    # While the file on disk is refused and this is the last good configuration serving in
    # its place: the strict settings (the chain's) that must not give way to the layer
    # below, each with why (`with_refusals`), at the top level and in each space's table.
    refused: dict[str, str] = field(default_factory=dict)
    refused_spaces: dict[str, dict[str, str]] = field(default_factory=dict)
    # Whether the refused file could not be read as TOML at all (or not read): then which
    # keys it has is unknown, and each line in `refused` says what is wrong with the file
    # (where it does not parse, as tomllib says it) and the setting it is about, never a
    # key the file may not have.
    unparsed: bool = False

    def space_table(self, names: Iterable[str]) -> tuple[str, dict[str, Any]] | None:
        """The table of the first of `names` (a label, a space id) that has one."""
        for name in names:
            table = self.spaces.get(name)
            if table is not None:
                return name, table
        return None

    def space_refusal(self, names: Iterable[str], setting: str) -> tuple[str, str] | None:
        """(label, why) when the refused file's table of the first of `names` that has one
        (there or in the configuration serving) would set `setting` otherwise."""
        for name in names:
            if name in self.refused_spaces or name in self.spaces:
                why = self.refused_spaces.get(name, {}).get(setting)
                return (name, why) if why is not None else None
        return None


def _key_path(key: str, label: str | None = None, inner: str | None = None) -> str:
    """How the error names a key: `rpc_url`, `spaces."<label>"`, `spaces."<label>".rpc_url`."""
    if label is None:
        return key
    quoted = '"' + label.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{key}.{quoted}" + (f".{inner}" if inner is not None else "")


def _value(path: Path, setting: Setting, raw: Any, key: str) -> Any:
    try:
        value = parse(setting, raw)
    except BadValue as err:
        raise ConfigError(path, key, f"{given(setting, raw)} {err}") from None
    if setting.minimum is not None and value < setting.minimum:
        minimum = setting.minimum
        shown = int(minimum) if float(minimum).is_integer() else minimum
        raise ConfigError(path, key, f"{given(setting, raw)} is below the minimum, {shown}")
    return value


def _setting(path: Path, key: str, where: str) -> Setting:
    if key in _SECRET_KEYS:
        raise ConfigError(path, where, f"{_SECRET_KEYS[key].name} is a secret: kint reads it "
                          f"from the environment only (the service's environment file), never "
                          f"from {CONFIG_NAME}")
    if key in _NOT_IN_FILE:
        raise ConfigError(path, where, f"{_NOT_IN_FILE[key].name} cannot be set in "
                          f"{CONFIG_NAME}: set it in the environment of the command")
    setting = BY_KEY.get(key)
    if setting is None:
        raise ConfigError(path, where, "is not a kint setting (docs/settings.md lists them)")
    return setting


def parse_config(path: Path, data: bytes) -> ConfigFile:
    """Check every key of `data` (the bytes of `path`); ConfigError at the first bad one."""
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(path, None, f"is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(path, None, "is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(path, None, f"is not valid TOML: {err}") from None
    machine: dict[str, Any] = {}
    spaces: dict[str, dict[str, Any]] = {}
    for key, raw in doc.items():
        if key == SPACES_TABLE:
            if not isinstance(raw, dict):
                raise ConfigError(path, key, 'must be tables: [spaces."<label>"]')
            for label, table in raw.items():
                where = _key_path(SPACES_TABLE, label)
                if not isinstance(table, dict):
                    raise ConfigError(path, where, "must be a table of settings")
                values: dict[str, Any] = {}
                for skey, sraw in table.items():
                    swhere = _key_path(SPACES_TABLE, label, skey)
                    setting = _setting(path, skey, swhere)
                    if not setting.per_space:
                        raise ConfigError(path, swhere, f"{setting.name} is not a per-space "
                                          f"setting: set it at the top level")
                    values[setting.name] = _value(path, setting, sraw, swhere)
                spaces[label] = values
            continue
        setting = _setting(path, key, _key_path(key))
        if isinstance(raw, dict):
            raise ConfigError(path, _key_path(key), "must be a value, not a table")
        machine[setting.name] = _value(path, setting, raw, _key_path(key))
    return ConfigFile(path=path, exists=True, machine=machine, spaces=spaces)


def read_config(path: Path) -> ConfigFile:
    """The config file at `path`; an absent file is an empty configuration."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ConfigFile(path=path)
    except OSError as err:
        raise ConfigError(path, None, f"cannot be read: {err.strerror or err}") from None
    return parse_config(path, data)


_ABSENT = object()


def _refusal(setting: Setting, raw: Any, serving: Any, err: ConfigError) -> str | None:
    """Why the refused file's value of a strict setting (`raw`, or _ABSENT) must not give
    way: it does not parse, or it parses but nothing serves in its place except the layer
    below (`serving` is _ABSENT: no last good configuration sets it). None otherwise: a
    last good value serves in its place, as for every setting."""
    if raw is _ABSENT:
        return None
    try:
        value = parse(setting, raw)
    except BadValue as bad:
        return f"{given(setting, raw)} {bad}"
    if serving is not _ABSENT:
        return None
    return (f"{shown(setting, value)} is not in force: the file is refused ({err}), and no last "
            f"good configuration sets it")


def with_refusals(serving: ConfigFile, data: bytes | None, err: ConfigError) -> ConfigFile:
    """`serving` (the last good configuration, in place of the file `err` refused) marked
    with each strict setting that would otherwise give way to the layer below (the
    default: Base mainnet) because the file was refused: one it sets to a value that does
    not parse, or to a good one no last good configuration sets. A file that cannot be read
    as TOML marks each one the last good configuration does not set (which chain the file
    names is unknown), each said by what is wrong with the file, not by a key of it, and
    named: beside a last good `rpc_url` that serves, the refusal is of the contract, and a
    line naming no setting left the user to guess which."""
    strict = [s for s in SETTINGS if s.strict]
    base = replace(serving, refused={}, refused_spaces={}, unparsed=False)
    try:
        doc = tomllib.loads(data.decode("utf-8")) if data is not None else None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        doc = None
    if doc is None:  # the file's own fault, where tomllib found it: no key of it is known
        return replace(base, refused={
            s.name: f"{err.path} {err.why}, so which {s.name} it sets, if any, is unknown"
            for s in strict if s.name not in serving.machine}, unparsed=True)
    refused = {}
    for s in strict:
        why = _refusal(s, doc.get(s.key, _ABSENT), serving.machine.get(s.name, _ABSENT), err)
        if why is not None:
            refused[s.name] = why
    tables = doc.get(SPACES_TABLE)
    refused_spaces: dict[str, dict[str, str]] = {}
    for label, table in (tables.items() if isinstance(tables, dict) else ()):
        if not isinstance(table, dict):
            continue
        served = serving.spaces.get(label, {})
        found = {}
        for s in strict:
            why = _refusal(s, table.get(s.key, _ABSENT), served.get(s.name, _ABSENT), err)
            if why is not None:
                found[s.name] = why
        if found:
            refused_spaces[label] = found
    return replace(base, refused=refused, refused_spaces=refused_spaces)
