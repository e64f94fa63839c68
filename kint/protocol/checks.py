"""One `kint doctor` check as it travels: the worker's half makes them, the CLI's half makes
its own, and both print (or emit as JSON) the same shape.

`ok` false is a failure (`[FAIL]`, exit 1); `warn` marks a check that passes but should be
looked at (`[WARN]`, v0.3.0's mark). The hint is kept only where there is something to do,
so a passing line never carries advice.
"""

from __future__ import annotations

from typing import Any


def check(name: str, ok: bool, detail: str, hint: str = "", warn: bool = False
          ) -> dict[str, Any]:
    made: dict[str, Any] = {"name": name, "ok": ok, "detail": detail,
                            "hint": hint if not ok or warn else ""}
    if warn:
        made["warn"] = True
    return made
