"""Every setting's value in this process, and where it came from.

The layers, lowest first:

    default < config file (top level) < environment < config file ([spaces."<label>"]) < this call

The environment is the process's own: in a `kint` command or kint-server it is the
caller's ("this call"); in the supervisor and its workers it is the environment the
supervisor was started with ("daemon environment"). A space's table in the config file
beats the daemon's environment, so one space can be given its own endpoint on a machine
whose service sets one for all. "This call" is what a client sent with the request: it
applies to call-scope settings (and, on attach, to the watcher's timings); other values a
client sent are compared, and a difference is reported (kint.settings.wire).

In a worker, a request's values are set for the thread that runs it (`overlay`), so code
anywhere below the handler reads the call's value with the same `value(name)`.

A value that does not parse gives way to the layer below, with a complaint, except for a
strict setting (the chain's endpoints and contract): there it is kept as a refused `Value`
(no value, `refused` saying why), and the chain work that would read it refuses
(`refusal`), rather than send a push to, or verify against, Base mainnet's default
contract because of a typo.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from kint.settings import complaints
from kint.settings.complaints import complain
from kint.settings.environ import environ_value
from kint.settings.reload import ConfigWatch
from kint.settings.schema import BY_NAME, Setting
from kint.settings.tomlfile import ConfigError, ConfigFile
from kint.settings.values import BadValue, given, parse

log = logging.getLogger("kint.settings")

DEFAULT = "default"
FILE = "file"
DAEMON_ENV = "daemon environment"
THIS_CALL = "this call"
# A watcher timing the newest kint-server session sent when it attached.
SESSION = "kint-server session"


@dataclass(frozen=True)
class Value:
    """One setting's effective value. `value` has the setting's type (None: unset); `where`
    says more about the source (the config file's table, the file a value came from)."""

    setting: Setting
    value: Any
    source: str
    where: str | None = None
    raw: str | None = None
    # The label of the config file's `[spaces."<label>"]` table the value came from.
    table: str | None = None
    # A strict setting's value that is refused: the line that says which, from where and
    # why (URLs without their path or query). `value` is None then, and must not be used.
    refused: str | None = None

    @property
    def name(self) -> str:
        return self.setting.name

    @property
    def described(self) -> str:
        """The source in words: `file /h/.kint/config.toml [spaces."x"]`, `default`."""
        if self.source == FILE and self.where:
            table = f' [spaces."{self.table}"]' if self.table else ""
            return f"file {self.where}{table}"
        return f"{self.source} ({self.where})" if self.where else self.source


class _Process:
    """What this process is: a client (its environment is the call's) or the daemon, the
    KINT_HOME whose config it reads, and (in a worker) the names of its space."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.daemon = False
        self.home: Path | None = None
        self.space: tuple[str, ...] = ()
        self.watches: dict[Path, ConfigWatch] = {}
        # The watch of `home` once asked for: `config()` runs on every request a worker
        # serves, and finding it by path (a Path built, hashed and compared) cost more
        # than the config file's stat.
        self.own_watch: ConfigWatch | None = None
        self.warned: set[tuple[str, str]] = set()


_process = _Process()
_overlay: contextvars.ContextVar[dict[str, Value] | None] = contextvars.ContextVar(
    "kint_settings_overlay", default=None)


def configure(*, home: Path | None = None, daemon: bool | None = None,
              space: tuple[str, ...] | None = None) -> None:
    """Say what this process is (the supervisor and each worker do, at start)."""
    with _process.lock:
        if home is not None:
            _process.home = Path(home)
            _process.own_watch = None
        if daemon is not None:
            _process.daemon = daemon
            complaints.in_daemon = daemon
        if space is not None:
            _process.space = tuple(space)


def home() -> Path:
    if _process.home is not None:
        return _process.home
    from kint.paths import kint_home

    return kint_home()


def watch(for_home: Path | None = None) -> ConfigWatch:
    path = Path(for_home) if for_home is not None else home()
    with _process.lock:
        found = _process.watches.get(path)
        if found is None:
            found = _process.watches[path] = ConfigWatch(path)
        return found


def config() -> tuple[ConfigFile, ConfigError | None]:
    """The configuration in force for this process (one stat), and why the file on disk
    was refused, if it was."""
    own = _process.own_watch
    if own is None:
        own = watch()
        if _process.home is not None and own.home == _process.home:
            _process.own_watch = own
    return own.current()


def env_source() -> str:
    return DAEMON_ENV if _process.daemon else THIS_CALL


def _clamped(setting: Setting, value: Any, raw: str, origin: str) -> Any:
    if setting.minimum is not None and value < setting.minimum:
        _warn_once(setting.name, raw, f"{setting.name}={raw} is below {setting.minimum}; "
                   f"using {setting.minimum}", origin)
        return type(value)(setting.minimum)
    return value


def _warn_once(name: str, raw: str, line: str, origin: str) -> None:
    key = (name, raw)
    if key not in _process.warned:
        _process.warned.add(key)
        complain(f"{line} ({origin})")


def parse_loose(setting: Setting, raw: str, origin: str,
                fallback: Any) -> tuple[Any, str | None]:
    """An environment value as the setting's type: a value that does not parse is logged
    and not used (None, why), a number below the minimum is raised to it. A strict
    setting's is logged only (the work that reads it refuses, saying so)."""
    try:
        value = parse(setting, raw)
    except BadValue as err:
        line = f"{setting.name}={given(setting, raw)} {err}"
        if not setting.strict:
            _warn_once(setting.name, raw, f"{line}; using {fallback}", origin)
        elif _process.daemon or logging.getLogger().handlers:
            _warn_once(setting.name, raw, f"{line}; the chain work that reads it is refused",
                       origin)
        return None, str(err)
    return _clamped(setting, value, raw, origin), None


ENV_WORDS = {THIS_CALL: "the environment of this call", DAEMON_ENV: "the supervisor's environment"}


def refused_in_env(setting: Setting, raw: str, why: str, source: str) -> Value:
    """A strict setting's environment value that does not parse, as a refused Value."""
    line = f"{setting.name}={given(setting, raw)} in {ENV_WORDS[source]} {why}"
    return Value(setting, None, source, raw=raw, refused=line)


def _refused_in_file(setting: Setting, cfg: ConfigFile, why: str,
                     table: str | None = None) -> Value:
    """A strict setting refused with the config file: by the file's key that sets it, or,
    for a file that is no TOML at all (`unparsed`), by `why` alone, which names the
    setting, the file and where it does not parse: "KINT_RPC_URL in config.toml (rpc_url)"
    said a key the file need not have, and hid that the file does not parse."""
    if cfg.unparsed and table is None:
        return Value(setting, None, FILE, str(cfg.path), refused=why)
    key = f'spaces."{table}".{setting.key}' if table else setting.key
    return Value(setting, None, FILE, str(cfg.path), table=table,
                 refused=f"{setting.name} in {cfg.path} ({key}): {why}")


def refusal(v: Value) -> tuple[str, str]:
    """A refused value (`v.refused`) as an error's line and hint: what to change, where."""
    name = v.name
    line = f"{v.refused}; kint uses no other chain or contract in its place"
    if v.source == FILE:
        return line, (f"fix {v.where} (read again when it changes; `kint config check` "
                      f"names the key it refuses, or where it does not parse)")
    if v.source == DAEMON_ENV:
        return line, (f"the supervisor was started with it: correct {name} in the service's "
                      f"environment file and restart the service, or `kint supervisor stop` "
                      f"and run the next command from an environment where it is correct")
    return line, (f"correct {name} in this command's environment (or kint-server's MCP "
                  f"configuration), or unset it")


def resolve(setting: Setting, cfg: ConfigFile, *, environ: Mapping[str, str] | None = None,
            space: tuple[str, ...] = ()) -> Value:
    """`setting` through the layers below "this call". A strict setting's value that does
    not parse (in the environment, or in a config file that was refused for it) is a
    refused Value at its layer, which a higher layer's good value still replaces."""
    current = Value(setting, setting.default, DEFAULT)
    name = setting.name
    if name in cfg.refused:
        current = _refused_in_file(setting, cfg, cfg.refused[name])
    elif name in cfg.machine:
        current = Value(setting, cfg.machine[name], FILE, str(cfg.path))
    raw = environ_value(name, environ)
    if raw is not None:
        source = env_source()
        if setting.secret:
            current = Value(setting, raw, source)
        else:
            value, bad = parse_loose(setting, raw, source, current.value)
            if bad is None:
                current = Value(setting, value, source, raw=raw)
            elif setting.strict:
                current = refused_in_env(setting, raw, bad, source)
    if setting.per_space and space:
        refused = cfg.space_refusal(space, name) if cfg.refused_spaces else None
        found = cfg.space_table(space)
        if refused is not None:
            current = _refused_in_file(setting, cfg, refused[1], refused[0])
        elif found is not None and name in found[1]:
            current = Value(setting, found[1][name], FILE, str(cfg.path), table=found[0])
    return current


def lookup(name: str) -> Value:
    """The effective value of `name` here and now: this request's, else this process's."""
    overlay = _overlay.get()
    if overlay is not None and name in overlay:
        return overlay[name]
    return own_lookup(name)


def own_lookup(name: str) -> Value:
    """This process's value of `name`, whatever request's values are overlaid: in a
    worker, the space's own (the supervisor's environment, config.toml, the default), what
    a status sets a session's values beside whatever the call asking for it carries
    (kint.tenant_worker.push_settings.differing)."""
    cfg, _ = config()
    return resolve(BY_NAME[name], cfg, space=_process.space)


def space_label() -> str | None:
    """The label of the space this process serves (a worker's, the first of the names its
    `[spaces."<label>"]` table is found by), or None in any other process: a hint that
    sends the user to that table names it, where it said `<label>`."""
    return _process.space[0] if _process.space else None


def machine_lookup(name: str) -> Value:
    """`name` for the whole machine: the process's layers without a space's table."""
    cfg, _ = config()
    return resolve(BY_NAME[name], cfg)


def value(name: str) -> Any:
    """The one way kint reads a setting."""
    return lookup(name).value


class RequestView(dict):  # type: ignore[type-arg]
    """Every setting's value in this process as one reading of the config file gives them,
    each resolved the first time a request asks for it (in the daemon, one view serves every
    request that sent no setting while that reading is in force: `shared_view`). A request
    reads two or three of the ~30 settings; resolving them all up front was ~7% of a
    verify's CPU in the worker (the many-tenants bench, bench/README.md)."""

    def __init__(self, cfg: ConfigFile) -> None:
        super().__init__()
        self._cfg = cfg
        self._space = _process.space

    def __missing__(self, name: str) -> Value:
        found = self[name] = resolve(BY_NAME[name], self._cfg, space=self._space)
        return found

    def __contains__(self, name: object) -> bool:
        return name in BY_NAME or super().__contains__(name)


# The view of the reading in force, shared by the requests that send no setting (most):
# their values are the process's alone, so one view per reading of the config file serves
# them all, and a setting is resolved once per reading, not once per request. A request
# that sends settings gets a view of its own (`wire.apply` writes the call's values in it).
_shared_view: RequestView | None = None


def shared_view(cfg: ConfigFile) -> RequestView:
    """The process's values as `cfg` gives them, for a request that sent none. Only the
    daemon shares one: its environment is the supervisor's, fixed when it was spawned,
    while a client's own environment is the call's and may change between two calls. The
    view is of the space the process serves as well as of the reading: one made before
    `configure` named another space holds the first space's table values, not this one's."""
    global _shared_view
    if not _process.daemon:
        return RequestView(cfg)
    view = _shared_view
    if view is None or view._cfg is not cfg or view._space != _process.space:
        view = _shared_view = RequestView(cfg)
    return view


class overlay:
    """`with overlay(values):` runs the block with `values` as this request's settings
    (this thread only). A class, not a generator: it wraps every request a worker runs,
    and a generator-based context manager costs several times as much to enter."""

    __slots__ = ("_values", "_token")

    def __init__(self, values: dict[str, Value]) -> None:
        self._values = values

    def __enter__(self) -> None:
        self._token = _overlay.set(self._values)

    def __exit__(self, *exc: object) -> None:
        _overlay.reset(self._token)
