"""The supervisor's own ops, one function each. A function returns the reply to send now,
or None when the reply comes later (a stop answers once every worker is down)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from kint import __version__
from kint.protocol import ErrorCode, ProtocolError, Request
from kint.protocol.envelope import Reply, ok_reply
from kint.supervisor.status import label_order, supervisor_status

if TYPE_CHECKING:
    from kint.supervisor.daemon import Supervisor

Command = Callable[["Supervisor", bytes, Request], "Reply | None"]


def ping(sup: "Supervisor", identity: bytes, req: Request) -> Reply:
    """Answer that the supervisor is up: its pid, version and uptime (`kint supervisor
    start` prints the pid; a client's liveness check needs only the answer). A caller
    that sends its settings is told which of them this supervisor does not run with
    (`differs`, names only): `kint supervisor start` beside it names those it did not
    apply."""
    import os

    result = {"pid": os.getpid(), "version": __version__,
              "uptime_s": round(time.monotonic() - sup.started_at, 3), **_run_of(sup)}
    sent = req.args.get("settings")
    if sent is not None:
        from kint.settings.wire import differing

        result["differs"] = differing(sent)
    return ok_reply(req.id, result)


def _run_of(sup: "Supervisor") -> dict[str, float]:
    """When this supervisor took its home, as its closed-door note says it (unix time,
    and on front_closed.boot_time): with its pid, what names it among every supervisor
    with that pid (in a container the next one often has the same). A stop sends them
    back (`stop`)."""
    return {"started": sup.door.started, "started_boot": sup.door.started_boot}


def status(sup: "Supervisor", identity: bytes, req: Request) -> Reply:
    """`kint supervisor status`: one row per space, from what the supervisor holds (the
    workers' last beats), so it answers even while a worker hangs. A caller that sends the
    proof of its KINT_SESSION_PASSPHRASE is told whether it is the supervisor's."""
    proof = req.args.get("passphrase")
    if proof is not None:
        from kint.settings.secret_proof import is_proof

        if not is_proof(proof):
            raise ProtocolError(ErrorCode.BAD_REQUEST, "sup.status: argument 'passphrase' "
                                "must be a proof (set:NONCE:MAC), never the passphrase")
    return ok_reply(req.id, supervisor_status(sup, proof))


def spaces(sup: "Supervisor", identity: bytes, req: Request) -> Reply:
    """The spaces the supervisor knows, each with its store and its worker's state."""
    return ok_reply(req.id, {"spaces": [
        {"space": h.space16, "space_id": h.space_id, "label": h.label, "tenant": h.tenant,
         "store": h.db, "state": h.state}
        for h in sorted(sup.handles.values(), key=lambda h: label_order(h.label))]})


def stop(sup: "Supervisor", identity: bytes, req: Request) -> None:
    """`kint supervisor stop`: stop every worker cleanly, then the supervisor; answered once
    every worker is down. A commanded stop ends the agent sessions (no succession).

    The stop names the supervisor it is meant for (`pid`, and `started` and `started_boot`
    as its ping gave them): one queued on a socket while no supervisor served it (the last
    one's door closed for its own stop) is delivered to the next one to bind there, which
    would stop a supervisor nobody asked to stop; in a container that one often has the
    same pid. Refused then, that one keeps serving. A stop without them (an older
    client's, or one asking an older supervisor) stops this one."""
    import os

    meant_for = req.args.get("pid")
    own = _run_of(sup)
    if meant_for is not None and meant_for != os.getpid():
        raise ProtocolError(ErrorCode.BAD_REQUEST,
                            f"sup.stop was meant for the supervisor pid {meant_for}; this "
                            f"one (pid {os.getpid()}) keeps running", _STOP_HINT)
    if any(req.args.get(name) not in (None, value) for name, value in own.items()):
        raise ProtocolError(ErrorCode.BAD_REQUEST,
                            f"sup.stop was meant for the supervisor pid {os.getpid()} that "
                            f"started {_clock(req.args.get('started'))}; this one, started "
                            f"{_clock(own['started'])} with the same pid, keeps running",
                            _STOP_HINT)
    sup.add_stop_waiter(identity, req.id)
    # A stop ends the sessions, an upgrade's drain under way too: the next start takes
    # nothing of this one's (kint/supervisor/succession.py).
    sup.stop_commanded = True
    if not sup.shutting_down:
        sup.begin_shutdown()
    return None


_STOP_HINT = "`kint supervisor stop` stops the one running now"


def _clock(unix: object) -> str:
    """A supervisor's start as a refusal says it: the local time, to the millisecond."""
    if not isinstance(unix, (int, float)):
        return "at an unknown time"
    return time.strftime("%H:%M:%S", time.localtime(unix)) + f".{int(unix * 1000) % 1000:03d}"


def reload(sup: "Supervisor", identity: bytes, req: Request) -> Reply:
    """`kint supervisor reload`: read the config file now; the answer says whether it was
    taken, naming the file and the key it refuses (the last good configuration then keeps
    serving)."""
    error = sup.check_config(force=True)
    if error is not None:
        raise ProtocolError(ErrorCode.CONFIG_INVALID,
                            f"{error}; the last good configuration keeps serving")
    from kint import settings as kint_settings

    cfg, _ = kint_settings.watch(sup.home).current()
    return ok_reply(req.id, {"config_file": str(cfg.path), "exists": cfg.exists,
                             "machine": sorted(cfg.machine), "spaces": sorted(cfg.spaces)})


def restart(sup: "Supervisor", identity: bytes, req: Request) -> Reply:
    """`kint supervisor restart TARGET`: restart the workers matching TARGET, a space id (16
    or 64 hex), a label or a tenant. A quarantined space is released and tried at once;
    this is not counted as a crash. A live worker hands its agent sessions to the new one,
    as on a recycle."""
    target = req.args["target"]
    matches = [h for h in sup.handles.values()
               if target in (h.space16, h.space_id, h.label, h.tenant)]
    if not matches:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"no space matches {target!r}",
                            "`kint supervisor status` lists the spaces")
    if sup.shutting_down:
        raise ProtocolError(ErrorCode.WORKER_DOWN, "the supervisor is stopping")
    now = time.monotonic()
    for handle in matches:
        handle.crash_times.clear()
        handle.backoff_s = None
        handle.quarantined_until = None
        if handle.alive:
            sup.stop_worker(handle, "restart", now)
        else:
            sup.spawn(handle)
    return ok_reply(req.id, {"restarted": sorted(h.space16 for h in matches)})


COMMANDS: dict[str, Command] = {
    "sup.ping": ping,
    "sup.status": status,
    "sup.spaces": spaces,
    "sup.stop": stop,
    "sup.reload": reload,
    "sup.restart": restart,
}
