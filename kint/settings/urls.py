"""Endpoint URLs as kint shows them: without the parts where providers put API keys.

Pure string work, no settings and no chain: the schema (a refused value in an error),
the chain's configuration, status, doctor and `kint setup` all name endpoints, and none of
them may print a key.
"""

from __future__ import annotations

import urllib.parse


# What `redact_url` shows of a value urllib cannot split (a `[` that opens no IPv6 host).
UNSPLITTABLE_URL = "<not a URL kint can read>"


def redact_url(url: str) -> str:
    """Scheme, host and port only: an API key in a path or query never reaches a log line,
    a status table or an error. Never raises: it words the very values that are wrong (a
    refused setting, the environment a supervisor was started with), and one that urllib
    cannot split, shown as it is, could show the key it holds."""
    try:
        p = urllib.parse.urlsplit(url)
    except ValueError:
        return UNSPLITTABLE_URL
    host = p.hostname or ""
    try:
        netloc = f"{host}:{p.port}" if p.port else host
    except ValueError:  # a port that is no number (or out of range): it may be a key too
        netloc = f"{host}:<bad port>"
    rest = "/<redacted>" if (p.path.strip("/") or p.query) else ""
    return f"{p.scheme}://{netloc}{rest}"


# A part of an endpoint's URL shorter than this is not looked for in text (a path's `v2`
# would garble every message holding those letters); providers' API keys are far longer.
SECRET_PART_MIN_CHARS = 6


def url_secrets(url: str) -> list[str]:
    """The parts of `url` that `redact_url` hides (the user and password, the path and its
    segments, the query and its values, the fragment), longest first: the text an
    endpoint's error may quote back, which kint must not show. A value urllib cannot split
    is one secret whole."""
    try:
        p = urllib.parse.urlsplit(url.strip())
    except ValueError:
        return [url.strip()] if len(url.strip()) >= SECRET_PART_MIN_CHARS else []
    parts = {p.path + ("?" + p.query if p.query else ""), p.path, p.query, p.fragment,
             p.username or "", p.password or "", *p.path.split("/"), *p.query.split("&")}
    for key, value in urllib.parse.parse_qsl(p.query, keep_blank_values=True):
        parts.update((key, value))
    return sorted((part for part in parts if len(part.strip("/")) >= SECRET_PART_MIN_CHARS),
                  key=len, reverse=True)


def scrub_url_secrets(text: str, secrets: list[str]) -> str:
    """`text` with every one of `secrets` (`url_secrets`) replaced by `<redacted>`."""
    for part in secrets:
        text = text.replace(part, "<redacted>")
    return text


def url_may_hold_a_key(url: str) -> bool:
    """Whether `url` has a part where providers put API keys or passwords (a user, a path,
    a query, a fragment): the parts `redact_url` hides. One urllib cannot split may."""
    try:
        p = urllib.parse.urlsplit(url.strip())
    except ValueError:
        return True
    return bool(p.username or p.password or p.path.strip("/") or p.query or p.fragment)
