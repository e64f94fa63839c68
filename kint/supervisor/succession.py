"""What a supervisor exiting for an upgrade of kint leaves the next one: its run id, and
which spaces had agent sessions attached.

An upgrade on disk (`code_watch`) ends the whole supervisor, not one worker: it stops its
workers and exits so that the next start runs the new version. Its workers hand their
sessions over as a recycled one does (kint/tenant_worker/session_handoff.py), but each
file names the run id of the supervisor it was written under, and the next supervisor
draws a new one: without more, its workers would drop those files, the sessions would
attach again only at their next keepalive (up to a minute without the watcher), and the
drift baseline, with what it had seen, would be made anew from the store.

So the supervisor that exits for an upgrade writes `run/succession.json` (0600) as it
closes, while it still holds the home's pid lock: its run id, this boot's id, a
monotonic time, and the spaces whose workers had sessions attached. The next supervisor
of the home reads it once, as it starts (after it takes the lock), and removes it. Its
workers then take files of that run too (`WorkerConfig.predecessor_run`), each still
checked as any handoff is (its store, its boot, its age); and it starts the workers of
those spaces at once, from their bindings, as a recycle starts the successor at once, so
the watcher pushes again without waiting for a request.

Nothing is written when the supervisor crashed, stepped down (its home taken by another)
or was stopped on command (`kint supervisor stop`, or a signal, during the upgrade's
drain too): a stop ends the sessions, and a later start takes none of what the workers
left. A record from another boot, or older than SESSION_TTL_S by the monotonic clock
(after which no handoff it covers is takeable anyway), is removed and not taken. The run
id is no secret (it only tells the starts of a supervisor apart) and never goes on argv.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from kint.boot import boot_id
from kint.paths import atomic_write, run_dir
from kint.taken_once import take_once
from kint.tenant_worker.config import SESSION_TTL_S

log = logging.getLogger("kint.supervisor")

SUCCESSION_FILE = "succession.json"
VERSION = 1
MAX_SPACES = 10_000  # as many as the bindings hold: a longer list is not ours


@dataclass(frozen=True)
class Succession:
    run: str  # the run id of the supervisor that exited for the upgrade
    spaces: tuple[str, ...]  # the spaces whose workers had sessions attached


def succession_path(home: Path) -> Path:
    return run_dir(home) / SUCCESSION_FILE


def hand_on(home: Path, run: str, spaces: list[str]) -> None:
    """Leave this supervisor's run id, and the spaces with sessions, to the next one."""
    atomic_write(succession_path(home), orjson.dumps({
        "version": VERSION, "run": run, "boot_id": boot_id(),
        "written_mono": time.monotonic(), "spaces": sorted(spaces)}))
    log.info("left run %s and %d space(s) with sessions to the next supervisor", run,
             len(spaces))


def take_up(home: Path) -> Succession | None:
    """What the supervisor before this one left for it on an upgrade, or None. The file is
    removed either way: it is read once."""
    path = succession_path(home)
    return take_once(path, _checked, (KeyError, TypeError, ValueError),
                     lambda why: log.warning("%s %s; the sessions of the supervisor before "
                                             "attach again at their next keepalive",
                                             path, why))


def _checked(data: Any) -> Succession | None:
    if not isinstance(data, dict) or data["version"] != VERSION:
        raise ValueError("not a succession record of this version")
    run, spaces, boot, written = (data["run"], data["spaces"], data["boot_id"],
                                  data["written_mono"])
    if not _is_hex(run, 16):
        raise ValueError(f"run {run!r} is not a run id")
    if (not isinstance(spaces, list) or len(spaces) > MAX_SPACES
            or not all(_is_hex(s, 64) for s in spaces)):
        raise ValueError("spaces is not a list of space ids")
    if boot is not None and not isinstance(boot, str):
        raise TypeError(f"boot_id {boot!r} is not text")
    if isinstance(written, bool) or not isinstance(written, (int, float)):
        raise TypeError(f"written_mono {written!r} is not a time")
    if boot != boot_id():
        log.info("the supervisor before this one exited on another boot: none of its "
                 "sessions are taken")
        return None
    elapsed = time.monotonic() - written
    if not 0 <= elapsed <= SESSION_TTL_S:  # NaN fails both
        log.info("the supervisor before this one exited %.0fs ago: none of its sessions "
                 "are taken", elapsed)
        return None
    return Succession(run, tuple(spaces))


def _is_hex(value: Any, length: int) -> bool:
    return (isinstance(value, str) and len(value) == length
            and all(c in "0123456789abcdef" for c in value))
