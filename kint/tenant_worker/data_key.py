"""The space's data key as the worker's ops reach it: the cached key, or the refusal that
says why there is none (05-keys.md, "The vault key cache")."""

from __future__ import annotations

import logging

from kint import settings
from kint.custody import errors as custody_errors
from kint.custody.data_key import dek_id
from kint.custody.vault_cache import (SESSION as IN_MEMORY, TTL_ENV, CachedKey, Ttl,
                                      cache_data_key, held_in_memory, key_ttl,
                                      read_cached_key)
from kint.custody.wraps import Wrap, read_wraps
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import NO_DATA_KEY_HINT, NO_LOCAL_SECRET_HINT
from kint.tenant_worker.custody_errors import as_protocol_error
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.state_health import disk_full

log = logging.getLogger("kint.worker")


def current_data_key(ctx: SpaceContext) -> bytes:
    """The cached data key, or NO_DATA_KEY saying why (missing, expired, another local
    passphrase), NO_SESSION_KEY when there is no local passphrase at all; nothing is
    dropped either way."""
    try:
        found = read_cached_key(ctx.config.home, ctx.config.space_id)
    except custody_errors.CustodyError as err:
        raise as_protocol_error(err) from None
    if not isinstance(found, CachedKey) and found.reason == "no-local-secret":
        # v0.3.0's words for a session key that cannot be loaded (05-keys.md): the local
        # passphrase seals the session key and this cache alike. NO_SESSION_KEY, so `pull`
        # exits 3 for it as push does (09-cli.md: "pull too, for the session key").
        raise ProtocolError(ErrorCode.NO_SESSION_KEY, found.message, NO_LOCAL_SECRET_HINT)
    if not isinstance(found, CachedKey):
        raise ProtocolError(ErrorCode.NO_DATA_KEY, found.message, NO_DATA_KEY_HINT)
    return found.dek


def held_keys(ctx: SpaceContext) -> dict[bytes, bytes]:
    """The data keys this machine holds, by dek_id (an epoch names its key by dek_id)."""
    key = current_data_key(ctx)
    return {dek_id(key): key}


def wrapped_for_here(ctx: SpaceContext, wraps: tuple[Wrap, ...]) -> bool:
    """Whether one of `wraps` (an epoch header's, sealed under a data key this machine does
    not hold) is under a key-encryption key of this machine's: a tag its enrolment records
    or its wraps file holds. Then connecting again with that key opens the epoch's data key
    (a `kint rekey` elsewhere carries the vault's wraps over to the new key, and a vault two
    machines started each wrap under the same signature's or passphrase's tag); otherwise
    no connect here does, which is a leaked session key's epoch (06-epochs.md: "a bad epoch
    with a well-formed header whose wraps none of your keys open"). A wrap byte for byte one
    of this machine's wraps file holds is no rotation's (a rotation wraps its new key
    afresh): it wraps the key held here, not the one the header names, so it is a copy of
    an earlier header's, which a leaked key can put on its epoch. A wraps file that does
    not read counts for nothing here: the enrolment's tags are the current wraps' too."""
    enrolment = ctx.enrolment()
    ours = {t.lower() for t in enrolment.key_tags} if enrolment else set()  # tags: load_enrolment
    try:
        local = read_wraps(ctx.config.home, ctx.config.space_id)
    except custody_errors.WrapsFileCorrupt:
        local = None
    held = local.wraps if local is not None else ()
    ours.update(w.tag.hex() for w in held)
    return any(w.tag.hex() in ours and w not in held for w in wraps)


def renew(ctx: SpaceContext, key: bytes) -> None:
    """After a successful push or pull, the cached key gets a fresh deadline (so a server in
    use does not lapse).

    A key held in memory only (a connect under KINT_KEY_TTL=session) has no deadline to
    renew, and stays in memory unless the push or pull itself sets KINT_KEY_TTL: its
    caller's environment, or for the watcher's pushes the kint-server session's. The
    space's own value (the supervisor's environment, config.toml, the 24 h default) is
    not the caller asking for a file: taking it wrote the key of `KINT_KEY_TTL=session
    kint connect` to disk at the next plain `kint pull` or `kint push`, where v0.3.0's
    `session` has nothing touch the disk (10-configuration.md)."""
    if _kept_in_memory(ctx):
        return
    try:
        cache_data_key(ctx.config.home, ctx.config.space_id, key)
    except custody_errors.CustodyError:
        pass  # the push or pull itself succeeded; the next connect renews it
    except OSError as err:
        if not disk_full(err):
            raise
        # A full disk: the cached key keeps its old deadline (the file is replaced whole
        # or not at all), and the push or pull that asked is done.
        log.warning("data key: not renewed, the disk is full (%s)", err.strerror)


def rotated_key_ttl(ctx: SpaceContext) -> Ttl:
    """How long a rotation's new data key is to be kept, decided as the rekey begins (its
    journal keeps it: kint.custody.rekey_journal): in memory when the old one was
    memory-only and this call gives no KINT_KEY_TTL of its own, renew()'s rule; else
    this call's value (the space's when it gives none). Taking the space's value instead
    wrote the new key of a plain `kint rekey` after `KINT_KEY_TTL=session kint connect`
    to disk for 24 h."""
    return IN_MEMORY if _kept_in_memory(ctx) else key_ttl()


def keep_rotated_key(ctx: SpaceContext, key: bytes, ttl: Ttl | None) -> None:
    """Cache a rotation's new data key (rekey_settle.keep_new_key) for `ttl`, what the
    rekey decided (`rotated_key_ttl`), whichever process settles it: a worker restarted
    mid-rekey holds no key in memory and has not the rekey's environment, and cached a
    `session` key on disk with the space's 24 h. None (a journal an older kint wrote):
    decided now."""
    cache_data_key(ctx.config.home, ctx.config.space_id, key,
                   ttl=rotated_key_ttl(ctx) if ttl is None else ttl)


def _kept_in_memory(ctx: SpaceContext) -> bool:
    """Whether the space's key is held in memory only and this call does not ask for it
    to be cached otherwise."""
    return held_in_memory(ctx.config.space_id) and not _ttl_asked()


def _ttl_asked() -> bool:
    """Whether this push or pull itself gives KINT_KEY_TTL: its request sent one, or the
    watcher runs with a kint-server session's (sessions._watcher_push)."""
    return settings.lookup(TTL_ENV).source in (settings.THIS_CALL, settings.SESSION)
