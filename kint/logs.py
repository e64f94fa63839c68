"""One log file per KINT_HOME for the supervisor and its workers (stdout belongs to the
MCP transport in kint-server, and a daemon has no terminal). Lines carry the pid, so one
worker's story can be read out of the shared file."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from kint.paths import ensure_private_dir, log_path

_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"


def setup_file_logging(home: Path, level: int = logging.INFO) -> None:
    path = log_path(home)
    ensure_private_dir(path.parent)
    # Create it 0600 before logging opens it: the log names stores and tenants.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.close(fd)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT))
    root.addHandler(handler)
    root.setLevel(level)
