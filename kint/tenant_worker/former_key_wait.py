"""The bound on waiting for a previous session key's nonce that another endpoint of the
space holds (former_key.py `deferral`), and when that wait began.

Why the first sighting is kept in the push journal (`PendingEpoch.deferred`): the bound is
counted from it, and a count held in the worker's memory began again at every restart (a
crash, its idle exit, `kint supervisor restart`), so a transaction that one pool never
passed on held the fill back for one bound more at each, where the bound is there to end
that wait. The journal is the file the wait is about: written as it is (0600, whole or not
at all), removed with it once settled, and under the head lock as every settlement is.
A write that fails (a full disk), or no journal of the key's to keep it in, leaves the
sighting in this worker's memory, as all of them were before.

The sighting's time is the monotonic clock's (`Sighting`), with the boot it was read on,
never the wall clock's: a wall clock set back kept the bound from ending (the push waited
out its receipt wait at every push and pull again), set forward ended it at once. The
monotonic clock is one clock for the whole system within a boot (kint/chain/nonces.py and
session_handoff.py rely on it too), so a restarted worker reads the same one; a sighting of
another boot is recorded again as first seen now.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from kint.boot import boot_id
from kint.chain.nonces import retry_seconds
from kint.chain.rpc import RpcUnavailable
from kint.protocol import ProtocolError
from kint.protocol.hints import DEFERRED_FILL_HINT
from kint.seconds_text import seconds_text
from kint.tenant_worker.pending_journal import PendingEpoch, Sighting

log = logging.getLogger("kint.worker")

# How long a nonce of the previous key that waits at another endpoint of the space, not yet
# at the one it sends through, defers its fill: DEFER_STEPS times KINT_NONCE_RETRY_SECONDS
# (the setting for how long a transaction waits before another space's stuck one is pushed
# through), 30 s at its default. Nodes of one chain pass a transaction on within seconds, so
# one still not passed on after two such waits never will be (that pool does not gossip to
# this one, or dropped it); and at the default, the wait's first look (15 s) defers and its
# third (45 s) ends the deferral inside the 60 s receipt wait, which then ran out in the
# generic "may still land" at every push and pull for as long as the transaction waited.
DEFER_STEPS = 2
# A sighting no journal could keep, by (journal, signer, nonce): this worker's only.
_unsaved: dict[tuple[Path, str, int], Sighting] = {}


def bound_s() -> float:
    return DEFER_STEPS * retry_seconds()


class DeferredWait(RpcUnavailable):
    """A receipt wait that ran out while its last look left a hole to a transaction waiting
    at another endpoint, within the bound: no endpoint failed, so its refusal's hint
    (`hint`) is the way past that wait, where the generic RPC hint sent the user to check
    endpoints that answered, and to try again into the same wait."""

    hint = DEFERRED_FILL_HINT


@dataclass(frozen=True)
class Look:
    """What the space's other endpoints said of a nonce of the key (`waits_elsewhere`):
    `url` (redacted), the first that holds a transaction at it; else `unanswered`, whether
    one of them did not answer, so that it may hold one all the same. Neither: none
    holds one (or there is no other endpoint)."""

    url: str | None = None
    unanswered: bool = False


@dataclass(frozen=True)
class Elsewhere:
    """A nonce of the previous key waiting at another endpoint of the space (`url`,
    redacted) for `waited_s` since it was first seen there; `over`: past the bound, the
    fill no longer waits for it."""

    url: str
    waited_s: float
    over: bool
    unanswered: bool = False  # the last look went unanswered: `url` is where it was seen

    def where(self) -> str:
        return self.url + (" (which did not answer the last look)" if self.unanswered else "")

    def words(self, hole: int) -> str:
        return (f"nonce {hole} of that key has waited at the endpoint {self.where()} for "
                f"{self.waited_s:.0f} s (the bound is {DEFER_STEPS} x "
                f"KINT_NONCE_RETRY_SECONDS: {seconds_text(bound_s())} here) and has not "
                f"reached the endpoint this space sends through")


def since(journal: Path, signer: str, hole: int, look: Look) -> Sighting | None:
    """The first sighting of `hole` waiting elsewhere that the bound counts from, after
    `look`; None when it defers nothing. A look that finds it waiting keeps the sighting the
    journal at `journal` (signed by `signer`) holds, or records one now. A look that goes
    unanswered after one that found it waiting keeps it too (taken for "holds nothing", one
    silent look had it filled at once and called never sent, seconds after it was seen
    waiting), a sighting that is no time here included (`first_seen`); never seen, such a
    look defers nothing (an endpoint that is down would hold every fill for the bound). A
    look that finds nothing forgets it."""
    seen = first_seen(journal, signer, hole, look.url)
    if look.url is None and not (look.unanswered and seen is not None):
        note(journal, signer, hole, None)
        return None
    if seen is None:
        seen = Sighting(hole, time.monotonic(), boot_id(), look.url or "")
        note(journal, signer, hole, seen)
    return seen


def first_seen(journal: Path, signer: str, hole: int, url: str | None = None
               ) -> Sighting | None:
    """When and where `hole` was first seen waiting elsewhere, as the journal at `journal`,
    signed by `signer`, keeps it (else this worker's memory). One that is no time here (a
    monotonic reading of another boot, one ahead of now, edited, or a time that does not
    read: pending_journal.py `NO_BOOT`) is recorded again as first seen now, at `url` (where
    a look finds it now) else where it was, and kept so: it still says the nonce was seen
    waiting, which keeps a look that goes unanswered waiting, where read as never seen it
    had the hole filled at once."""
    held = _load(journal, signer)
    seen = held.deferred_at(hole) if held is not None else None
    seen = seen or _unsaved.get((journal, signer.lower(), hole))
    if seen is not None and (seen.boot != boot_id() or not seen.mono <= time.monotonic()):
        seen = Sighting(hole, time.monotonic(), boot_id(), url or seen.url)
        note(journal, signer, hole, seen)
    return seen


def note(journal: Path, signer: str, hole: int, seen: Sighting | None) -> None:
    """Keep `hole`'s first sighting (None: it waits nowhere now, forgotten) in the journal."""
    _unsaved.pop((journal, signer.lower(), hole), None)
    held = _load(journal, signer)
    if held is not None and held.deferred_at(hole) == seen:
        return
    if held is not None:
        try:
            held.with_deferred(hole, seen).save(journal)
            return
        except OSError as err:
            log.warning("%s: when nonce %d was first seen waiting elsewhere is kept only "
                        "by this worker: %s", journal, hole, err)
    if seen is not None:  # no journal of the key's to keep it in, or it did not write
        _unsaved[(journal, signer.lower(), hole)] = seen


def waited(seen: Sighting) -> float:
    """Seconds since `seen`, on the monotonic clock (`first_seen` took it only on its boot
    and not after now)."""
    return max(0.0, time.monotonic() - seen.mono)


def _load(journal: Path, signer: str) -> PendingEpoch | None:
    """The journal, when it is `signer`'s; a file that does not read is its settlement's
    to name, not this wait's."""
    try:
        held = PendingEpoch.load(journal)
    except (OSError, ProtocolError):
        return None
    return held if held is not None and held.sender.lower() == signer.lower() else None
