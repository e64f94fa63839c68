"""What can be wrong with an epoch, sorted by what a reader may do about it.

A pull treats the three families differently (06-epochs.md, "An epoch nobody can open"):

- `Unopenable`: this machine cannot open the epoch at all (its header does not parse, the
  ciphertext is the wrong length, the data key in hand is not the one it was sealed under,
  or AES-GCM refuses it). Nobody here has read it, so a `--full` walk may step past it when a
  later snapshot opens.
- `Malformed`: the tag held, so a data-key holder wrote it, but the payload is not a valid
  epoch (bad padding, bad gzip, a plaintext of the wrong shape).
- `Disagreement`: the epoch opened and contradicts its header or the chain.

The last two are never walked past. `EpochTooLarge` is the writer's side: what push refuses
before anything is sent.
"""

from __future__ import annotations

from typing import Any


class EpochError(Exception):
    """The bytes are not an epoch this reader can apply. The message says why."""


class Unopenable(EpochError):
    """The epoch cannot be opened with what this machine holds."""


class HeaderError(Unopenable):
    """The header does not parse as a kint v1 envelope header."""


MalformedHeader = HeaderError
"""The name connect's header walk (kint/tenant_worker/head_header.py) catches."""


class UnsupportedVersion(HeaderError):
    """The version byte is not 0x01."""

    def __init__(self, version: int) -> None:
        super().__init__("unsupported envelope version")
        self.version = version


class CiphertextLengthError(Unopenable):
    """The bytes after the header are not `lenBucket + 16` long."""


class WrongDataKey(Unopenable):
    """The header's `dek_id` is not the id of the data key in hand."""

    def __init__(self, expected: bytes, got: bytes) -> None:
        super().__init__("dek_id mismatch: wrong data key for this epoch")
        self.header_dek_id = expected
        self.key_dek_id = got


class AuthenticationFailed(Unopenable):
    """AES-GCM refused the ciphertext: altered, or bound to another owner, space or slot."""


class Malformed(EpochError):
    """The epoch decrypted, but what is inside is not a valid epoch payload."""


class PayloadError(Malformed):
    """The padded payload or its gzip stream is not well formed."""


class PlaintextError(Malformed, ValueError):
    """The plaintext JSON does not have the epoch's shape (also raised when a writer asks for
    a plaintext that could not be read back, hence a ValueError too)."""


class Disagreement(EpochError):
    """The plaintext and the header or chain say different things about `field`."""

    def __init__(self, field: str, message: str, plaintext_value: Any = None,
                 expected: Any = None) -> None:
        super().__init__(message)
        self.field = field
        self.plaintext_value = plaintext_value
        self.expected = expected


class EpochTooLarge(ValueError):
    """What a writer wants to anchor cannot fit the epoch it would go in."""
