"""The devchain's one error type: what went wrong, what to do about it, and its code."""

from __future__ import annotations

from kint.protocol import ErrorCode


class DevchainError(Exception):
    """What went wrong, (`hint`) what to do about it, and (`code`, from the protocol's
    closed set) what kind of failure it is: by default the local chain did not work as an
    endpoint (RPC_UNAVAILABLE); a record or folder under KINT_HOME that cannot be trusted is
    CORRUPT_STATE, an anvil that cannot be found or run CONFIG_INVALID."""

    def __init__(self, message: str, hint: str | None = None,
                 code: ErrorCode = ErrorCode.RPC_UNAVAILABLE) -> None:
        super().__init__(message)
        self.hint = hint
        self.code = code


class DevchainSilent(DevchainError):
    """The devchain a record names did not answer (RPC_UNAVAILABLE) before anything was
    sent to it: a stopped devchain, as for `kint devchain status`, which a command may
    refuse with that command's status rather than a failure's."""


# A copied record (a second machine's, docs/quickstart.md) whose endpoint does not answer:
# its anvil is another KINT_HOME's, started and stopped there; a start there takes a new port.
COPY_SILENT_HINT = ("on the machine that started it, `kint devchain status` says whether it "
                    "runs and `kint devchain start` starts it again; then copy its "
                    "KINT_HOME/devchain/devchain.json here again (a start takes a new port)")
