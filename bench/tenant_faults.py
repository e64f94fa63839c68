"""The faults of bench_tenants.py's item 3, and the status watch that runs in every phase.

`StatusWatch` polls `sup.status` twice a second from its own thread (and its own Client)
and keeps what it said about the two faulted spaces. It runs the same way in the clean
phases, so the only difference between the phases is the faults.

`Faults.begin` makes them at once: a row written to the hanging space's store, its proxy
switched to `hang` (each call taken, never answered), its `push` sent; SIGSTOP to the
stopped space's worker and one verify sent to it; a second later, `doctor` of the hanging
space. `Faults.finish` waits for the stopped worker's restart, collects every answer,
verifies on the restarted space, lets the endpoint answer again and pushes once more.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

RESTART_WAIT_S = 60.0


def _row_of(status: dict[str, Any], label: str) -> dict[str, Any] | None:
    for row in status["spaces"]:
        if row["label"] == label:
            return row
    return None


class StatusWatch:
    def __init__(self, kint_home: Path, labels: list[str], every_s: float) -> None:
        self.kint_home, self.labels, self.every_s = kint_home, labels, every_s
        self.samples: list[dict[str, Any]] = []
        self.op_ms: list[float] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kint-bench-status-watch",
                                        daemon=True)
        self.t0 = time.monotonic()

    def start(self) -> "StatusWatch":
        self.t0 = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        from kint.client import Client, KintError

        with Client(self.kint_home, autostart=False) as kc:
            while not self._stop.is_set():
                t = time.monotonic()
                try:
                    status = kc.call("sup.status", timeout_s=10)
                except KintError as err:
                    self.errors.append(f"{err.code}: {err.message}")
                else:
                    self.op_ms.append((time.monotonic() - t) * 1000.0)
                    sample: dict[str, Any] = {"t_s": round(t - self.t0, 3),
                                              "degraded": status["degraded"]}
                    for label in self.labels:
                        row = _row_of(status, label)
                        sample[label] = None if row is None else {
                            k: row[k] for k in ("state", "pid", "op", "rpc", "restarts",
                                                "last_exit", "last_beat_age_s", "waiting")}
                    self.samples.append(sample)
                self._stop.wait(max(0.0, self.every_s - (time.monotonic() - t)))


class _Call:
    """One op from its own thread and its own Client; `outcome` once answered."""

    def __init__(self, kint_home: Path, t0: float, op: str, tenant: str, db: str, label: str,
                 args: dict[str, Any], timeout_s: float, delay_s: float = 0.0) -> None:
        self.outcome: dict[str, Any] | None = None

        def run() -> None:
            from kint.client import Client, KintError

            time.sleep(delay_s)
            sent = time.monotonic()
            out: dict[str, Any] = {"op": op, "sent_at_s": round(sent - t0, 3)}
            try:
                with Client(kint_home, autostart=False) as kc:
                    out["result"] = kc.call(op, tenant=tenant, db=db, space=label, args=args,
                                            timeout_s=timeout_s)
                out["ok"] = True
            except KintError as err:
                out.update(ok=False, code=err.code, message=err.message)
            out["answered_at_s"] = round(time.monotonic() - t0, 3)
            out["took_s"] = round(time.monotonic() - sent, 3)
            self.outcome = out

        self._thread = threading.Thread(target=run, name=f"kint-bench-{op}", daemon=True)
        self._thread.start()

    def join(self, timeout_s: float) -> dict[str, Any]:
        self._thread.join(timeout=timeout_s)
        return self.outcome or {"op": "?", "ok": False, "code": "NO_ANSWER",
                                "message": f"no answer within {timeout_s:.0f}s of the wait"}


class Faults:
    def __init__(self, kint_home: Path, tenant: str, hang: Any, stopped: Any, proxy: Any,
                 write_row: Callable[[], None]) -> None:
        self.kint_home, self.tenant = kint_home, tenant
        self.hang, self.stopped, self.proxy = hang, stopped, proxy
        self.write_row = write_row
        self.t0 = 0.0
        self.stopped_pid: int | None = None
        self.calls: dict[str, _Call] = {}

    def _status(self) -> dict[str, Any]:
        from kint.client import Client

        with Client(self.kint_home, autostart=False) as kc:
            return kc.call("sup.status", timeout_s=30)

    def _call(self, op: str, space: Any, args: dict[str, Any], timeout_s: float,
              delay_s: float = 0.0) -> _Call:
        return _Call(self.kint_home, self.t0, op, self.tenant, str(space.db), space.label,
                     args, timeout_s, delay_s)

    def begin(self) -> None:
        self.write_row()
        row = _row_of(self._status(), self.stopped.label)
        if row is None or row["pid"] is None:
            raise RuntimeError(f"{self.stopped.label} has no worker to stop: {row}")
        self.stopped_pid = row["pid"]
        self.t0 = time.monotonic()
        self.proxy.set_mode("hang")
        self.calls["push"] = self._call("push", self.hang, {}, 120)
        os.kill(self.stopped_pid, signal.SIGSTOP)
        self.calls["verify_stopped"] = self._call(
            "verify", self.stopped, {"query": self.stopped.queries[0], "limit": 5,
                                     "write": False}, 60)
        self.calls["doctor_hanging"] = self._call("doctor", self.hang, {}, 120, delay_s=1.0)

    def _wait_restart(self) -> dict[str, Any]:
        deadline = time.monotonic() + RESTART_WAIT_S
        while True:
            row = _row_of(self._status(), self.stopped.label)
            if (row is not None and row["pid"] not in (None, self.stopped_pid)
                    and row["state"] in ("ready", "busy")):
                return {"restarted": True, "seen_at_s": round(time.monotonic() - self.t0, 3),
                        "new_pid": row["pid"], "restarts": row["restarts"],
                        "last_exit": row["last_exit"]}
            if time.monotonic() > deadline:
                return {"restarted": False, "row": row}
            time.sleep(0.2)

    def finish(self, watch: Any) -> dict[str, Any]:
        restart = self._wait_restart()
        outcomes = {name: call.join(150) for name, call in self.calls.items()}
        after = self._call("verify", self.stopped, {"query": self.stopped.queries[0],
                                                    "limit": 5, "write": False}, 60).join(90)
        self.proxy.forward()
        push_again = self._call("push", self.hang, {}, 300).join(330)
        if self.stopped_pid is not None:
            try:  # the old worker should be gone (SIGKILLed by the supervisor)
                os.kill(self.stopped_pid, 0)
                stale = True
            except ProcessLookupError:
                stale = False
        return {"stopped_pid": self.stopped_pid, "old_worker_still_exists": stale,
                "restart": restart, "answers": outcomes,
                "verify_stopped_after_restart": _brief(after),
                "push_hanging_after_endpoint_answers": _brief(push_again),
                "seen_in_status": _seen(watch, self.hang.label, self.stopped.label)}


def _brief(outcome: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in outcome.items() if k != "result"}
    result = outcome.get("result") or {}
    for key in ("decision", "pushed", "head_unavailable", "message"):
        if key in result:
            out[key] = result[key]
    return out


def _seen(watch: Any, hang: str, stopped: str) -> dict[str, Any]:
    """When the status polls first showed each fault, and what they said."""
    first: dict[str, Any] = {}
    for s in watch.samples:
        h, st = s.get(hang), s.get(stopped)
        if h and h["op"] and h["op"]["name"] == "push" and (h["rpc"] or {}).get("call") \
                and "hanging_push_call_in_flight" not in first:
            first["hanging_push_call_in_flight"] = {"t_s": s["t_s"], "row": h}
        if h and (h["rpc"] or {}).get("down_since_s") is not None \
                and "hanging_rpc_down" not in first:
            first["hanging_rpc_down"] = {"t_s": s["t_s"], "row": h}
        if st and st["state"] == "hung" and "stopped_hung" not in first:
            first["stopped_hung"] = {"t_s": s["t_s"], "row": st, "degraded": s["degraded"]}
        if st and st["restarts"] and st["state"] in ("ready", "busy") \
                and "stopped_restarted" not in first:
            first["stopped_restarted"] = {"t_s": s["t_s"], "row": st}
    return first
