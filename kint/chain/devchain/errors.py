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


# What to do about a record whose devchain does not answer, true on the machine that
# started it (its anvil stopped or died) and on one that copied its record (the first's
# devchain stopped, or started again: a start takes a new port). One wording wherever that is
# said: `kint devchain status` and `start` over a silent copy, and `fund`
# (powers.transfer_from_dev_account), where two said it in slightly different words. `stop`
# has its own, nothing being stopped (commands/devchain.py, `_left_hint`), and so has `start`
# over a silent copy whose anvil runs here (lifecycle._copy_in_force).
STOPPED_HINT = ("on the machine that started it, `kint devchain status` says whether it "
                "runs and `kint devchain start` starts it again; a machine with a copy of its "
                "record then copies the new KINT_HOME/devchain/devchain.json (a start takes a "
                "new port)")
