"""The supervisor's checks on itself, from the sweep (`timed`), each on its own period.

- Every second: is KINT_HOME still its own (`ownership`)? Its pid lock taken or removed,
  it steps down (EXIT_STEPPED_DOWN), so that one supervisor serves the home; its sockets
  removed or replaced while it holds the lock, it binds them again. And did config.toml
  change: the tunables follow it without a restart.
- Every few seconds: is the shared log too large (the supervisor alone rotates it), and
  were kint's installed files changed (`code_watch`): then it stops once nothing is in
  flight, so that the next call starts the new version, which takes over the agent
  sessions (`succession`).

Kept apart from the loop (kint/supervisor/daemon.py) because none of it is about a
message. A mixin of `Supervisor`, which owns the home, the settings, the ownership record
and the sockets these methods act on.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

import zmq

from kint import settings as kint_settings
from kint.logs import rotate_if_large, rotated_logs
from kint.paths import is_private_dir
from kint.supervisor.code_watch import EXIT_UPGRADED, Signature, code_signature
from kint.supervisor.front_door import FrontDoor
from kint.supervisor.ownership import Ownership
from kint.supervisor.settings import Settings
from kint.supervisor.workers import WorkerHandle

log = logging.getLogger("kint.supervisor")

HOUSEKEEPING_EVERY_S = 5.0  # how often the supervisor checks its logs' size and kint's files
OWNERSHIP_EVERY_S = 1.0  # how often it checks that its pid lock and sockets are still its own
# Exit code of a supervisor that stepped down because its pid lock was taken: "start me
# again" (EX_TEMPFAIL), so a service manager's restart finds whoever holds the home now.
EXIT_STEPPED_DOWN = 75


class Housekeeping:
    home: Path
    settings: Settings
    ownership: Ownership
    handles: dict[str, WorkerHandle]
    shutting_down: bool
    upgraded: bool
    # Set by `kint supervisor stop` or a signal (SIGTERM, SIGINT, SIGHUP).
    stop_commanded: bool
    exit_code: int
    # Set when it stepped down (`_check_ownership`). Said by itself, not by `exit_code`:
    # EXIT_STEPPED_DOWN and EXIT_UPGRADED are both 75, and a step-down during an upgrade's
    # drain must still exit 75 when a stop comes after it (`process_exit_code`).
    stepped_down: bool
    front_path: Path | None
    back_path: Path | None
    _code: Signature
    _housekeeping_at: float
    _ownership_at: float
    _log_rotate_failed: bool
    # SupervisorSockets' methods (sockets.py), declared for the type checker.
    _bind_sockets: Callable[[], None]
    unbind_idle_listeners: Callable[[], None]
    # Supervisor's own (daemon.py), likewise.
    door: FrontDoor
    begin_shutdown: Callable[[], None]

    def _housekeeping(self, now: float) -> None:
        """The supervisor's own checks, each on its own period: is the home still its own,
        did the config file change, is the log too large, was kint upgraded."""
        if now >= self._ownership_at:
            self._ownership_at = now + OWNERSHIP_EVERY_S
            self._check_ownership()
            self.check_config()
        if now >= self._housekeeping_at:
            self._housekeeping_at = now + HOUSEKEEPING_EVERY_S
            self._rotate_log()
            self._check_upgrade()
        if (self.upgraded and not self.shutting_down
                and not any(h.pending for h in self.handles.values())):
            log.info("nothing in flight: stopping for the new version of kint")
            self.begin_shutdown()

    def _check_ownership(self) -> None:
        """Is KINT_HOME still this supervisor's? Its pid lock replaced or removed: another
        supervisor may run (or start any moment), so this one steps down. Its sockets gone
        or replaced while it holds the lock: it binds them again, so that clients reach it
        instead of waiting on a supervisor they cannot see."""
        if self.shutting_down:
            return
        if not self.ownership.holds_lock():
            log.warning("%s is no longer the lock this supervisor holds (removed or "
                        "replaced): stepping down, so that one supervisor serves %s",
                        self.ownership.lock_path, self.home)
            self.stepped_down = True
            self.exit_code = EXIT_STEPPED_DOWN
            self.begin_shutdown()
            return
        # A front socket moved aside by its door (front_door) is this supervisor's doing;
        # once that file is gone too (`lost`), the front socket is bound again, closed.
        paths = (self.back_path,) if self.door.closed is not None else (self.front_path,
                                                                         self.back_path)
        if self.door.lost or any(p is None or not is_private_dir(p.parent)
                                 or not self.ownership.socket_is_ours(p) for p in paths):
            try:
                self._bind_sockets()
            except (OSError, zmq.ZMQError) as err:
                log.warning("could not bind the sockets again: %s; retrying", err)
        self.unbind_idle_listeners()

    def check_config(self, force: bool = False) -> kint_settings.ConfigError | None:
        """Read $KINT_HOME/config.toml again when its stat changed (`force`: now, for
        `kint supervisor reload`): the tunables follow it without a restart. A file that is
        refused (named with its key in the log and the returned error) leaves the last good
        configuration in force. Workers read the file themselves, on every request."""
        watch = kint_settings.watch(self.home)
        before = watch.generation
        _, error = watch.reload() if force else watch.current()
        if watch.generation != before:
            new = Settings.load()
            if new != self.settings:
                changed = [f"{name} {getattr(self.settings, name)} -> {getattr(new, name)}"
                           for name in new.__dataclass_fields__
                           if getattr(new, name) != getattr(self.settings, name)]
                log.info("settings changed: %s", ", ".join(changed))
                self.settings = new
        return error

    @property
    def log_max_bytes(self) -> int:
        return self.settings.log_max_bytes

    def _check_upgrade(self) -> None:
        if self.upgraded or self.shutting_down or code_signature() == self._code:
            return
        self.upgraded = True
        self.exit_code = EXIT_UPGRADED
        log.warning("kint's installed files changed (an upgrade): stopping once the requests "
                    "in flight finish, so that the next call starts the new version")

    @property
    def process_exit_code(self) -> int:
        """The code the supervisor's process exits with: `exit_code`, but 0 for a stop
        commanded (`kint supervisor stop`, SIGTERM) once an upgrade was noticed, during its
        drain or after it. Such a stop ends the sessions as any stop does (daemon.py's
        `_handing_on`), yet it exited 75 ("start me again"), so the units in deploy/, which
        restart a non-zero exit, started again a supervisor stopped with `kint supervisor
        stop`, and systemd's own stop ended the unit failed. The next command starts the
        new version anyway. A supervisor that stepped down exits 75 whatever came after:
        its home is another's, and the unit's restart finds who holds it now."""
        if self.upgraded and self.stop_commanded and not self.stepped_down:
            return 0
        return self.exit_code

    def _rotate_log(self) -> None:
        """The supervisor alone rotates the shared log; every process reopens it itself."""
        try:
            for path in rotated_logs(self.home):
                if rotate_if_large(path, self.log_max_bytes):
                    log.info("%s was over %d bytes: its older lines are in %s.1",
                             path.name, self.log_max_bytes, path.name)
            self._log_rotate_failed = False
        except OSError as exc:
            if not self._log_rotate_failed:  # once, not every few seconds into that log
                log.warning("could not rotate the log: %s", exc)
            self._log_rotate_failed = True
