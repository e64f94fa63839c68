"""Where a complaint about a setting goes: the log of a process that keeps one, else stderr.

Apart from the loader so that what the loader itself relies on (the config file's reload,
the Keychain's endpoint) can complain without importing the loader back.
"""

from __future__ import annotations

import logging
import sys

log = logging.getLogger("kint.settings")

# Set by `loader.configure(daemon=...)`: the supervisor and its workers log, never print.
in_daemon = False

# The lines this process printed itself (a `kint` command): a worker's notice that says
# the same is not printed twice.
printed: set[str] = set()


def complain(line: str) -> None:
    """Say what is wrong with a setting: in the log of a process that keeps one (the
    daemon, kint-server), else on stderr as a `kint:` line (a command)."""
    if in_daemon or logging.getLogger().handlers:
        log.warning("%s", line)
        return
    text = f"kint: {line}"
    if text not in printed:
        printed.add(text)
        print(text, file=sys.stderr)
