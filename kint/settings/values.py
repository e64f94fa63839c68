"""How a setting's value is read and shown: an environment string or a TOML value parsed as
the setting's type (a value that does not parse is a BadValue, saying why), and a value as an
error, a log line or a report prints it (never a secret, never a URL's path or query, where
an API key lives). The table of settings these read their rules from is kint.settings.schema;
every layer that takes a value (the environment, config.toml, a request's settings) parses
it here, so each refuses the same values with the same words.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from typing import Any

from kint.settings.schema import SECRET_SET, Setting
from kint.settings.urls import redact_url


class BadValue(ValueError):
    """A value that does not parse as its setting's type (the message says why)."""


_TTL = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")


def _number(setting: Setting, value: Any, integer: bool) -> float | int:
    if isinstance(value, bool):
        raise BadValue("is not a number")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise BadValue("is not a number") from None
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadValue("is not a number")
    if integer:
        if value != int(value):
            raise BadValue("is not a whole number")
        return int(value)
    return float(value)


def parse(setting: Setting, value: Any) -> Any:
    """`value` (an environment string or a TOML value) as the setting's type. BadValue when
    it is not one; a number below the minimum is returned as it is (callers decide)."""
    kind = setting.kind
    if kind in ("float", "int"):
        return _number(setting, value, kind == "int")
    if kind == "flag":
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            # `1` is on, as in v0.3.0 (10-configuration.md); `true` or `yes` are off there
            # too, but said here rather than silently ignored.
            if value.strip() not in ("1", "0", ""):
                raise BadValue("is not 1 (on) or 0 (off)")
            return value.strip() == "1"
        raise BadValue("must be true or false")
    if not isinstance(value, str):
        raise BadValue("must be a string")
    if kind == "url":
        try:
            parts = urllib.parse.urlsplit(value)
        except ValueError:  # a `[` that opens no IPv6 host: refused as bad, not a crash
            raise BadValue("is not an http(s) URL") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BadValue("is not an http(s) URL")
        return value
    if kind == "address":
        # The check every owner typed goes through (EIP-55 included): a contract address in
        # mixed case that is not its checksum is as likely a typo, and a typo here names
        # another contract to anchor to. Imported here: only a set address pays for keccak.
        from kint.custody.ids import NOT_AN_ADDRESS, address_problem

        problem = address_problem(value) if value.startswith("0x") else NOT_AN_ADDRESS
        if problem is not None:
            raise BadValue(problem)
        return value
    if kind == "ttl":
        text = value.strip().lower()
        if text != "session" and _TTL.fullmatch(text) is None:
            raise BadValue("is not a duration (seconds, or 30d, 12h, 15m, or session)")
        return value
    return value


def given(setting: Setting, raw: Any) -> str:
    """A value as given (possibly bad), for an error or a log line: quoted, and a URL
    without its path or query, where an API key lives. An endpoint given as a TOML array
    or table is named by its kind only: it may hold the URL, key and all."""
    if setting.kind == "url" and isinstance(raw, str):
        return repr(redact_url(raw))
    if setting.kind == "url" and isinstance(raw, (list, dict)):
        return "an array" if isinstance(raw, list) else "a table"
    return repr(raw)


def shown(setting: Setting, value: Any) -> str:
    """A value as a report line prints it: secrets never, URLs without path or query."""
    if setting.secret:
        return SECRET_SET if value else "unset"
    if value is None:
        return "unset"
    if setting.kind == "flag":
        return "1" if value else "unset"
    if setting.kind == "url":
        return redact_url(value)
    if isinstance(value, float) and value == int(value):
        return str(int(value))
    return str(value)
