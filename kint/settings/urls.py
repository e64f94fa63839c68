"""Endpoint URLs as kint shows them: without the parts where providers put API keys.

Pure string work, no settings and no chain: the schema (a refused value in an error),
the chain's configuration, status, doctor and `kint setup` all name endpoints, and none of
them may print a key.
"""

from __future__ import annotations

import urllib.parse


def redact_url(url: str) -> str:
    """Scheme, host and port only: an API key in a path or query never reaches a log line,
    a status table or an error."""
    p = urllib.parse.urlsplit(url)
    host = p.hostname or ""
    try:
        netloc = f"{host}:{p.port}" if p.port else host
    except ValueError:  # a port that is no number (or out of range): it may be a key too
        netloc = f"{host}:<bad port>"
    rest = "/<redacted>" if (p.path.strip("/") or p.query) else ""
    return f"{p.scheme}://{netloc}{rest}"


def url_may_hold_a_key(url: str) -> bool:
    """Whether `url` has a part where providers put API keys or passwords (a user, a path,
    a query, a fragment): the parts `redact_url` hides."""
    p = urllib.parse.urlsplit(url.strip())
    return bool(p.username or p.password or p.path.strip("/") or p.query or p.fragment)
