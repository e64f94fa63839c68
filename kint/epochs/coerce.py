"""Argument normalisation shared by the epoch modules.

Callers hold digests both ways (raw bytes from the chain, 64 hex digits from a plaintext or a
state file), so every function here takes either and returns one form. A bad argument is a
programming error, so it is a plain `ValueError`, never an `EpochError`.
"""

from __future__ import annotations

import re

U64_MAX = 2**64 - 1
U32_MAX = 2**32 - 1

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")


def bytes32(value: bytes | bytearray | str, name: str) -> bytes:
    """32 raw bytes from bytes, or from 64 hex digits with or without `0x`."""
    if isinstance(value, (bytes, bytearray)):
        if len(value) != 32:
            raise ValueError(f"{name} is {len(value)} bytes, not 32")
        return bytes(value)
    if isinstance(value, str):
        digits = value[2:] if value[:2] in ("0x", "0X") else value
        if _HEX64.fullmatch(digits):
            return bytes.fromhex(digits)
    raise ValueError(f"{name} {value!r} is not 32 bytes or 64 hex digits")


def hex32(value: bytes | bytearray | str, name: str) -> str:
    """64 lowercase hex digits without `0x`: how a plaintext writes a digest."""
    return bytes32(value, name).hex()


def address(value: bytes | bytearray | str, name: str = "owner") -> bytes:
    """20 raw bytes of an address from `0x` + 40 hex digits (any case, checksum not
    required: the AAD hashes the bytes) or from 20 raw bytes."""
    if isinstance(value, (bytes, bytearray)) and len(value) == 20:
        return bytes(value)
    if isinstance(value, str) and _ADDRESS.fullmatch(value):
        return bytes.fromhex(value[2:])
    raise ValueError(f"{name} {value!r} is not a 20-byte address")


def uint(value: int, name: str, maximum: int) -> int:
    """An int in [0, maximum]; bool is refused (it is an int to Python, not to the wire)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise ValueError(f"{name} {value!r} is not an integer in [0, {maximum}]")
    return value
