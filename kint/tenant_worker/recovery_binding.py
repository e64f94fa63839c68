"""Binding a recovery code to the vault before `kint connect` trusts it (05-keys.md, "The
recovery code").

The code is the data key itself, and its checksum only proves it was typed right: any
vault's code decodes. So its `dek_id` must equal the one of a key this vault is known to be
sealed with, taken from the first of these that exists, most trusted first:

1. the newest readable epoch's header on chain (what every machine sees);
2. when the chain shows no header (it cannot be read, KINT_OFFLINE=1, or it holds no epochs
   of this owner and space yet), what this machine holds of the vault: its cached data key
   (the key it opened or sealed epochs with), then its wraps file's `dek_id` (written with
   that key, and kept past the cache's TTL), then the newest epoch in its epoch cache (a
   header the chain vouched for when it was pulled or pushed).

The first source found decides: a code that does not match it is refused, even if an older
source would match (an old code against a vault rotated since). With none of them the code
is refused: a recovery code never starts a vault. v0.3.0 names the chain's header, the
cached data key and the newest cached header; the wraps file is this kint's as well, as it
was before (it answers the same question as the cached key once the cache has lapsed).

Connecting with a code adds no wrap: the machine keeps the wraps of the data key the code
is, from the chain's header, else this machine's wraps file, else the cached header; with
none of them (only the cached key is left here) there is nothing to put in the epochs it
would push, and the connect is refused until the chain can be read.

Before, only the wraps file was asked when the chain showed no header, and the refusal said
"the chain holds no epochs" of a chain that had not been read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kint import settings
from kint.custody.data_key import dek_id
from kint.custody.recovery_code import decode_recovery_code
from kint.custody.vault_cache import CachedKey, read_cached_key
from kint.custody.wraps import Wrap, WrapsFile, read_wraps
from kint.epochs.envelope import Header
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import (CONNECT_OFFLINE_DAEMON, CONNECT_OFFLINE_FILE,
                                 CONNECT_UNSET_OFFLINE, CONNECT_WHEN_READABLE,
                                 recovery_file_named)
from kint.settings.wire import source_text
from kint.tenant_worker.head_header import ReadableHeader

if TYPE_CHECKING:
    from kint.tenant_worker.space import SpaceContext

NOT_OURS = "this recovery code does not belong to the vault anchored under this owner"


@dataclass(frozen=True)
class HeldHere:
    """What this machine holds of the vault, asked only when the chain shows no header."""

    cached_key: bytes | None = field(default=None, repr=False)
    wraps: WrapsFile | None = None
    newest_cached: tuple[int, Header] | None = None  # (seq, header) of the newest epoch


def held_here(ctx: SpaceContext) -> HeldHere:
    """This machine's cached data key (absent when missing, expired, or under another local
    secret; a garbled file is refused by name), wraps file and newest cached epoch."""
    home, space = ctx.config.home, ctx.config.space_id
    cached = read_cached_key(home, space)
    seqs = ctx.state.cached_seqs()
    newest = (seqs[-1], ctx.state.meta(seqs[-1]).parsed_header()) if seqs else None
    return HeldHere(cached.dek if isinstance(cached, CachedKey) else None,
                    read_wraps(home, space), newest)


def bind_recovery_code(code: str, owner: str, header: ReadableHeader | None, held: HeldHere,
                       chain_error: ProtocolError | None, *,
                       space16: str | None = None) -> tuple[bytes, tuple[Wrap, ...]]:
    """The data key the code is and the wraps to keep with it, once the code is bound to
    the vault (the module's docstring); else the refusal, naming the space's recovery file
    (`space16`; its pattern where it is not given)."""
    dek = decode_recovery_code(code)
    want, checked = _first_known_key(header, held)
    if want is None:
        raise _nothing_to_check(owner, chain_error)
    if dek_id(dek) != want:
        raise ProtocolError(ErrorCode.WRONG_KEY, NOT_OURS,
                            f"it was checked against {checked}; check the code, --owner and "
                            f"the tenant. {rotated(space16)}")
    wraps = _wraps_of(want, header, held)
    if wraps is None:
        raise ProtocolError(ErrorCode.NOT_CONNECTED,
                            "this recovery code is this machine's cached data key, but this "
                            "machine holds no wraps of it to put in the epochs it pushes",
                            _when_readable(chain_error, "the head epoch's header hands them "
                                                        "over"))
    return dek, wraps


def _first_known_key(header: ReadableHeader | None,
                     held: HeldHere) -> tuple[bytes | None, str]:
    """The dek_id of the most trusted source there is, and what that source is, in words."""
    if header is not None:
        return header.header.dek_id, f"the header of epoch {header.seq} on chain"
    if held.cached_key is not None:
        return dek_id(held.cached_key), "this machine's cached data key"
    if held.wraps is not None:
        return held.wraps.dek_id, "this machine's wraps file"
    if held.newest_cached is not None:
        seq, cached = held.newest_cached
        return cached.dek_id, f"the header of epoch {seq} in this machine's epoch cache"
    return None, ""


def _wraps_of(want: bytes, header: ReadableHeader | None,
              held: HeldHere) -> tuple[Wrap, ...] | None:
    """The wraps of the data key `want`, from the chain's header, else the wraps file, else
    the newest cached header (None: no source holds any)."""
    if header is not None and header.header.dek_id == want:
        return tuple(header.header.wraps)
    if held.wraps is not None and held.wraps.dek_id == want:
        return tuple(held.wraps.wraps)
    if held.newest_cached is not None and held.newest_cached[1].dek_id == want:
        return tuple(held.newest_cached[1].wraps) or None
    return None


def rotated(space16: str | None) -> str:
    """The likeliest right code and owner that still do not match: a code kept from before
    a rotation, which 05-keys.md says stops opening the vault at the rotation's snapshot.
    The new one is in the space's own file where the rekey ran, named with its id: the
    literal `RECOVERY-<space16>.txt` left the user to work the id out."""
    named = recovery_file_named(space16) if space16 else "RECOVERY-<space16>.txt"
    return ("A code kept from before a `kint rekey` no longer opens the vault: that rekey "
            f"wrote the new one ({named} where it ran)")


def _nothing_to_check(owner: str, chain_error: ProtocolError | None) -> ProtocolError:
    """The refusal when nothing says which vault the code should open, saying why the
    chain had nothing to offer: it could not be read, was not asked, or holds no epochs."""
    here = ("this machine holds no cached data key, wraps or cached epoch of this space to "
            "check the code against")
    if chain_error is not None:
        why = f"the chain could not be read ({chain_error.message}), and {here}"
    elif settings.value("KINT_OFFLINE"):
        offline = settings.lookup("KINT_OFFLINE")
        why = (f"KINT_OFFLINE=1 ({source_text(offline)}) keeps the chain from being read, "
               f"and {here}")
    else:
        return ProtocolError(ErrorCode.WRONG_KEY, f"a recovery code cannot start a vault: the "
                             f"chain holds no epochs for owner {owner} in this space, and "
                             f"{here}", "check --owner and the tenant")
    return ProtocolError(ErrorCode.WRONG_KEY, f"a recovery code cannot start a vault: {why}",
                         _when_readable(chain_error, "the head epoch's header checks the code"))


def _when_readable(chain_error: ProtocolError | None, then: str) -> str:
    """Connect again once the chain can be read, in the terms of what kept it out: for
    KINT_OFFLINE, where the value in force was set (this call's environment, config.toml,
    the supervisor's environment), since unsetting it anywhere else changes nothing."""
    offline = settings.lookup("KINT_OFFLINE")
    if chain_error is not None or not offline.value:
        return CONNECT_WHEN_READABLE.format(then=then)
    if offline.source == settings.FILE and offline.where:
        return CONNECT_OFFLINE_FILE.format(where=offline.where, then=then)
    if offline.source == settings.DAEMON_ENV:
        return CONNECT_OFFLINE_DAEMON.format(then=then)
    return CONNECT_UNSET_OFFLINE.format(then=then)
