"""The devchain's one error type: what went wrong and what to do about it."""

from __future__ import annotations


class DevchainError(Exception):
    """What went wrong, and (`hint`) what to do about it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint
