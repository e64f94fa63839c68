"""One log file per KINT_HOME for the supervisor and its workers (stdout belongs to the
MCP transport in kint-server, and a daemon has no terminal). Lines carry the pid, so one
worker's story can be read out of the shared file. kint-server writes its own file and the
same lines to stderr, as kint v0.3.0's does (10-configuration.md, "Logs"): an MCP client
shows a server's stderr in its own logs (Claude Code, Codex), where a user looks first.

The file is bounded: every byte under KINT_HOME counts against the user's Sibyl storage
cap. Every process writes through a `WatchedFileHandler`, which reopens the path when the
file under it has been renamed away; the supervisor alone rotates (`rotate_if_large`),
keeping one backup, `supervisor.log.1`."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from pathlib import Path

from kint.paths import ensure_private_dir, log_path
from kint.settings.schema import BY_NAME

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"

DEFAULT_LOG_MAX_BYTES = BY_NAME["KINT_LOG_MAX_BYTES"].default
SERVER_LOG = "kint.log"  # kint-server's (its stdout is the MCP transport)
MIN_LOG_MAX_BYTES = int(BY_NAME["KINT_LOG_MAX_BYTES"].minimum or 0)


# Control characters (C0, DEL, C1) and Unicode's line and paragraph separators, written as
# escapes: a value a client sent (a store path, a label) must not start a forged log line.
# So are the bidirectional controls (marks, embeddings, overrides, isolates): a tenant
# named with U+202E would show the rest of its line reversed in a terminal or an editor,
# a record that reads as something else than what was written.
_ESCAPES = {c: repr(chr(c))[1:-1] for c in (*range(0x20), *range(0x7F, 0xA0))}
_ESCAPES.update({c: f"\\u{c:04x}" for c in (0x2028, 0x2029, 0x061C, 0x200E, 0x200F,
                                               *range(0x202A, 0x202F), *range(0x2066, 0x206A))})


def one_line(text: str) -> str:
    """`text` with every control character escaped, so it stays on its log line."""
    return text.translate(_ESCAPES)


# A traceback's lines are written indented by this: only a record's first line starts at
# the left margin, so an exception message with a newline in it (its text may come from a
# client) cannot start what looks like a record of its own.
TRACEBACK_INDENT = "  "


class _OneLineFormatter(logging.Formatter):
    """Each record's values (store paths, labels, error messages: some come from clients)
    are written on the record's own line; a traceback (`exc_info`) keeps its lines, each
    indented, so none of them starts at the left margin as a record does."""

    def formatException(self, ei: object) -> str:  # noqa: N802 - logging's name
        text = super().formatException(ei)  # type: ignore[arg-type]
        return "\n".join(TRACEBACK_INDENT + line for line in text.splitlines())

    def format(self, record: logging.LogRecord) -> str:
        if record.args:
            record = logging.makeLogRecord(record.__dict__)
            if isinstance(record.args, dict):
                record.args = {k: _escaped(v) for k, v in record.args.items()}
            else:
                record.args = tuple(_escaped(v) for v in record.args or ())
        return super().format(record)


def _escaped(value: object) -> object:
    """A log argument as it may be written: numbers and bytes as they are (their formats
    need them, and a bytes repr is escaped already), anything else as escaped text."""
    if value is None or isinstance(value, (int, float, bytes)):
        return value
    return one_line(str(value))


class _PrivateWatchedFileHandler(logging.handlers.WatchedFileHandler):
    """A WatchedFileHandler whose file, first opened or reopened after a rotation, is
    created 0600 (whatever the umask): the log names stores and tenants.

    A line never raises into the code that logs it. The standard handler reopens a
    renamed or removed file outside its own error handling, so with KINT_HOME removed
    under a running process the reopen's FileNotFoundError came out of `log.info`: the
    supervisor's stop raised half-way, and the process then waited forever on its
    workers at exit. A line the file cannot take goes to stderr instead (after one line
    saying why), and the next line tries the file again."""

    _unwritable: str | None = None  # why the file could not be opened, once told
    echoed = False  # every line goes to stderr anyway (kint-server): only say why here

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.reopenIfNeeded()
            if self.stream is None:
                self.stream = self._open()
                self._statstream()
        except OSError as err:
            if self.stream is not None and getattr(self.stream, "closed", False):
                self.stream = None  # a reopen that failed half-way: open anew next line
            self._to_stderr(record, err)
            return
        self._unwritable = None
        logging.StreamHandler.emit(self, record)

    def _to_stderr(self, record: logging.LogRecord, err: OSError) -> None:
        try:
            if self._unwritable is None:
                self._unwritable = str(err)
                sys.stderr.write(f"kint: cannot write the log {self.baseFilename} "
                                 f"({err.strerror or err}); its lines go here until it can\n")
                sys.stderr.flush()
            if not self.echoed:
                sys.stderr.write(self.format(record) + "\n")
                sys.stderr.flush()
        except Exception:  # noqa: BLE001 - no stderr either: the line is lost, never raised
            pass

    def _open(self):  # type: ignore[override]
        # Never through a link: the log's folder is KINT_HOME, where a link is not kint's,
        # and lines appended through one would land in (and create) a file elsewhere.
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW,
                     0o600)
        try:
            return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)
        except BaseException:
            os.close(fd)
            raise


class _StderrHandler(logging.StreamHandler):
    """kint-server's lines on stderr as well. A line never raises into the code that logs
    it, nor prints a traceback of its own: a client that closed the pipe loses the line."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        pass


def setup_file_logging(home: Path, level: int = logging.INFO, name: str | None = None,
                       *, stderr: bool = False) -> None:
    """Send this process's log to `name` under KINT_HOME (default: the supervisor's and
    workers' shared log; kint-server passes its own, kint.log), and with `stderr` the same
    lines to stderr too (kint-server's: what its MCP client shows; the log holds no secret,
    so neither does stderr)."""
    path = home / name if name else log_path(home)
    ensure_private_dir(path.parent)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    # The handler creates the file 0600 before it first writes, and again on every reopen.
    # Opened here rather than by the handler's constructor, where a file it cannot open
    # (a link in its place, refused) would end the process with a traceback: the handler
    # then says why on stderr, once, and sends the lines there until the file takes them.
    handler = _PrivateWatchedFileHandler(path, encoding="utf-8", delay=True)
    try:
        handler.stream = handler._open()
        handler._statstream()
    except OSError:
        if handler.stream is not None:
            handler.stream.close()
        handler.stream = None
    handler.setFormatter(_OneLineFormatter(_FORMAT))
    root.addHandler(handler)
    if stderr:
        handler.echoed = True
        echo = _StderrHandler()
        echo.setFormatter(_OneLineFormatter(_FORMAT))
        root.addHandler(echo)
    root.setLevel(level)


def rotated_logs(home: Path) -> list[Path]:
    """The logs the supervisor keeps bounded: its own shared log and kint-server's."""
    return [log_path(home), home / SERVER_LOG]


def log_max_bytes() -> int:
    """KINT_LOG_MAX_BYTES: the size over which the supervisor rotates the log."""
    from kint import settings

    return int(settings.value("KINT_LOG_MAX_BYTES"))


def rotate_if_large(path: Path, max_bytes: int) -> bool:
    """Rename the log at `path` to `<name>.1`, replacing the older backup, when it is over
    `max_bytes`. Call it from one process only, the supervisor: every process's next line
    then reopens a fresh 0600 file. Returns whether it rotated."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return False
    if size <= max_bytes:
        return False
    os.replace(path, path.with_name(path.name + ".1"))
    return True
