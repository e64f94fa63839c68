"""What every state file under KINT_HOME shares: the layout version, the error that names a
file that cannot be trusted, and the checks and readers the parsers are built from.

Why a module of its own: the mirror, the epoch cache, the conversion from the previous
layout and the reader of both all refuse a bad file the same way, by path and with a
reason, and none of them may import the others' module to do so.
"""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path
from typing import Any

import orjson

# 2: the mirror holds ids, leaves and provenance only (gzip), the epoch cache holds each
# epoch's compressed plaintext and clear header instead of its ciphertext and plaintext.
STATE_VERSION = 2
# The layout before it (full rows in the mirror, ciphertext + plaintext per epoch): read
# once, to convert (kint.tenant_worker.state_upgrade).
PREVIOUS_VERSION = 1
ZERO_DIGEST = "00" * 32
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# A state file is local and kint wrote it, but a garbled one must not exhaust memory.
MAX_INFLATED = 256 * 1024 * 1024


def previous_mirror(home: Path, space16: str) -> Path:
    """Where the previous layout kept a space's mirror: here, not in the conversion's module,
    so that a reader that only asks whether it is there (kint.commands.seen_here) need not
    load what converting one takes."""
    return home / f"mirror-{space16}.json"


class CorruptStateFile(Exception):
    """A state file exists but cannot be trusted. Names the file; nothing was rewritten."""

    def __init__(self, path: Path | str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


def read_bytes(path: Path | str) -> bytes:
    """The file's bytes; FileNotFoundError passes through (absent is not corrupt)."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        raise
    except OSError as err:
        raise CorruptStateFile(path, f"cannot be read ({err.strerror})") from None


def parse_json(path: Path | str, data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise CorruptStateFile(path, "is not valid JSON (truncated or garbled)") from None


def load_json(path: Path | str) -> Any:
    return parse_json(path, read_bytes(path))


def gunzip(path: Path | str, data: bytes) -> bytes:
    """One gzip member, whole: its CRC-32 catches a flipped byte, so a garbled compressed
    file is refused by name rather than read as something else."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, MAX_INFLATED + 1)
    except zlib.error:
        raise CorruptStateFile(path, "is not valid gzip (truncated or garbled)") from None
    if len(out) > MAX_INFLATED or not inflater.eof or inflater.unused_data:
        raise CorruptStateFile(path, "is not valid gzip (truncated or garbled)")
    return out


def gzip_json(obj: Any) -> bytes:
    """JSON, gzipped at level 6 with no timestamp (the same state gives the same bytes)."""
    return gzip.compress(orjson.dumps(obj), compresslevel=6, mtime=0)


def require(cond: bool, path: Path | str, why: str) -> None:
    if not cond:
        raise CorruptStateFile(path, why)


def require_version(path: Path | str, found: Any) -> None:
    """This layout's version, or a refusal that says what to do about another one."""
    if found == STATE_VERSION:
        return
    if found == PREVIOUS_VERSION:
        raise CorruptStateFile(path, f"was written by an earlier kint (state layout "
                                     f"{PREVIOUS_VERSION}) and was not converted with its "
                                     f"mirror; move it aside and run `kint pull`")
    raise CorruptStateFile(path, f"has unknown version {found!r}")


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_hex64(value: Any) -> bool:
    return isinstance(value, str) and bool(_HEX64.match(value))
