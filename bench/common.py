"""What every kint benchmark shares: a hermetic environment with its own supervisor, real
Sibyl stores, percentiles, /proc memory readings and the JSON output.

Hermetic means: a fresh temp folder holds HOME, KINT_HOME and HERMES_HOME; every KINT_*,
SIBYL_* and HERMES_* variable of the caller is dropped (KINT_SPACE, SIBYL_MEMORY_DB and
friends would change which space a store maps to); SIBYL_MEMORY_TELEMETRY=0. All of it is
set in os.environ before anything starts, because the supervisor a client autostarts
inherits the environment of this process. On the way out, always (try/finally): the
supervisor is stopped with `sup.stop`, its log is kept under bench/out/, the temp folder
is removed and os.environ is restored.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

BENCH_DIR = Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out"
REPO_DIR = BENCH_DIR.parent
# The test suite's supervisor launcher and the module it preloads into the worker
# forkserver (tests/support/kint_test_gate.py): with KINT_TEST_GATE=null every worker's
# Sibyl client gets Sibyl's own NullEntitlementGate, passed in code, so no account is needed.
TEST_SUPPORT = REPO_DIR / "tests" / "support"
BENCH_SUPPORT = BENCH_DIR / "support"
GC_PROBE = BENCH_SUPPORT / "gc_probe"
TENANT = "kint-bench"

_DROPPED_PREFIXES = ("KINT_", "SIBYL_", "HERMES_")


@dataclass
class Machine:
    """One more machine inside a benchmark's temp folder: its own HOME, KINT_HOME and
    HERMES_HOME, and the environment its supervisor runs with."""

    name: str
    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def kint_home(self) -> Path:
        return self.root / "kint"

    @property
    def hermes_home(self) -> Path:
        return self.home / ".hermes"

    @property
    def sibyl_db(self) -> Path:
        """Sibyl's default store for this HOME; its space label is the tenant."""
        return self.home / ".sibyl-memory" / "memory.db"

    def env(self) -> dict[str, str]:
        """The supervisor's environment: this machine's homes, the test gate, no keyring."""
        base = {k: v for k, v in os.environ.items()
                if k in ("PATH", "LANG", "LC_ALL", "TMPDIR", "BENCH_GC_PROBE")}
        # Diagnostic only (bench/support/gc_probe): time every collection of these processes.
        probe = f"{GC_PROBE}:" if os.environ.get("BENCH_GC_PROBE") else ""
        return {**base, "HOME": str(self.home), "KINT_HOME": str(self.kint_home),
                "HERMES_HOME": str(self.hermes_home), "SIBYL_MEMORY_TELEMETRY": "0",
                "PYTHON_KEYRING_BACKEND": KEYRING_OFF, "KINT_TEST_GATE": "null",
                # The worker forkserver imports its preload by name: it must be on the path.
                # The checkout this bench folder belongs to comes next, so the supervisor
                # runs the same kint as this process (not the editable install's).
                "PYTHONPATH": f"{probe}{TEST_SUPPORT}:{REPO_DIR}"}


# Never the caller's OS keyring: kint's machine secret falls back to local.secret.
KEYRING_OFF = "keyring.backends.fail.Keyring"


@dataclass
class BenchEnv:
    name: str
    root: Path
    # Machines with their own supervisor (the chain benchmark's A and B), stopped on exit.
    machines: list[Machine] = field(default_factory=list)
    # Called on the way out, last registered first (e.g. stopping the devchain).
    on_exit: list[Callable[[], None]] = field(default_factory=list)
    # Filled in on the way out.
    supervisor_log_problems: list[str] = field(default_factory=list)
    supervisor_log_copy: str | None = None
    machine_log_copies: dict[str, str] = field(default_factory=dict)
    cleanup_notes: list[str] = field(default_factory=list)

    @property
    def kint_home(self) -> Path:
        return self.root / "kint"

    @property
    def hermes_home(self) -> Path:
        return self.root / "hermes"

    def profile_db(self, profile: str) -> Path:
        """A Hermes profile store: its own space, labelled `<tenant>@hermes:<profile>`."""
        return self.hermes_home / "sibyl" / "profiles" / profile / "memory.db"

    def report(self) -> dict[str, Any]:
        out = {"supervisor_log_problems": self.supervisor_log_problems,
               "supervisor_log_copy": self.supervisor_log_copy,
               "cleanup_notes": self.cleanup_notes}
        if self.machine_log_copies:
            out["machine_log_copies"] = self.machine_log_copies
        return out


@contextmanager
def hermetic(name: str) -> Iterator[BenchEnv]:
    saved = dict(os.environ)
    root = Path(tempfile.mkdtemp(prefix=f"kb-{name}-"))
    env = BenchEnv(name=name, root=root)
    try:
        for key in list(os.environ):
            if key.startswith(_DROPPED_PREFIXES):
                del os.environ[key]
        os.environ["HOME"] = str(root)
        os.environ["KINT_HOME"] = str(env.kint_home)
        os.environ["HERMES_HOME"] = str(env.hermes_home)
        os.environ["SIBYL_MEMORY_TELEMETRY"] = "0"
        os.environ["PYTHON_KEYRING_BACKEND"] = KEYRING_OFF
        yield env
    finally:
        try:
            stop_supervisor(env)
            for machine in env.machines:
                stop_supervisor_at(machine.kint_home, env.cleanup_notes, machine.name)
            for callback in reversed(env.on_exit):
                try:
                    callback()
                except Exception as err:  # noqa: BLE001 - noted; the rest still runs
                    env.cleanup_notes.append(f"clean-up {callback!r} failed: "
                                             f"{type(err).__name__}: {err}")
        finally:
            try:
                _keep_log(env)
                for machine in env.machines:
                    _keep_log(env, machine)
            finally:
                _remove_socket_fallback(env.kint_home, root)
                for machine in env.machines:
                    _remove_socket_fallback(machine.kint_home, root)
                shutil.rmtree(root, ignore_errors=True)
                os.environ.clear()
                os.environ.update(saved)


# -- the supervisor --------------------------------------------------------------------------


def stop_supervisor(env: BenchEnv) -> None:
    """`sup.stop`, then make sure the supervisor and everything under it has exited.

    Only a supervisor that is running is asked (a Client autostarts one otherwise). Any
    process of this benchmark's supervisor tree still alive afterwards is noted and killed
    by pid.
    """
    stop_supervisor_at(env.kint_home, env.cleanup_notes)


def stop_supervisor_at(kint_home: Path, notes: list[str], who: str = "") -> None:
    """`stop_supervisor` for the supervisor of any KINT_HOME; problems go to `notes`."""
    from kint.client import Client
    from kint.supervisor.pidlock import running_pid

    tag = f"[{who}] " if who else ""
    pid = running_pid(kint_home)
    if pid is None:
        return
    tree = descendants(pid) if pid > 0 else []
    try:
        with Client(kint_home, autostart=False) as client:
            client.call("sup.stop", timeout_s=60)
    except Exception as err:  # noqa: BLE001 - recorded, then the pid fallback below
        notes.append(f"{tag}sup.stop failed: {type(err).__name__}: {err}")
    deadline = time.monotonic() + 20
    while running_pid(kint_home) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    if running_pid(kint_home) is not None and pid > 0:
        notes.append(f"{tag}supervisor {pid} still running 20 s after sup.stop; SIGKILL")
        _kill(pid)
    # Workers die with the supervisor, the forkserver when its pipe closes; check both.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(p) for p in tree):
        time.sleep(0.05)
    for child in tree:
        if alive(child):
            notes.append(f"{tag}process {child} of the supervisor tree outlived it; SIGKILL")
            _kill(child)


def start_bench_supervisor(env: BenchEnv, machine: Machine, timeout_s: float = 30, *,
                          launcher: Path | None = None,
                          extra_env: dict[str, str] | None = None) -> int:
    """Start the benchmarks' supervisor (bench/support/run_supervisor_bench.py: kint's own
    `run_foreground` with the test gate preloaded, not the suite's fault hooks) for
    `machine`, and wait until it answers. The machine is registered with `env`, so it is stopped on
    the way out. `launcher` and `extra_env` are for the diagnostic launcher in bench/support/."""
    from kint.client import Client
    from kint.supervisor.pidlock import running_pid

    if machine not in env.machines:
        env.machines.append(machine)
    machine.home.mkdir(parents=True, exist_ok=True)
    machine.kint_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    err = open(machine.root / "supervisor.stderr", "ab")
    try:
        subprocess.Popen([sys.executable,
                          str(launcher or BENCH_SUPPORT / "run_supervisor_bench.py"),
                          "--home", str(machine.kint_home)],
                         env={**machine.env(), **(extra_env or {})}, cwd=str(REPO_DIR),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                         start_new_session=True)
    finally:
        err.close()
    deadline = time.monotonic() + timeout_s
    with Client(machine.kint_home, autostart=False) as client:
        while not client.ping(0.5):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the test supervisor of {machine.name} did not answer "
                                   f"within {timeout_s:.0f} s; see {machine.root}")
            time.sleep(0.05)
    pid = running_pid(machine.kint_home)
    assert pid is not None
    return pid


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def start_probed_supervisor(env: BenchEnv, machine: Machine, probe_env: dict[str, str],
                            timeout_s: float = 30) -> int:
    """`start_bench_supervisor` through bench/support/run_supervisor_probed.py: the same
    supervisor with bench/support/bench_worker_probe.py preloaded into its workers
    (timers or cProfile, as `probe_env` asks). For diagnostic passes only."""
    return start_bench_supervisor(
        env, machine, timeout_s, launcher=BENCH_SUPPORT / "run_supervisor_probed.py",
        extra_env={**probe_env, "PYTHONPATH": f"{TEST_SUPPORT}:{BENCH_SUPPORT}:{REPO_DIR}"})


def profile_summary(paths: list[Path], top: int = 30) -> dict[str, list[str]]:
    """The top entries of one or more cProfile dumps, by cumulative and by own time."""
    import io
    import pstats

    out: dict[str, list[str]] = {}
    for key in ("cumulative", "tottime"):
        buf = io.StringIO()
        stats = pstats.Stats(*map(str, paths), stream=buf)
        stats.strip_dirs().sort_stats(key).print_stats(top)
        out[f"top_by_{key}"] = [line for line in buf.getvalue().splitlines() if line.strip()]
    return out


def _keep_log(env: BenchEnv, machine: Machine | None = None) -> None:
    from kint.paths import log_path

    path = log_path(machine.kint_home if machine else env.kint_home)
    if not path.exists():
        return
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    name = f"{env.name}.{machine.name}" if machine else env.name
    copy = OUT_DIR / f"{name}.supervisor.log"
    shutil.copyfile(path, copy)
    if machine is None:
        env.supervisor_log_copy = str(copy.relative_to(BENCH_DIR.parent))
    else:
        env.machine_log_copies[machine.name] = str(copy.relative_to(BENCH_DIR.parent))
    tag = f"[{machine.name}] " if machine else ""
    lines = path.read_text(errors="replace").splitlines()
    if machine is not None:
        stderr = machine.root / "supervisor.stderr"
        if stderr.exists():
            lines += [f"stderr: {line}" for line in stderr.read_text(errors="replace")
                      .splitlines()]
    for line in lines:
        if any(word in line for word in (" WARNING ", " ERROR ", " CRITICAL ", "Traceback",
                                         "Error", "Exception")):
            env.supervisor_log_problems.append(tag + line)


def _remove_socket_fallback(kint_home: Path, root: Path) -> None:
    """The sockets live in run/ unless KINT_HOME is long; then in a folder under /tmp."""
    from kint.socket_paths import socket_dir

    folder = socket_dir(kint_home)
    if not str(folder).startswith(str(root)):
        shutil.rmtree(folder, ignore_errors=True)


# -- stores ----------------------------------------------------------------------------------


def make_store(db: Path, tenant: str = TENANT) -> None:
    """A real Sibyl store holding one entity, written through Sibyl's own client."""
    from sibyl_memory_client import MemoryClient
    # NullEntitlementGate is Sibyl's own test support (sibyl_memory_client.testing): an
    # always-fresh gate injected by constructor, so a benchmark needs no Sibyl account.
    from sibyl_memory_client.testing import NullEntitlementGate

    db.parent.mkdir(parents=True, exist_ok=True)
    client = MemoryClient.local(db, tenant_id=tenant, entitlement_gate=NullEntitlementGate())
    try:
        client.set_entity("rules", "r1", {"rule": "never ship on a Friday; every release "
                                                  "needs a green test and a second reviewer"})
    finally:
        client.storage.close()


def make_profile_stores(env: BenchEnv, profiles: list[str], tenant: str = TENANT) -> None:
    """One real Sibyl store per Hermes profile, at $HERMES_HOME/sibyl/profiles/<p>/memory.db.

    Sibyl's free-tier cap (5 MB) is per machine: before each write it sums every store it
    can resolve, every Hermes profile included, and an empty store is ~0.75 MB of schema,
    so the 7th profile store written in place is refused (CapExceededError). Each store is
    therefore written in a staging folder outside $HERMES_HOME, where the walk sees only
    itself, and its folder is renamed into place once all are written. kint only reads.
    """
    staging = env.root / "staging"
    for profile in profiles:
        make_store(staging / profile / "memory.db", tenant)
    target = env.hermes_home / "sibyl" / "profiles"
    target.mkdir(parents=True, exist_ok=True)
    for profile in profiles:
        os.rename(staging / profile, target / profile)


# -- statistics ------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not values:
        raise ValueError("no samples")
    data = sorted(values)
    pos = (len(data) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def timed_process(argv: list[str], env: dict[str, str] | None = None, cwd: str = "/",
                  timeout_s: float = 120.0) -> tuple[float, int, str]:
    """(wall ms, exit code, stdout) of one fresh process, from spawn to the moment it is
    reaped: its pipes read to the end, then one blocking wait.

    Not `subprocess.run(..., timeout=...)`: with a timeout, Python waits for the exit by
    sleeping 0.5, 1, 2, 4 ... 32, then 50 ms between looks, so a process that exits at
    33 ms is seen at 63.5 ms (that was once reported here as a bare interpreter's start).
    The timeout is a timer that kills the child instead."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    killer = threading.Timer(timeout_s, proc.kill)
    killer.start()
    try:
        out, _ = proc.communicate()
    finally:
        killer.cancel()
    return (time.perf_counter() - t0) * 1000.0, proc.returncode, out.decode(errors="replace")


def summarize(values: list[float], unit: str) -> dict[str, Any]:
    return {
        "unit": unit,
        "n": len(values),
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "mean": sum(values) / len(values),
        "min": min(values),
        "max": max(values),
    }


# -- processes and memory --------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name may hold spaces and parentheses; the fields follow the last ')'.
    return raw[raw.rindex(")") + 2:].split()


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting to be reaped."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def parent_pid(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else None


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            ppid = parent_pid(int(entry.name))
            if ppid is not None:
                children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def smaps_rollup(pid: int) -> dict[str, int]:
    """The kB fields of /proc/<pid>/smaps_rollup (Rss, Pss, Private_Dirty, ...)."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB":
            fields[key.strip()] = int(parts[0])
    return fields


def memory_row(pid: int) -> dict[str, Any]:
    """PSS, USS (private clean + dirty) and RSS of one process, in MiB."""
    fields = smaps_rollup(pid)
    return {
        "pid": pid,
        "pss_mib": fields["Pss"] / 1024,
        "uss_mib": (fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)) / 1024,
        "rss_mib": fields["Rss"] / 1024,
    }


# -- output ----------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    import zmq

    cpu = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "pyzmq": zmq.__version__,
        "libzmq": zmq.zmq_version(),
        "loadavg_1_5_15": list(os.getloadavg()),
        "code": code_info(),
    }


def code_info() -> dict[str, Any]:
    """Which kint was measured: where `import kint` resolved in this process, and, when
    that is a git checkout, its commit and whether kint/ had uncommitted changes.

    The supervisor runs `python -m kint.supervisor` with this process's cwd and
    environment, so it imports kint from the cwd first, then PYTHONPATH: run the
    benchmarks from the checkout (as `make bench` does) or from the folder on PYTHONPATH,
    or the two sides measure different code. Both are recorded here."""
    import subprocess

    import kint

    package = Path(kint.__file__).resolve().parent
    info: dict[str, Any] = {"kint_path": str(package), "kint_version": kint.__version__,
                            "cwd": os.getcwd(), "pythonpath": os.environ.get("PYTHONPATH")}
    try:
        head = subprocess.run(["git", "-C", str(package), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode == 0:
            dirty = subprocess.run(["git", "-C", str(package), "status", "--porcelain", "--",
                                    "."], capture_output=True, text=True, timeout=10)
            info["git_head"] = head.stdout.strip()
            info["kint_uncommitted"] = dirty.stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def write_json(name: str, data: dict[str, Any]) -> Path:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    return path


def summary(doc: str) -> str:
    """A script's `--help` description: its docstring's first paragraph on one line (its
    first line alone stopped mid-sentence)."""
    return " ".join(doc.split("\n\n")[0].split())


def bench_main(name: str, doc: str | None, run: Callable[..., dict[str, Any]],
               report: Callable[[dict[str, Any], Path], None],
               add_args: Callable[[Any], None] | None = None) -> int:
    """The command line every bench script shares: `--quick` (plus the script's own
    options, passed to `run` by name), then bench/out/<name>.json and the script's
    summary lines."""
    import argparse

    parser = argparse.ArgumentParser(description=summary(doc or name))
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer samples")
    if add_args is not None:
        add_args(parser)
    result = run(**vars(parser.parse_args()))
    report(result, write_json(name, result))
    return 0


def tree_env(tree: Path, root: Path) -> dict[str, str]:
    """The environment of a machine under `root` running the kint source tree `tree` (its
    own HOME and KINT_HOME, no kint, Sibyl or Hermes setting of this shell's), for the
    benches that set trees side by side."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("KINT_", "SIBYL_", "HERMES_", "PYTHONPATH"))}
    (root / "home").mkdir(parents=True)
    return {**base, "HOME": str(root / "home"), "KINT_HOME": str(root / "kint"),
            "SIBYL_MEMORY_TELEMETRY": "0", "PYTHONPATH": str(tree)}
