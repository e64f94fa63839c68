"""One nonce sequence, many workers: the machine's session key sends every push of every
space (README, "What works today"), from one worker process per space.

Two workers asking the endpoint for the next nonce at the same moment get the same
number, and one of their pushes is lost. So nonces are allocated here, machine-wide, under
a lock file in `$KINT_HOME/nonces/` (a 0700 folder only the user can write), and a
session-key transaction's nonce is taken and its signed transaction written in one entry,
in one step, once every chain call it needs (the gas estimate, the balance) is done: a
worker killed or failing before that step has taken no nonce, and one killed after it
left a signed transaction to send.

A nonce sequence also has a worse failure: a transaction that never reaches the chain
(its space's RPC hangs after signing; its worker is stopped or killed between signing and
broadcast) holds back every later nonce, so every other space's push waits behind it.
A worker whose own transaction is not mined within `KINT_NONCE_RETRY_SECONDS` (15), or
within half its 60 s receipt wait whatever the setting (kint/tenant_worker/
session_sender.py), calls `unstick`: it re-broadcasts, through its own endpoint, every
signed transaction below its own nonce that the chain has not mined, and fills a nonce
whose transaction was never signed (given back below a higher one: a transaction that will
never be sent, or an entry without one that an older kint, which took the nonce before its
chain calls, left when it was killed) with a zero-value transfer to itself. The owner of a
re-broadcast epoch finds it landed the next time it looks at its pending file.

Times are `time.monotonic()`: the system-wide monotonic clock, comparable between the
processes of one boot, and never moved by a wall-clock change.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

from kint import settings
from kint.envsettings import pid_alive
from kint.keccak import keccak
from kint.paths import atomic_write, ensure_private_dir, remove_file
from kint.pid_file_lock import open_own_file

log = logging.getLogger("kint.nonces")

# An entry with no signed transaction this old is abandoned even if its process lives
# (an entry is written signed; one without is given back, or from an older kint, whose
# worker signed it within milliseconds of taking the nonce).
UNSIGNED_STALE_S = 60.0


def retry_seconds() -> float:
    return float(settings.value("KINT_NONCE_RETRY_SECONDS"))


@dataclass
class NonceEntry:
    nonce: int
    address: str
    space16: str
    pid: int
    allocated_at: float
    raw: str | None = None  # the signed transaction, hex, once there is one
    abandoned: bool = False  # given back without being sent: fill it
    mined: bool = False  # its transaction is in a block: nothing left to send
    tx: str | None = None  # the mined transaction's hash (hex, no 0x), to look it up again
    # The block that mined it: an endpoint not yet at that block lags, it does not show
    # the block dropped (`mined_uncounted`).
    block: int | None = None

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


class NonceBook:
    """The session key's allocated nonces, one JSON file each, under one flock."""

    def __init__(self, home: Path) -> None:
        self.folder = home / "nonces"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        ensure_private_dir(self.folder)
        fd = open_own_file(self.folder / "lock")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _path(self, nonce: int) -> Path:
        return self.folder / f"{nonce:012d}.json"

    def _entries(self) -> list[NonceEntry]:
        out = []
        try:
            names = sorted(os.listdir(self.folder))
        except FileNotFoundError:
            return []
        for name in names:
            if not (name.endswith(".json") and name[:-5].isdigit()):
                continue
            try:
                obj = orjson.loads((self.folder / name).read_bytes())
                out.append(NonceEntry(**obj))
            except (OSError, orjson.JSONDecodeError, TypeError):
                # A torn or foreign file: it names no usable transaction. Set it aside
                # (never silently deleted) so it cannot block the sequence.
                (self.folder / name).rename(self.folder / f"{name}.corrupt")
                log.warning("nonce entry %s was unreadable; moved aside", name)
        return out

    def _save(self, entry: NonceEntry) -> None:
        atomic_write(self._path(entry.nonce), orjson.dumps(entry.to_json()))

    def allocate(self, address: str, chain_count: int, space16: str,
                 sign: Callable[[int], bytes] | None = None) -> int:
        """The next nonce of `address`, given the count of its mined transactions. With
        `sign` (the transaction, signed at that nonce: local work, no chain call), the
        entry is written once, holding the signed bytes, under the same lock: a process
        killed before that write has taken no nonce, so it leaves no hole for a filler
        transfer to spend gas on, and one killed after it leaves a transaction that
        `unstick` sends as it is."""
        address = address.lower()
        with self._locked():
            highest = chain_count - 1
            for entry in self._entries():
                if entry.address != address or entry.nonce < chain_count:
                    self._path(entry.nonce).unlink(missing_ok=True)  # mined, or another key's
                    continue
                highest = max(highest, entry.nonce)
            nonce = highest + 1
            raw = sign(nonce).hex() if sign is not None else None
            self._save(NonceEntry(nonce, address, space16, os.getpid(), time.monotonic(),
                                  raw=raw))
            return nonce

    def record(self, nonce: int, raw: bytes) -> None:
        """The signed transaction of `nonce`, written before it is sent."""
        with self._locked():
            entry = self._entry(nonce)
            if entry is not None:
                entry.raw = raw.hex()
                self._save(entry)

    def landed(self, nonce: int, tx_hash: str | None = None, block: int | None = None) -> None:
        """`nonce`'s transaction (`tx_hash`) was mined: its signed bytes (a whole epoch's
        calldata, up to ~200 KB of hex) are dropped, since everything under KINT_HOME
        counts against Sibyl's storage cap. The entry stays, as the nonce's placeholder,
        until an allocation sees the chain's count past it (an endpoint a block behind
        still counts without it); its hash and `block` say whether the block that mined
        it is still the chain's (`mined_uncounted`)."""
        with self._locked():
            entry = self._entry(nonce)
            if entry is not None:
                entry.raw, entry.mined = None, True
                entry.tx = tx_hash.removeprefix("0x").lower() if tx_hash else None
                entry.block = block
                self._save(entry)

    def mined_uncounted(self, address: str, chain_count: int) -> list[NonceEntry]:
        """The entries marked mined, with a hash, that the chain's count of `address` does
        not include: an endpoint a block behind, or a block the chain dropped (a
        reorganisation), whose nonce is free again. Highest first, so that giving them
        back one by one forgets each rather than leaving holes to fill."""
        address = address.lower()
        with self._locked():
            found = [e for e in self._entries() if e.address == address and e.mined
                     and e.tx and e.nonce >= chain_count]
        return sorted(found, key=lambda e: e.nonce, reverse=True)

    def signed_as(self, address: str, tx_hash: str) -> NonceEntry | None:
        """The entry of `address` holding the signed, unmined transaction whose hash is
        `tx_hash` (hex, with or without 0x), or None."""
        address, wanted = address.lower(), tx_hash.removeprefix("0x").lower()
        with self._locked():
            for entry in self._entries():
                if (entry.address == address and entry.raw and not entry.mined
                        and keccak(bytes.fromhex(entry.raw)).hex() == wanted):
                    return entry
        return None

    def give_back(self, nonce: int) -> None:
        """`nonce` will not be sent (the estimate reverted, the endpoint refused it), or
        its mined transaction is no longer on the chain. The highest nonce is simply
        forgotten; one below others is marked for filling."""
        with self._locked():
            entries = self._entries()
            if entries and max(e.nonce for e in entries) == nonce:
                remove_file(self._path(nonce))
                return
            entry = self._entry(nonce)
            if entry is not None:
                entry.abandoned, entry.raw, entry.mined = True, None, False
                self._save(entry)

    def _entry(self, nonce: int) -> NonceEntry | None:
        try:
            return NonceEntry(**orjson.loads(self._path(nonce).read_bytes()))
        except FileNotFoundError:
            return None
        except (orjson.JSONDecodeError, TypeError):
            return None

    def blocking(self, address: str, chain_count: int, below: int) -> list[NonceEntry]:
        """The entries between the chain's count and `below`: what holds `below` back."""
        address = address.lower()
        with self._locked():
            return [e for e in self._entries()
                    if e.address == address and chain_count <= e.nonce < below]


def unstick(book: NonceBook, address: str, own_nonce: int, chain_count: int,
            send_raw: Callable[[bytes], Any], fill: Callable[[int], bytes]) -> list[int]:
    """Push through what holds `own_nonce` back. `send_raw` broadcasts through this worker's
    endpoint; `fill(nonce)` signs a zero-value transfer to self at `nonce`. Returns the
    nonces it acted on."""
    acted = []
    now = time.monotonic()
    for entry in book.blocking(address, chain_count, own_nonce):
        if entry.mined:
            continue  # the endpoint is behind: it is already in a block
        raw: bytes | None = bytes.fromhex(entry.raw) if entry.raw else None
        if raw is None:
            dead = entry.pid != os.getpid() and not pid_alive(entry.pid)
            if not (entry.abandoned or dead or now - entry.allocated_at > UNSIGNED_STALE_S):
                continue  # its worker is signing it right now
            raw = fill(entry.nonce)
            book.record(entry.nonce, raw)
            log.info("nonce %d of %s was never sent (space %s): filled with a transfer to "
                     "self", entry.nonce, address, entry.space16)
        else:
            log.info("nonce %d of %s (space %s) is not mined: re-broadcast", entry.nonce,
                     address, entry.space16)
        try:
            send_raw(raw)
        except Exception as err:  # noqa: BLE001 - already known, or mined meanwhile
            log.info("re-broadcast of nonce %d: %s", entry.nonce, type(err).__name__)
        acted.append(entry.nonce)
    return acted
