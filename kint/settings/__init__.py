"""kint's settings: one schema, one config file, one way to read a value.

- `schema`: every setting (name, type, default, scope, who reads it, secret, its docs line).
- `tomlfile`: `$KINT_HOME/config.toml`, checked key by key (a bad value names file and key).
- `reload`: the file read again when its stat changes; the last good one keeps serving.
- `loader`: the layers (default < file < environment < the file's space table < this call)
  and each value's source; `value(name)` reads a setting anywhere.
- `wire`: what a request carries, what the worker applies, the one-line reports.
- `report`: `kint config show`'s entries.
- `docs`: the tables of docs/settings.md, made from the schema.
"""

from kint.settings.loader import (DAEMON_ENV, DEFAULT, FILE, SESSION, THIS_CALL, Value, config,
                                  configure, environ_value, lookup, machine_lookup, overlay,
                                  value, watch)
from kint.settings.schema import BY_NAME, SETTINGS, Setting
from kint.settings.tomlfile import ConfigError, ConfigFile

__all__ = [
    "BY_NAME", "DAEMON_ENV", "DEFAULT", "FILE", "SESSION", "SETTINGS", "THIS_CALL",
    "ConfigError", "ConfigFile", "Setting", "Value", "config", "configure", "environ_value",
    "lookup", "machine_lookup", "overlay", "value", "watch",
]
