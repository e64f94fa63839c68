"""The data key `kint connect` opens with the caller's secrets (05-keys.md, "One data key,
many wraps"): the key-encryption keys a derive signature (optionally salted) or a vault
passphrase stretch to, checked on their face first; the first source that holds the data
key for one (this machine's wraps, the newest readable header's wrap by `kek_tag`, else a
fresh vault); the recovery code bound to the vault; the wrong key said as such; and
`--add-passphrase`'s extra wrap. Which source wins, and why, is connect.py's docstring.
Nothing here prints or logs a signature, a KEK or the data key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kint.custody import errors as custody_errors
from kint.custody.data_key import dek_id, new_data_key
from kint.custody.keks import kek_tag, passphrase_kek, signature_kek
from kint.custody.vault_message import check_derive_signature, parse_signature_text
from kint.custody.wraps import (KIND_PASSPHRASE, KIND_SIGNATURE, Wrap, WrapsFile, find_wrap,
                                unwrap, wrap_data_key)
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import NOT_A_REKEY_HINT
from kint.tenant_worker.head_header import ReadableHeader
from kint.tenant_worker.recovery_binding import HeldHere, bind_recovery_code
from kint.tenant_worker.space import SpaceContext

SOURCE_LOCAL = "local wraps"
SOURCE_HEADER = "chain head header"
SOURCE_FRESH = "fresh vault"
SOURCE_CODE = "recovery code"


@dataclass(frozen=True)
class SuppliedKey:
    kind: int
    kek: bytes

    @property
    def tag(self) -> bytes:
        return kek_tag(self.kek)


@dataclass(frozen=True)
class FoundKey:
    """The data key, the wraps found with it, and where it came from."""

    dek: bytes
    wraps: tuple[Wrap, ...]
    source: str
    fresh: bool = False  # a new vault: its recovery code file is written
    # Local wraps while the chain, read, holds no epochs: this machine started the vault
    # (an earlier connect, killed before its recovery file or enrolment, is finished).
    started_here: bool = False
    key_tag: bytes | None = None  # the supplied key's tag (None for a recovery code)


def say(ctx: SpaceContext, step: str) -> None:
    """The connect's progress line: what it waits on now (cleared by head_op at its end)."""
    ctx.progress = f"connect: {step}"


def secrets_given(args: dict[str, Any]) -> bool:
    """Whether the caller gave a key's secret: a vault passphrase or a derive signature."""
    return args.get("passphrase") is not None or args.get("signature") is not None


def check_secrets(owner: str, args: dict[str, Any]) -> None:
    """The caller's secrets refused where they are wrong on their face, before the chain is
    read: a signature that does not parse or is not the owner's, an empty passphrase. Their
    stretch (scrypt, ~0.4 s and 128 MiB under the home's scrypt lock) waits for the chain,
    which may show there is nothing to open (connect's `_connect`); these refusals come first, as
    they did when the stretch came first."""
    if args.get("passphrase") is not None:
        if args["passphrase"] == "":
            raise custody_errors.EmptyPassphrase()
    elif args.get("signature") is not None:
        check_derive_signature(parse_signature_text(args["signature"]), owner)
        if args.get("salt_passphrase") == "":
            raise custody_errors.EmptyPassphrase()


def supplied_keks(ctx: SpaceContext, owner: str, args: dict[str, Any]) -> list[SuppliedKey]:
    """The KEKs the caller's secrets derive, the one that must open the vault first."""
    home, space = ctx.config.home, ctx.config.space_id
    keys: list[SuppliedKey] = []
    if args.get("passphrase") is not None or args.get("salt_passphrase") is not None:
        say(ctx, "stretching the passphrase (scrypt)")
    if args.get("passphrase") is not None:
        keys.append(SuppliedKey(KIND_PASSPHRASE, passphrase_kek(args["passphrase"], owner, space,
                                                                home=home)))
    elif args.get("signature") is not None:
        signature = parse_signature_text(args["signature"])
        keys.append(SuppliedKey(KIND_SIGNATURE, signature_kek(
            signature, owner, space, salt_passphrase=args.get("salt_passphrase"), home=home)))
    return keys


def wrong_key(owner: str, key: SuppliedKey, rotated: bool,
              from_chain: bool = True) -> ProtocolError:
    """The refusal of a key no wrap carries. `from_chain` False: no epoch's header was read
    (the chain shows none, or KINT_OFFLINE=1) and this machine's own wraps were the ones
    compared, so the message says so rather than naming a head epoch that was not read;
    v0.3.0, which started a fresh vault there, has no words for it."""
    tag8 = key.tag.hex()[:8]
    if not from_chain:
        message = (f"this key (tag {tag8}) does not open the vault of {owner} this machine "
                   f"holds: its wraps here carry different tags (no epoch header was read "
                   f"from the chain). Wrong wallet, wrong passphrase, or wrong tenant.")
    elif rotated:
        message = (f"the data key of this vault was rotated and this key (tag {tag8}) was not "
                   f"carried over: it opens the epochs sealed before the rotation and nothing "
                   f"after it")
    else:
        message = (f"this key (tag {tag8}) does not open the vault anchored under {owner}: the "
                   f"wraps in the head epoch carry different tags. Wrong wallet, wrong "
                   f"passphrase, or wrong tenant.")
    return ProtocolError(ErrorCode.WRONG_KEY, message,
                         f"if the key is lost, the recovery code opens the vault: kint connect "
                         f"--owner {owner} --recovery-code-stdin")


def not_a_rekey(seq: int, key: SuppliedKey, opened: bool) -> ProtocolError:
    """The head epoch's wrap under this key's tag does not open the data key that sealed it
    (it does not open, or opens another key: dek_id mismatch). A rotation's wrap does, so no
    `kint rekey` made that epoch; a kek tag is public, and a leaked session key can carry
    this machine's onto an epoch of its own, to pass for a rotation (data_key.py)."""
    how = ("opens a data key that did not seal it (dek_id mismatch)" if opened
           else "does not open")
    # A wrap that opens was made with this key: copied from an earlier epoch (a replay needs
    # nothing secret), or written by someone who holds the key itself, which the way out
    # must then also rotate away.
    hint = f"{NOT_A_REKEY_HINT}; {KEY_HELD_ELSEWHERE}" if opened else NOT_A_REKEY_HINT
    return ProtocolError(ErrorCode.WRONG_KEY,
                         f"the wrap of epoch {seq} under this key (tag {key.tag.hex()[:8]}) "
                         f"{how}: this is no rekey's epoch", hint)


# What the dek_id mismatch adds to the way out: the wrap opened under this key.
KEY_HELD_ELSEWHERE = ("unless that wrap is a copy of an earlier epoch's, whoever wrote it holds "
                      "this key too: after the snapshot, `kint rekey` with the keys that are "
                      "to go on opening the vault and `--drop-missing` leaves this one out "
                      "(docs/new-machine.md, \"Rotate the data key\"; everything anchored "
                      "before stays readable to that key)")


def key_from_recovery_code(code: str, owner: str, header: ReadableHeader | None,
                        held: HeldHere, chain_error: ProtocolError | None, *,
                        space16: str | None = None) -> FoundKey:
    """The recovery code, bound to the vault by the chain's header or, when the chain shows
    none, by what this machine holds of it (recovery_binding); it never starts a vault.
    `space16`: the space's, whose recovery file a refusal names."""
    dek, wraps = bind_recovery_code(code, owner, header, held, chain_error, space16=space16)
    return FoundKey(dek, wraps, SOURCE_CODE)


def key_from_supplied(owner: str, key: SuppliedKey, header: ReadableHeader | None,
                       local: WrapsFile | None, chain_error: ProtocolError | None, *,
                       may_have_started: bool = True) -> FoundKey:
    """The data key a supplied KEK opens, from the first source that has it: local wraps
    while they hold the head header's key, else the header's wrap with this key's tag
    (checked to open the key that sealed it), else a fresh vault, only when the chain
    was read, holds no epochs, and this machine has no wraps (a vault is never started
    over one the chain could not show, nor over local wraps this key does not open).
    `may_have_started` False: local wraps are not taken as a vault started here, whatever the
    chain shows (a machine that joined, or KINT_OFFLINE=1 on one already enrolled:
    connect_owner.wraps_may_be_ours)."""
    local_wrap = find_wrap(local.wraps, key.tag) if local is not None else None
    if local_wrap is not None and (header is None or header.header.dek_id == local.dek_id):
        return FoundKey(unwrap(local_wrap, key.kek), tuple(local.wraps), SOURCE_LOCAL,
                      key_tag=key.tag,
                      started_here=header is None and chain_error is None and may_have_started)
    if header is not None:
        wrap = find_wrap(header.header.wraps, key.tag)
        if wrap is None:
            raise wrong_key(owner, key, rotated=local_wrap is not None)
        try:
            dek: bytes | None = unwrap(wrap, key.kek)
        except custody_errors.WrapAltered:
            dek = None
        if dek is None or dek_id(dek) != header.header.dek_id:
            raise not_a_rekey(header.seq, key, opened=dek is not None)
        return FoundKey(dek, tuple(header.header.wraps), SOURCE_HEADER, key_tag=key.tag)
    if chain_error is not None:
        raise chain_error
    if local is not None:
        raise wrong_key(owner, key, rotated=False, from_chain=False)
    dek = new_data_key()
    return FoundKey(dek, (wrap_data_key(dek, key.kek, key.kind),), SOURCE_FRESH, fresh=True,
                  key_tag=key.tag)


def with_extra_passphrase(ctx: SpaceContext, owner: str, dek: bytes, wraps: tuple[Wrap, ...],
                           passphrase: str | None) -> tuple[Wrap, ...]:
    """`--add-passphrase`: a kind 0x02 wrap beside the others, so the passphrase alone opens
    the vault; every epoch pushed after this carries it."""
    if not passphrase:
        return wraps
    say(ctx, "stretching the extra passphrase (scrypt)")
    kek = passphrase_kek(passphrase, owner, ctx.config.space_id, home=ctx.config.home)
    if find_wrap(wraps, kek_tag(kek)) is not None:
        return wraps
    return wraps + (wrap_data_key(dek, kek, KIND_PASSPHRASE),)
