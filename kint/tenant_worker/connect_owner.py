"""Who a space is connected to and on which chain, for `kint connect`: the owner given
(`--owner`, checksummed) or `--dev`'s throwaway one, a change of owner taken only while
this machine holds nothing of the old vault, a move to another chain or contract taken
only while it holds none of the old one's epochs, and whether local wraps may be a vault
this machine started. Each refusal names what to do instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount

from kint import settings
from kint.chain.config import ChainConfig
from kint.custody.ids import NOT_ITS_CHECKSUM, address_problem, checksum_address
from kint.custody.recovery_code import recovery_file_path
from kint.custody.wraps import read_wraps
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import CHECKSUM_HINT
from kint.tenant_worker import dev_owner
from kint.tenant_worker.enrolled_chain import other_chain
from kint.tenant_worker.enrolment import Enrolment
from kint.tenant_worker.owner_bound import bound_to_owner
from kint.tenant_worker.space import SpaceContext

def checked_owner(args: dict[str, Any]) -> str:
    owner = args.get("owner")
    if not owner:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "--owner 0x... is required")
    problem = address_problem(owner)
    if problem == NOT_ITS_CHECKSUM:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"--owner {owner!r} {problem}",
                            CHECKSUM_HINT)
    if problem is not None:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"--owner {owner!r} is not an address",
                            "give the owner wallet's address, 0x and 40 hex characters")
    return checksum_address(owner)


def owner_for(home: Path, space: str, chain: ChainConfig, existing: Enrolment | None,
               args: dict[str, Any]) -> tuple[str, LocalAccount | None, dict[str, Any]]:
    """The owner, the devchain's owner account (`--dev` only, else None), and the args
    with `--dev`'s derive signature in them. `--dev` refuses a chain that is not the
    devchain and keeps the space's owner account; a new one is only in memory here (the
    caller keeps its key, `dev_owner.keep_owner`, once every check passed). Another
    owner than the space's is for `owner_change` to take or refuse."""
    dev_account: LocalAccount | None = None
    if args.get("dev"):
        if not chain.devchain:
            raise ProtocolError(ErrorCode.BAD_REQUEST, "--dev needs the devchain",
                                "run `kint devchain start`, and unset KINT_RPC_URL")
        if existing is not None:
            dev_account = dev_owner.load_owner(home, existing.owner)
        else:  # a `--dev` connect killed before its enrolment: the owner its wraps name
            local = read_wraps(home, space)
            if local is not None:
                dev_account = dev_owner.owner_of_wraps(home, space,
                                                       {w.tag for w in local.wraps})
        dev_account = dev_account or dev_owner.new_owner()  # kept by connect, if it goes on
        owner = dev_account.address
        args = {**args, "signature": dev_owner.derive_signature(dev_account)}
    else:
        owner = checked_owner(args)
    return owner, dev_account, args


def owner_change(ctx: SpaceContext, existing: Enrolment | None, owner: str) -> str | None:
    """The owner this space was connected to, when `owner` is another one and this machine
    holds no epoch of the old one's vault (its mirror at 0, no watermark, no push on its
    way in a pending journal): the space
    connects to the new owner, and nothing of the old vault is kept. That is a connect
    given the wrong owner, which started a fresh vault nobody anchored: v0.3.0's way out
    (03-new-machine.md, the fresh-vault warning) is to connect again with the right one,
    which was refused here. With an epoch of the old vault here it is still refused
    (another owner's memory belongs to another tenant)."""
    if existing is None or existing.owner == owner:
        return None
    if bound_to_owner(ctx.seen_here, ctx.state.files["pending"]):
        raise ProtocolError(ErrorCode.BAD_REQUEST,
                            f"this space is connected to owner {existing.owner}, not {owner}",
                            "another owner's memory takes a tenant of its own: `kint "
                            "--tenant T` on the command line, KINT_TENANT in kint-server's "
                            "MCP configuration (nothing was changed)")
    return existing.owner


def owner_changed_words(ctx: SpaceContext, old: str | None,
                         recovery_path: Path | None) -> str | None:
    """What connect says of an owner change: from whom, and, when the recovery file here is
    still the old vault's (a fresh vault's file, not rewritten by this connect), that it
    is not this vault's code."""
    if old is None:
        return None
    words = (f"this space was connected to owner {old}, of whose vault this machine holds no "
             f"epoch; its wraps and key are replaced")
    stale = recovery_file_path(ctx.config.home, ctx.config.space_id)
    if recovery_path is None and stale.exists():
        words += (f"; {stale} still holds that vault's recovery code: `kint recovery-code` "
                  f"writes this one's")
    return words


def wraps_may_be_ours(existing: Enrolment | None) -> bool:
    """Whether local wraps, with no epoch found on chain, may be a vault this machine
    started. Before any enrolment they are (this connect's, or one killed before its
    enrolment was written); under an enrolment only when it says so (`vault_created`) and
    the chain was read. A machine that joined from a header keeps the old vault's wraps
    when its enrolment moves to another chain or contract, or the chain is reset; counting
    them would write it a recovery file (the data key in the clear) and call it the maker.
    Under KINT_OFFLINE=1 no chain said it is empty, so only the first case holds.

    The maker moved to another contract (or chain) still counts its wraps as started here,
    and that is right: `vault_created` names the machine that made the data key, and a key
    belongs to no contract. The move is allowed only while this machine holds none of the
    old contract's epochs (`moved_from`), and the new one shows none either, so the first
    epoch there is sealed under that same key, and its recovery code is the one the maker
    already holds; a missing file is written back, as for a connect killed before writing
    it. Not counting it would change nothing else: connect's `_keep` carries `vault_created` over,
    so push would still ask for the file (push_refusals.py), with no connect to restore it."""
    if existing is None:
        return True
    return existing.vault_created and not settings.value("KINT_OFFLINE")


def moved_from(ctx: SpaceContext, existing: Enrolment | None,
                chain: ChainConfig) -> str | None:
    """What a connect on another chain or contract than the space's enrolment does, said:
    the enrolment is rewritten for the ones in force. Refused (CONFIG_INVALID, with
    `other_chain`'s words) when this machine holds epochs of the old one (its mirror past
    0, its watermark): they would stay under the new enrolment, and every pull would refuse
    the new head as stale; refused as CORRUPT_STATE, naming the file, when one of those
    does not read and the other shows none (SpaceContext.seen_here). Before, connect
    overwrote the enrolment without a word."""
    elsewhere = other_chain(existing, chain, ctx.seen_here) if existing is not None else None
    if elsewhere is None:
        return None
    if ctx.seen_here() > 0:
        raise ProtocolError(ErrorCode.CONFIG_INVALID,
                            f"{elsewhere.message}: connect does not move the space off them",
                            elsewhere.hint)
    return f"{elsewhere.message}: the space is connected on the one kint reads now"
