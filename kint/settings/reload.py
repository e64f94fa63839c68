"""The config file, read again when it changes: one stat per check (its signature,
paths.file_signature), cheap enough for every request.

A file that fails its checks is refused (the error names the file and the key) and the last
good configuration keeps serving, except that a chain setting never gives way to the
default because of it: one the refused file sets badly, or sets where no last good value
stands in, refuses the chain work until the file is fixed (`tomlfile.with_refusals`).

So that a process started after the file went bad (a worker spawned later, a restarted
supervisor) serves the same last good configuration, each good file is copied to
`$KINT_HOME/config.last-good.toml` (0600); a process with nothing good in memory starts
from that copy.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from kint.paths import FileSignature, atomic_write, file_signature
from kint.settings.complaints import complain
from kint.settings.tomlfile import (CONFIG_NAME, ConfigError, ConfigFile, parse_config,
                                    read_config, with_refusals)

log = logging.getLogger("kint.settings")

LAST_GOOD_NAME = "config.last-good.toml"

Signature = FileSignature | None
# A config file that cannot be looked at is not "no file": it is read (and refused) again.
UNREADABLE: FileSignature = (-1, -1, -1, -1)


def config_path(home: Path) -> Path:
    return home / CONFIG_NAME


def _signature(path: Path | str) -> Signature:
    try:
        return file_signature(path)
    except OSError:
        return UNREADABLE


class ConfigWatch:
    """The config file of one KINT_HOME, as this process last read it."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = config_path(home)
        self._path_text = str(self.path)  # stat on every request: no Path conversion
        self.last_good_path = home / LAST_GOOD_NAME
        self._lock = threading.Lock()
        self._signature: Signature | str = "never read"
        self._good: ConfigFile | None = None
        self._error: ConfigError | None = None
        self.generation = 0  # bumped on every change of the file that was read

    def current(self) -> tuple[ConfigFile, ConfigError | None]:
        """The configuration in force and, when the file on disk was refused, why. Most
        homes have no config file: while there was none, an `access` asks whether there
        is one now, without the exception a failed stat builds on every request."""
        if self._signature is None and not os.access(self._path_text, os.F_OK):
            sig: Signature | str = None
        else:
            sig = _signature(self._path_text)
        if sig != self._signature:
            with self._lock:
                if sig != self._signature:
                    self._read(sig)
        assert self._good is not None
        return self._good, self._error

    def reload(self) -> tuple[ConfigFile, ConfigError | None]:
        """Read the file now, whether or not its stat changed (`kint supervisor reload`)."""
        with self._lock:
            self._read(_signature(self.path))
        assert self._good is not None
        return self._good, self._error

    def _read(self, sig: Signature) -> None:
        first = self._good is None
        try:
            good = read_config(self.path)
        except ConfigError as err:
            if self._good is None:
                self._good = self._last_good()
            try:
                data: bytes | None = self.path.read_bytes()
            except OSError:
                data = None
            # The chain's settings never give way to the last good ones (or the default).
            self._good = with_refusals(self._good, data, err)
            if self._error is None or str(self._error) != str(err):
                complain(f"{err}; the last good configuration keeps serving")
            self._error = err
        else:
            if not first and self._error is None and good == self._good:
                self._signature = sig
                return
            if not first or good.exists:
                log.info("configuration %s: %s", "read" if first else "read again",
                         self.path if good.exists else f"{self.path} (absent: defaults)")
            self._good, self._error = good, None
            self._keep_last_good(good)
        self._signature = sig
        self.generation += 1

    def _last_good(self) -> ConfigFile:
        """The copy of the last good file, or an empty configuration."""
        try:
            data = self.last_good_path.read_bytes()
        except OSError:
            return ConfigFile(path=self.path)
        try:
            copy = parse_config(self.path, data)
        except ConfigError:
            return ConfigFile(path=self.path)
        log.info("serving the last good configuration (%s)", self.last_good_path)
        return copy

    def _keep_last_good(self, good: ConfigFile) -> None:
        try:
            if not good.exists:
                self.last_good_path.unlink(missing_ok=True)
                return
            data = self.path.read_bytes()
            try:
                if self.last_good_path.read_bytes() == data:
                    return
            except FileNotFoundError:
                pass
            if parse_config(self.path, data) == good:  # not changed again since
                atomic_write(self.last_good_path, data)
        except (OSError, ConfigError) as err:
            log.info("could not keep a copy of the last good configuration: %s", err)
