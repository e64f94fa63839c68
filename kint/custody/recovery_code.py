"""The recovery code: the data key itself, in a form a person can copy off the machine.

code = base32(DEK || sha256(DEK)[:2]), padding stripped, in hyphenated groups of four: 55
characters in 14 groups, the last of three. Why this shape: it opens the vault without the
wallet or any passphrase, so it must survive being written down and typed back. Decoding
ignores case, hyphens and whitespace; the 2-byte checksum catches a typo, and a code whose
unused trailing bits are not zero (which base32 decoders silently drop) counts as a typo too.

The checksum only proves the code was typed right, not that it belongs to this vault:
callers compare `dek_id` of the decoded key with the vault's before using it.

`RECOVERY-<space16>.txt` (0600, atomic) holds the code with the owner and space it is for.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from pathlib import Path

from kint.custody.data_key import DEK_LEN, check_data_key
from kint.custody.errors import BadRecoveryCode, RecoveryChecksumFailed
from kint.custody.files import space_file, write_private
from kint.custody.ids import owner_address, space_hex

CHECKSUM_LEN = 2
CODE_CHARS = 55  # base32 of 34 bytes, unpadded
GROUP = 4
_CODE = re.compile(r"[A-Z2-7]{%d}" % CODE_CHARS)
_IGNORED = re.compile(r"[\s-]+")

RECOVERY_WARNING = ("Keep this somewhere that is not this machine. It opens the vault without "
                    "the wallet.")


def encode_recovery_code(dek: bytes) -> str:
    """The recovery code of `dek`: 55 base32 characters in groups of 4 joined by '-'."""
    dek = check_data_key(dek)
    raw = dek + hashlib.sha256(dek).digest()[:CHECKSUM_LEN]
    text = base64.b32encode(raw).decode("ascii").rstrip("=")
    return "-".join(text[i:i + GROUP] for i in range(0, len(text), GROUP))


def decode_recovery_code(code: str) -> bytes:
    """The DEK a recovery code encodes. Case, hyphens and whitespace do not matter.

    BadRecoveryCode when it is not 55 base32 characters; RecoveryChecksumFailed
    ("recovery code checksum failed (typo?)") when they do not check out.
    """
    if not isinstance(code, str):
        raise BadRecoveryCode()
    compact = _IGNORED.sub("", code).upper()
    if not _CODE.fullmatch(compact):
        raise BadRecoveryCode()
    try:
        raw = base64.b32decode(compact + "=" * (-len(compact) % 8))
    except (binascii.Error, ValueError):  # pragma: no cover - the regex admits only base32
        raise BadRecoveryCode() from None
    dek, check = raw[:DEK_LEN], raw[DEK_LEN:]
    if hashlib.sha256(dek).digest()[:CHECKSUM_LEN] != check:
        raise RecoveryChecksumFailed()
    if encode_recovery_code(dek).replace("-", "") != compact:  # non-zero unused bits
        raise RecoveryChecksumFailed()
    return dek


def recovery_file_path(home: Path | None, space: str | bytes) -> Path:
    return space_file(home, "RECOVERY", space, ".txt")


def recovery_file_text(owner: str | bytes, space: str | bytes, dek: bytes) -> str:
    """The file's content: who it is for, the warning, a blank line, the code."""
    return (f"kint recovery code for owner {owner_address(owner)}, space {space_hex(space)}\n"
            f"{RECOVERY_WARNING}\n"
            f"\n"
            f"{encode_recovery_code(dek)}\n")


def write_recovery_file(home: Path | None, owner: str | bytes, space: str | bytes,
                        dek: bytes) -> Path:
    """Write `RECOVERY-<space16>.txt` at 0600 through an atomic replace; returns its path."""
    path = recovery_file_path(home, space)
    write_private(path, recovery_file_text(owner, space, dek).encode("ascii"))
    return path


def recovery_file_present(home: Path | None, space: str | bytes) -> bool:
    """True when the recovery file exists and is not empty (push refuses otherwise on the
    machine that created the vault)."""
    try:
        return recovery_file_path(home, space).stat().st_size > 0
    except OSError:
        return False


def read_recovery_file(home: Path | None, space: str | bytes) -> bytes:
    """The DEK in the space's recovery file: its last non-empty line, decoded and checked.
    FileNotFoundError when there is none; BadRecoveryCode when it holds no valid code."""
    text = recovery_file_path(home, space).read_text("utf-8", errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise BadRecoveryCode()
    return decode_recovery_code(lines[-1])
