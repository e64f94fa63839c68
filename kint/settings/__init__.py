"""kint's settings: one schema, one config file, one way to read a value.

- `environ`: how a variable of kint's environment is read (empty counts as unset).
- `schema`: every setting (name, type, default, scope, who reads it, secret, its docs line).
- `values`: a value parsed as its setting's type (or refused, saying why), and as it is shown.
- `tomlfile`: `$KINT_HOME/config.toml`, checked key by key (a bad value names file and key).
- `reload`: the file read again when its stat changes; the last good one keeps serving.
- `loader`: the layers (default < file < environment < the file's space table < this call)
  and each value's source; `value(name)` reads a setting anywhere.
- `complaints`: where a complaint about a setting goes (the log, else stderr, once).
- `urls`: endpoints as shown, without the parts that may hold an API key.
- `wire`: what a request carries, what the worker applies, the one-line reports.
- `secret_proof`: whether a command's secret is the supervisor's, told without sending it.
- `report`: `kint config show`'s entries.
- `started_with`: the settings a supervisor took from its environment, as its status lists
  them.
- `docs`: the tables of docs/settings.md, made from the schema.

The names below are imported from their module the first time one is asked for
(`settings.value`), not when the package is: `kint.paths` reads KINT_HOME through
`kint.settings.environ`, and a fresh `kint supervisor status` must not pay for the schema,
the config file's reader and logging it never uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kint.settings.environ import environ_value
    from kint.settings.loader import (DAEMON_ENV, DEFAULT, FILE, SESSION, THIS_CALL, Value,
                                      config, configure, lookup, machine_lookup, overlay,
                                      value, watch)
    from kint.settings.schema import BY_NAME, SETTINGS, Setting
    from kint.settings.tomlfile import ConfigError, ConfigFile

# Each exported name and the module that defines it.
_MODULE_OF = {
    **dict.fromkeys(("DAEMON_ENV", "DEFAULT", "FILE", "SESSION", "THIS_CALL", "Value", "config",
                     "configure", "lookup", "machine_lookup", "overlay", "value", "watch"),
                    "loader"),
    "environ_value": "environ",
    **dict.fromkeys(("BY_NAME", "SETTINGS", "Setting"), "schema"),
    **dict.fromkeys(("ConfigError", "ConfigFile"), "tomlfile"),
}

# Written out, not computed from _MODULE_OF: a checker that reads the source (pyflakes,
# `make lint`) then sees the names imported above for type checkers as this package's
# exports, not as unused imports. tests/test_settings_exports.py keeps the three lists equal.
__all__ = [
    "BY_NAME", "ConfigError", "ConfigFile", "DAEMON_ENV", "DEFAULT", "FILE", "SESSION",
    "SETTINGS", "Setting", "THIS_CALL", "Value", "config", "configure", "environ_value",
    "lookup", "machine_lookup", "overlay", "value", "watch",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'kint.settings' has no attribute {name!r}")
    found = getattr(importlib.import_module(f"kint.settings.{module}"), name)
    globals()[name] = found  # the next lookup is an ordinary attribute
    return found
