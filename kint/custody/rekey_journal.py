"""The rekey journal: `rekey-<space16>.json`, the new data key of a rotation that has not
settled yet.

Why it exists: `kint rekey` anchors a snapshot sealed under a new data key first and moves
this machine to that key only afterwards (05-keys.md, "Rotate the data key", step 9). A
worker killed between the two (the transaction sent, the receipt back, the epoch
recorded) used to leave the chain's head sealed under a key that existed nowhere but in
the dead process: the machine could not open its own head, and the new key's recovery code
(05-keys.md, "The recovery code": written on every rekey) was never written anywhere. So the
new key is written here, durably, before the push's transaction is signed, and the file is
removed once the rotation is settled one way or the other
(`kint.tenant_worker.rekey_settle`).

Why it is built this way:

- The key is never on disk in the clear: it is sealed with AES-256-GCM under
  HKDF-SHA256(local secret, salt = "", info = "kint-rekey-journal-v1"), the same secret and
  construction the vault key cache uses (`vault_cache.py`) under another label, with the
  space id and the key's dek_id as the AAD, so a journal moved to another space's name, or
  given another dek_id, does not open.
- Beside it: the new wraps (each already sealed under a key the owner holds) and the old
  and new dek_ids, so the settlement can tell from this machine's recorded epochs whether
  the snapshot landed, and rewrite the wraps file without asking the owner again.
- How long the new key is to be kept (`key_ttl`: `session`, or seconds) is decided by
  the rekey that writes the journal, and bound to the sealed key (in the AAD): a worker
  restarted mid-rotation has neither the old key in memory nor the rekey's environment,
  and settling with the space's own value wrote a `KINT_KEY_TTL=session` key to disk for
  24 h. A journal without it (an older kint's) is settled with the settling call's value.
  A journal with it is version 2, so that an older kint, which reads version 1 only and
  would find the AAD changed, refuses it as a version it does not read rather than as one
  altered or sealed under another secret; this kint reads both, and names a newer version
  as such.
- 0600, written through an atomic replace with its folder fsynced (`write_private`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kint.custody.data_key import check_data_key, dek_id
from kint.custody.errors import RekeyJournalCorrupt, RekeyJournalNewer
from kint.custody.files import space_file, write_private
from kint.custody.ids import space_hex
from kint.custody.keks import hkdf_sha256
from kint.custody.local_secret import LocalSecret, load_local_secret, local_secret
from kint.custody.vault_cache import SESSION, Ttl, parse_key_ttl
from kint.custody.wraps import MalformedWrap, Wrap
from kint.paths import remove_file

JOURNAL_INFO = b"kint-rekey-journal-v1"
# Version 1: no `key_ttl`; version 2: with it (and 1 with it, as kint wrote it for a
# while, is read as 2).
JOURNAL_VERSION = 2
_READ_VERSIONS = (1, 2)
_NONCE_LEN = 12
_MAX_BYTES = 1 << 16


@dataclass(frozen=True)
class RekeyJournal:
    """A rotation in progress: the new data key, its wraps, the key it replaces, and how
    long the new key is to be kept (None: as the settling call says)."""

    dek: bytes = field(repr=False)
    wraps: tuple[Wrap, ...]
    old_dek_id: bytes
    key_ttl: Ttl | None = None

    @property
    def new_dek_id(self) -> bytes:
        return dek_id(self.dek)


def rekey_journal_path(home: Path | None, space: str | bytes) -> Path:
    return space_file(home, "rekey", space, ".json")


def _sealing_key(secret: LocalSecret) -> bytes:
    return hkdf_sha256(secret.key_material, b"", JOURNAL_INFO)


def _aad(space: str | bytes, new_dek_id: bytes, key_ttl: str | None) -> bytes:
    aad = JOURNAL_INFO + space_hex(space).encode("ascii") + new_dek_id
    return aad if key_ttl is None else aad + b"|key_ttl=" + key_ttl.encode("ascii")


def _ttl_text(ttl: Ttl | None) -> str | None:
    """The journal's `key_ttl`: `session`, or the seconds as KINT_KEY_TTL reads them."""
    if ttl is None or ttl == SESSION:
        return ttl
    return format(float(ttl), "f")


def save_rekey_journal(home: Path | None, space: str | bytes, journal: RekeyJournal, *,
                       secret: LocalSecret | None = None) -> Path:
    """Write the journal (0600, atomic, durable) before anything of the rotation is sent."""
    dek = check_data_key(journal.dek)
    secret = secret or local_secret(home)
    nonce = os.urandom(_NONCE_LEN)
    ttl = _ttl_text(journal.key_ttl)
    sealed = AESGCM(_sealing_key(secret)).encrypt(nonce, dek, _aad(space, dek_id(dek), ttl))
    path = rekey_journal_path(home, space)
    fields = {"v": 1 if ttl is None else JOURNAL_VERSION, "old_dek_id": journal.old_dek_id.hex(),
              "new_dek_id": dek_id(dek).hex(),
              "wraps": [w.encode().hex() for w in journal.wraps],
              "nonce": nonce.hex(), "sealed_key": sealed.hex()}
    if ttl is not None:
        fields["key_ttl"] = ttl
    write_private(path, orjson.dumps(fields))
    return path


def load_rekey_journal(home: Path | None, space: str | bytes, *,
                       secret: LocalSecret | None = None) -> RekeyJournal | None:
    """The journal of the space, or None when no rotation is in progress. Raises
    RekeyJournalCorrupt for a file that does not open, and NoLocalPassphrase (from the
    local secret) when the secret that sealed it is gone."""
    path = rekey_journal_path(home, space)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    try:
        obj = orjson.loads(raw)
        version = obj.get("v")
        if not isinstance(version, int) or isinstance(version, bool):
            raise TypeError("version")  # `true` is not 1, nor `2.0` 2
        if version > JOURNAL_VERSION:
            read = " and ".join(str(v) for v in _READ_VERSIONS)
            raise RekeyJournalNewer(path, f"was written by a newer kint (journal version "
                                    f"{version}; this kint reads versions {read}): "
                                    f"settle it with that kint")
        if version not in _READ_VERSIONS or len(raw) > _MAX_BYTES:
            raise ValueError("version")
        new_id = bytes.fromhex(obj["new_dek_id"])
        old_id = bytes.fromhex(obj["old_dek_id"])
        wraps = tuple(Wrap.decode(bytes.fromhex(w)) for w in obj["wraps"])
        nonce = bytes.fromhex(obj["nonce"])
        sealed = bytes.fromhex(obj["sealed_key"])
        ttl = obj.get("key_ttl")
        if (ttl is not None and not isinstance(ttl, str)) or (version == 2 and ttl is None):
            raise TypeError("key_ttl")
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError,
            MalformedWrap):
        raise RekeyJournalCorrupt(path, "is not a rekey journal (truncated or garbled)") from None
    secret = secret or load_local_secret(home)
    try:
        dek = AESGCM(_sealing_key(secret)).decrypt(nonce, sealed, _aad(space, new_id, ttl))
    except (InvalidTag, ValueError):
        raise RekeyJournalCorrupt(path, "does not open under this machine's local secret "
                                  "(altered, another space's, or the secret's source "
                                  "changed)") from None
    return RekeyJournal(dek=dek, wraps=wraps, old_dek_id=old_id,
                        key_ttl=None if ttl is None else parse_key_ttl(ttl))


def remove_rekey_journal(home: Path | None, space: str | bytes) -> None:
    """Drop the journal once the rotation is settled (durably: the folder is fsynced)."""
    remove_file(rekey_journal_path(home, space))
