"""Bounded JSON-RPC: every call has a timeout, web3's own retries are off, and what is in
flight is visible (DESIGN §4).

web3's default retries make one hung call take 12 s and silently re-send
`eth_sendRawTransaction`; retrying is this module's caller's decision. The tracker records
the call in flight and the last failure, so the heartbeat can show a stuck call and its age,
and verify can skip its head read while this space's endpoint is unresponsive.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

from web3 import Web3
from web3.providers.rpc import HTTPProvider

# An endpoint that failed or hung within this many seconds counts as unresponsive.
UNRESPONSIVE_WINDOW_S = 30.0


class RpcUnavailable(Exception):
    """The endpoint did not answer in time, refused the connection, or answered garbage."""


class RpcTracker:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._inflight: dict[int, tuple[str, float]] = {}
        self.last_failure_at: float | None = None
        self.last_failure: str | None = None
        self.last_ok_at: float | None = None

    def begin(self, method: str) -> int:
        with self._lock:
            token = next(self._ids)
            self._inflight[token] = (method, time.monotonic())
            return token

    def end(self, token: int, ok: bool, error: str | None = None) -> None:
        now = time.monotonic()
        with self._lock:
            self._inflight.pop(token, None)
            if ok:
                self.last_ok_at = now
            else:
                self.last_failure_at = now
                self.last_failure = error

    def forget_failures(self) -> None:
        """The endpoints changed: what the old ones did says nothing about the new."""
        with self._lock:
            self.last_failure_at = None
            self.last_failure = None

    def oldest_call(self) -> tuple[str, float] | None:
        with self._lock:
            if not self._inflight:
                return None
            method, started = min(self._inflight.values(), key=lambda v: v[1])
            return method, time.monotonic() - started

    def unresponsive(self, stuck_after_s: float = 2.0) -> bool:
        """A call stuck past `stuck_after_s`, or a failure in the last 30 s with no success
        since."""
        now = time.monotonic()
        oldest = self.oldest_call()
        if oldest is not None and oldest[1] > stuck_after_s:
            return True
        with self._lock:
            failed = self.last_failure_at
            ok = self.last_ok_at
        return (failed is not None and now - failed < UNRESPONSIVE_WINDOW_S
                and (ok is None or ok < failed))

    def beat(self) -> dict[str, Any] | None:
        """What the heartbeat says about RPC: the call in flight, or down since, or ok."""
        oldest = self.oldest_call()
        if oldest is not None:
            return {"call": oldest[0], "age_s": round(oldest[1], 3)}
        with self._lock:
            failed, ok = self.last_failure_at, self.last_ok_at
        if failed is not None and (ok is None or ok < failed):
            return {"down_since_s": round(time.monotonic() - failed, 3)}
        return {"ok": True} if ok is not None else None


class TrackedHTTPProvider(HTTPProvider):
    def __init__(self, url: str, timeout_s: float, tracker: RpcTracker) -> None:
        super().__init__(url, request_kwargs={"timeout": timeout_s},
                         exception_retry_configuration=None)
        self._tracker = tracker

    def make_request(self, method: Any, params: Any) -> Any:
        token = self._tracker.begin(str(method))
        try:
            response = super().make_request(method, params)
        except Exception as err:  # noqa: BLE001 - recorded, then re-raised as is
            self._tracker.end(token, False, f"{type(err).__name__}")
            raise
        self._tracker.end(token, True)
        return response


def connect(provider: TrackedHTTPProvider) -> Web3:
    """web3 over `provider` (its timeout, no retries, the tracker), without the layers kint
    does not use."""
    w3 = Web3(provider)
    # web3's validation layer asks eth_chainId around every call (three round trips for
    # one head read); kint sets the chain id on every transaction itself. ENS names are
    # never used.
    for name in ("validation", "ens_name_to_address"):
        w3.middleware_onion.remove(name)
    return w3
