"""How kint reads a variable of its own environment: an empty or blank value counts as unset.

The one primitive every layer uses, in a module of its own: `kint.paths` finds KINT_HOME
with it, and a fresh `kint supervisor status` must not load the schema and the config
file's reader (kint.settings.loader) just for that.
"""

from __future__ import annotations

import os
from typing import Mapping


def environ_value(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """A variable as kint reads it: an empty value counts as unset, and so does one of
    spaces only (`KINT_TENANT="  "` would otherwise name a tenant of two spaces, and
    `KINT_HOME=" "` a folder of that name in the current one)."""
    raw = (os.environ if environ is None else environ).get(name)
    return raw if raw and not raw.isspace() else None
