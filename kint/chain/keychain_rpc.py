"""v0.3.0's primary endpoint on macOS: the Alchemy API key in the Keychain.

v0.3.0 (10-configuration.md, "Keychain, and machines without one") reads, when nothing sets
KINT_RPC_URL, the generic password `dev.api.alchemy` (account `api-key`) through macOS's
`security` tool, and anchors through `https://base-mainnet.g.alchemy.com/v2/<key>`. kint
never writes that item. Off macOS, or with KINT_NO_KEYCHAIN=1, it is never asked.

The `security` tool, not the `keyring` package: the user makes the item with `security
add-generic-password`, whose default access list lets that same tool read it without a
prompt, where another program would raise a Keychain dialog from a background worker.

The answer is kept for a short while: the workers resolve their chain on every request.
The key travels on the tool's stdout, never on an argv, and is never logged; the URL is
shown redacted like any endpoint (kint.settings.urls.redact_url).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time

from kint.settings.complaints import complain

SERVICE = "dev.api.alchemy"
ACCOUNT = "api-key"
ALCHEMY_BASE_URL = "https://base-mainnet.g.alchemy.com/v2/"
SOURCE = "macOS Keychain"
# How long one answer of the Keychain serves (a changed item is seen within this).
KEEP_S = 30.0
_TOOL_TIMEOUT_S = 5.0
# macOS's own tool, by its path: the first `security` on PATH would choose the endpoint.
SECURITY_TOOL = "/usr/bin/security"
# What an API key looks like; anything else in the item is not put in a URL.
_KEY = re.compile(r"[A-Za-z0-9_-]{8,128}")

_lock = threading.Lock()
_kept: tuple[float, str | None] | None = None


def forget() -> None:
    """Ask the Keychain again next time (after the item changed, in tests)."""
    global _kept
    with _lock:
        _kept = None


def _ask() -> str | None:
    if not os.path.exists(SECURITY_TOOL):
        return None
    try:
        out = subprocess.run([SECURITY_TOOL, "find-generic-password", "-s", SERVICE, "-a", ACCOUNT,
                              "-w"], capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S,
                             stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None  # no such item (44), a locked Keychain, a refusal: the public default
    key = out.stdout.strip()
    if _KEY.fullmatch(key) is None:
        complain(f"the Keychain item {SERVICE} does not hold an API key (letters, digits, "
                 f"`-` and `_`); the primary endpoint is the public default")
        return None
    return ALCHEMY_BASE_URL + key


def keychain_rpc_url() -> str | None:
    """The Alchemy endpoint from the Keychain, or None: off macOS, with KINT_NO_KEYCHAIN=1,
    or when the item is absent, unreadable or holds no key."""
    global _kept
    from kint.custody.local_secret import keychain_enabled

    if not keychain_enabled():
        return None
    with _lock:  # one ask at a time: a worker's pool threads wait for it, not each spawn one
        now = time.monotonic()
        if _kept is None or now - _kept[0] >= KEEP_S:
            _kept = (now, _ask())
        return _kept[1]
