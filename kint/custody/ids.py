"""The two identifiers every custody derivation binds: the owner address and the space id.

Why a module of its own: the KEK info, the vault message, the file names and the recovery
file all need the same bytes from the same inputs, and a caller may hold either form (a
checksummed string from the CLI, a lowercase one from a file, raw bytes from a header).
Normalising in one place keeps a different spelling from ever giving a different key.

The EIP-55 checksum is computed here from keccak (kint.keccak, which the rows' hashing loads
anyway) rather than through eth_utils: its import (pydantic and the rest, ~0.1 s of CPU)
was most of what `kint canonical-payload`, `kint connect` and the `--owner` checks of the
chain commands loaded, where nothing else of it runs.
"""

from __future__ import annotations

import re

from kint.custody.errors import BadOwner, BadSpace
from kint.keccak import keccak

_ADDRESS = re.compile(r"(?:0[xX])?[0-9a-fA-F]{40}")
_SPACE_HEX = re.compile(r"(?:0[xX])?[0-9a-fA-F]{64}")


def owner_bytes(owner: str | bytes) -> bytes:
    """The owner's 20 bytes, from an address string in any case (with or without 0x) or
    from 20 raw bytes. The checksum of a mixed-case string is not enforced: the owner is
    always re-derived from bytes, and refusing a casing would only lock a user out."""
    return _id_bytes(owner, 20, _ADDRESS, BadOwner)


# Why a value typed or sent as an address is refused, worded to follow the value.
NOT_AN_ADDRESS = "is not an address (0x and 40 hex characters)"
NOT_ITS_CHECKSUM = ("does not match its EIP-55 checksum (the case of its letters): a "
                    "character may be mistyped")


def address_problem(value: object) -> str | None:
    """Why `value` is not an address to act on, or None: text of 40 hex characters (with
    or without 0x), whose letters, when some are upper case and some lower, are its EIP-55
    checksum. One in a single case carries no checksum and is taken as it is, as EIP-55
    has it. A mixed case that is not the checksum is most likely a character mistyped (a
    different owner, whose space and vault are not the user's), which is what the
    checksum is for; eth_utils' `is_address` (6.x) no longer checks it."""
    if not isinstance(value, str) or _ADDRESS.fullmatch(value) is None:
        return NOT_AN_ADDRESS
    digits = value[-40:]
    if digits not in (digits.lower(), digits.upper()) and \
            checksum_address(digits)[2:] != digits:
        return NOT_ITS_CHECKSUM
    return None


def is_address_text(value: object) -> bool:
    """Whether `value` is an address written as text that `address_problem` takes: the
    check every address typed on the command line or sent to a worker goes through."""
    return address_problem(value) is None


def checksum_address(address: str | bytes) -> str:
    """An address (any case, with or without 0x, or 20 bytes) EIP-55 checksummed: each hex
    letter upper case where the same nibble of keccak256(the lower-case hex) is 8 or more.
    BadOwner when it is no address."""
    lower = owner_bytes(address).hex()
    nibbles = keccak(lower.encode("ascii")).hex()
    return "0x" + "".join(c.upper() if int(n, 16) > 7 else c for c, n in zip(lower, nibbles))


def owner_address(owner: str | bytes) -> str:
    """The owner as an EIP-55 checksummed `0x...` string (what messages and files show)."""
    return checksum_address(owner)


def space_bytes(space: str | bytes) -> bytes:
    """The space id's 32 bytes, from 64 hex characters (any case, optional 0x) or bytes."""
    return _id_bytes(space, 32, _SPACE_HEX, BadSpace)


def _id_bytes(value: object, size: int, text: re.Pattern[str],
              refused: type[Exception]) -> bytes:
    """`value`'s `size` bytes: raw bytes of that length, or text `text` matches (0x and
    hex digits, white space around them taken); `refused` raised for anything else. The
    owner and the space id are read the same way, here once."""
    if isinstance(value, (bytes, bytearray)):
        if len(value) != size:
            raise refused()
        return bytes(value)
    if not isinstance(value, str) or not text.fullmatch(value.strip()):
        raise refused()
    return bytes.fromhex(value.strip()[-2 * size:])


def space_hex(space: str | bytes) -> str:
    """The space id as 64 lowercase hex characters, no prefix."""
    return space_bytes(space).hex()


def space16(space: str | bytes) -> str:
    """The first 16 hex characters of the space id: what names a space's files."""
    return space_hex(space)[:16]
