"""Bounded JSON-RPC: every call has a timeout, web3's own retries are off, and what is in
flight is visible (a worker's TIMEOUT says what it waits on).

web3's default retries make one hung call take 12 s and silently re-send
`eth_sendRawTransaction`. This module retries instead as v0.3.0 does (10-configuration.md,
`KINT_RPC_TIMEOUT`: a call that fails on a connection error or a timeout is tried twice
more after a short pause), for every method but a send: a send whose request may have
reached the endpoint is never sent a second time behind the caller's back (the push
journal and the nonce book decide what happens to it). An answer, an HTTP status (a 429
included) or an error object is never retried here. The tracker records the call in flight
and each endpoint's last failure, so the heartbeat can show a stuck call, its age and the
endpoint it waits on, and verify can skip its head read while this space's primary
endpoint is unresponsive.

A connection that was never made (refused, an unknown host, a connect timeout) is marked
on the exception (`NEVER_CONNECTED`): nothing of that request left this machine, which a
failed send's message tells apart from a send that may still land (calls.bounded).
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from typing import Any

import requests
from urllib3.exceptions import NewConnectionError
from web3 import Web3
from web3.providers.rpc import HTTPProvider

from kint.settings.urls import scrub_url_secrets, url_secrets

# An endpoint that failed or hung within this many seconds counts as unresponsive.
UNRESPONSIVE_WINDOW_S = 30.0
# The tracker's name for a call the endpoint refused with HTTP 429 (its rate limit).
RATE_LIMITED = "HTTP 429"
# The pauses before the second and third try of a call that could not connect or timed out
# (v0.3.0 retries twice "with a short backoff", 10-configuration.md; the pauses are ours).
RETRY_PAUSES_S = (0.25, 0.5)
# The methods never tried again: their request may have reached the endpoint.
NOT_RETRIED = frozenset({"eth_sendRawTransaction", "eth_sendTransaction"})
# The attribute set (True) on a transport exception whose connection was never made.
NEVER_CONNECTED = "kint_never_connected"
# How the heartbeat names a space's endpoints, by their place in its list (rpc_urls).
ENDPOINT_ROLES = ("primary", "second")


class RpcUnavailable(Exception):
    """The endpoint did not answer in time, refused the connection, or answered garbage."""


class RpcNotReached(RpcUnavailable):
    """The connection to the endpoint was never made: the request did not leave this
    machine (a send that failed so was not sent)."""


class ReceiptTimedOut(RpcUnavailable):
    """A receipt wait that ran out (anchor_writes `wait`): the endpoint answered each look,
    and the transaction had no confirmed receipt by the deadline. Told apart from an
    endpoint that failed by a caller that knows why the transaction waits (former_key.py,
    behind a nonce held at another endpoint), whose hint is then not the endpoint's."""


class WaitCut(ReceiptTimedOut):
    """A receipt wait its caller's own bound ended before the wait's deadline (anchor_writes
    `wait`'s `until`: the exit push's bound, push._push_epochs). The transaction was sent and
    may still land: a caller that does not catch it says so as for any wait that ran out."""


class RpcErrorAnswer(RpcUnavailable):
    """The endpoint answered, and the answer was a refusal: an error object or an HTTP
    status (a 429 rate limit). The provider never asks again after an answer, so a caller
    that can ride one out (a pull's walk) repeats this, and only this: a connection error
    or a timeout was already tried three times here."""


@dataclass
class _EndpointRecord:
    """One endpoint's last success and last failure (monotonic times)."""

    last_ok_at: float | None = None
    last_failure_at: float | None = None
    last_failure: str | None = None
    # The bound the last failure ran out of, when it was a timeout of a read its caller
    # bounds (one try; None: any other failure): a read that waits longer is not skipped
    # for it (`unavailable`).
    last_failure_bound_s: float | None = None

    def bound_against(self, bound_s: float) -> int:
        """How the last failure's bound stands to `bound_s`: -1 shorter, 0 the same, 1
        longer; a failure of no bound (None: three KINT_RPC_TIMEOUT tries, a refusal) is
        longer than any. The one comparison `end` and `unavailable` each weigh, from either
        side: a failure of a shorter bound than the standing one's says less and leaves it
        standing (1), and a standing failure of a shorter bound than a read's says nothing
        of that read (-1). A tie is neither: the same bound's failure again is recorded, and
        a read of the bound that ran out is skipped."""
        mine = self.last_failure_bound_s
        if mine is None or mine > bound_s:
            return 1
        return -1 if mine < bound_s else 0


def _standing(record: _EndpointRecord, now: float) -> bool:
    """Whether `record`'s last failure still counts: inside the window, no success since."""
    failed, ok = record.last_failure_at, record.last_ok_at
    return (failed is not None and now - failed < UNRESPONSIVE_WINDOW_S
            and (ok is None or ok < failed))


# The most endpoints a tracker keeps records of beyond the space's own: `connect
# --rpc-urls` run again and again with other endpoints added one record each, for good.
# The least recently used of the others goes first; the space's own are never dropped.
MAX_OTHER_RECORDS = 8
# A call stuck past this many seconds makes its endpoint unresponsive.
STUCK_AFTER_S = 2.0


class RpcTracker:
    """A space's RPC calls in flight and each endpoint's last success and failure, kept
    apart by endpoint (its URL, which never leaves this object). A space reads its head
    from its primary endpoint, asks a second one on a cold start, and `connect
    --rpc-urls` tries endpoints that are not yet the space's: a failure of one of those
    once counted as the space's own endpoint being down, so verify skipped its head read
    and status said "down" for 30 s while the primary answered. Whether an endpoint is
    unresponsive is read for that endpoint alone; the call the heartbeat names is the
    oldest in flight on any of them, with which endpoint it waits on. The records are
    bounded: those of endpoints the space no longer uses go when its settings change, and
    at most MAX_OTHER_RECORDS of endpoints not the space's are kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._inflight: dict[int, tuple[str, str, float]] = {}  # endpoint, method, start
        # By last use, the most recent last (a record used again moves to the end).
        self._records: dict[str, _EndpointRecord] = {}
        self._own: tuple[str, ...] = ()

    def begin(self, method: str, endpoint: str) -> int:
        with self._lock:
            token = next(self._ids)
            self._inflight[token] = (endpoint, method, time.monotonic())
            return token

    def end(self, token: int, ok: bool, error: str | None = None,
            bound_s: float | None = None) -> None:
        """The call `token` ended; a failure's `bound_s` is the timeout it ran out of."""
        now = time.monotonic()
        with self._lock:
            endpoint = self._inflight.pop(token, ("", "", now))[0]
            record = self._records.pop(endpoint, None) or _EndpointRecord()
            self._records[endpoint] = record
            if ok:
                record.last_ok_at = now
            elif not (_standing(record, now) and bound_s is not None
                      and record.bound_against(bound_s) > 0):
                record.last_failure_at = now
                record.last_failure = error
                record.last_failure_bound_s = bound_s
            # Otherwise a shorter read's timeout says less than the failure that stands,
            # which is left as it is, its time too: `kint doctor`'s one try after three
            # KINT_RPC_TIMEOUT tries ran out made the record say its short bound, and verify
            # waited its whole 2 s budget on the hung endpoint; and taking the later time
            # kept the wider failure standing past its 30 s.
            others = [url for url in self._records if url not in self._own]
            for url in others[:max(0, len(others) - MAX_OTHER_RECORDS)]:
                del self._records[url]

    def use(self, endpoints: tuple[str, ...], changed: bool) -> None:
        """The space's endpoints are now `endpoints`, kept whatever else is tried. When
        they `changed` from others, what the old ones did says nothing about the new:
        every failure is forgotten and the records of endpoints no longer the space's
        are dropped."""
        with self._lock:
            self._own = endpoints
            if not changed:
                return
            self._records = {url: record for url, record in self._records.items()
                             if url in endpoints}
            for record in self._records.values():
                record.last_failure_at = None
                record.last_failure = None
                record.last_failure_bound_s = None

    def _seen(self, endpoint: str) -> tuple[float | None, _EndpointRecord]:
        """The age of the oldest call in flight to `endpoint` (None: none) and a copy of
        its record, read under one hold of the lock (verify's head read asks for both)."""
        now = time.monotonic()
        with self._lock:
            starts = [call[2] for call in self._inflight.values() if call[0] == endpoint]
            found = self._records.get(endpoint)
            record = _EndpointRecord(**vars(found)) if found is not None else _EndpointRecord()
        return (now - min(starts) if starts else None), record

    def last_failure_at(self, endpoint: str) -> float | None:
        return self._seen(endpoint)[1].last_failure_at

    def _oldest(self) -> tuple[str, str, float] | None:
        """The endpoint, method and age of the oldest call in flight to any endpoint."""
        with self._lock:
            calls = list(self._inflight.values())
        if not calls:
            return None
        where, method, started = min(calls, key=lambda call: call[2])
        return where, method, time.monotonic() - started

    def unavailable(self, endpoint: str, stuck_after_s: float = STUCK_AFTER_S,
                    bound_s: float | None = None) -> str | None:
        """Why `endpoint` counts as unresponsive now, in unavailable_words' terms, or None
        when it does not: a call to it stuck past `stuck_after_s`, or a failure of it in the
        last 30 s with no success since. Verify asks before each head read, so this reads
        the tracker once. A read that may wait `bound_s` does not count a caller-bounded
        read's timeout of a shorter bound: `kint status` with KINT_VERIFY_HEAD_SECONDS=0.5
        read the session key's balance from an endpoint that takes a second, and every
        verify of the next 30 s, whose head read waits 2 s, skipped an endpoint that would
        have answered. A KINT_RPC_TIMEOUT call that ran out three times counts for all,
        a shorter read's timeout since or not (`end`)."""
        age, record = self._seen(endpoint)
        stuck = age is not None and age > stuck_after_s
        shorter = bound_s is not None and record.bound_against(bound_s) < 0
        if stuck or (_standing(record, time.monotonic()) and not shorter):
            return _words(age, record)
        return None

    def unresponsive(self, endpoint: str, stuck_after_s: float = STUCK_AFTER_S) -> bool:
        return self.unavailable(endpoint, stuck_after_s) is not None

    def unavailable_words(self, endpoint: str) -> str:
        """Why `endpoint` counts as unavailable, for verify's and status's head line (see
        _words)."""
        return _words(*self._seen(endpoint))

    def beat(self, endpoints: tuple[str, ...] | None) -> dict[str, Any] | None:
        """What the heartbeat says about RPC: the oldest call in flight (on any endpoint:
        `endpoint` names which of the space's `endpoints`, "other" for one that is not
        among them), else whether the primary (`endpoints[0]`) is down since a failure,
        or ok."""
        endpoints = endpoints or ()
        oldest = self._oldest()
        if oldest is not None:
            where, method, age = oldest
            place = endpoints.index(where) if where in endpoints else len(ENDPOINT_ROLES)
            return {"call": method, "age_s": round(age, 3),
                    "endpoint": (ENDPOINT_ROLES[place] if place < len(ENDPOINT_ROLES)
                                 else "other")}
        if not endpoints:
            return None
        record = self._seen(endpoints[0])[1]
        failed, ok = record.last_failure_at, record.last_ok_at
        if failed is not None and (ok is None or ok < failed):
            return {"down_since_s": round(time.monotonic() - failed, 3)}
        return {"ok": True} if ok is not None else None


class TrackedHTTPProvider(HTTPProvider):
    """web3's HTTP provider with a timeout, v0.3.0's retries in place of web3's (the module's
    docstring), the tracker, and the endpoint's
    keyed URL parts kept out of what it raises and of the error objects it returns:
    requests names the URL in its exceptions, web3 quotes an answer that does not decode,
    and an endpoint may echo its URL in an error. Every chain call passes through here, so
    no message, log line or traceback made from them can show an API key."""

    def __init__(self, url: str, timeout_s: float, tracker: RpcTracker) -> None:
        super().__init__(url, request_kwargs={"timeout": timeout_s},
                         exception_retry_configuration=None)
        self._tracker = tracker
        self._timeout_s = timeout_s
        self._url = url  # the tracker's key for this endpoint; never shown
        self._secrets = url_secrets(url)
        # The pauses before each further try; () for a read whose caller bounds its whole
        # wait (verify's head budget), where three tries would triple that budget.
        self.retry_pauses: tuple[float, ...] = RETRY_PAUSES_S

    def make_request(self, method: Any, params: Any) -> Any:
        token = self._tracker.begin(str(method), self._url)
        pauses = () if str(method) in NOT_RETRIED else self.retry_pauses
        try:
            for pause in pauses:
                try:
                    response = super().make_request(method, params)
                    break
                except (requests.exceptions.ConnectionError, requests.exceptions.Timeout):
                    time.sleep(pause)
            else:
                response = super().make_request(method, params)
        except Exception as err:  # noqa: BLE001 - recorded, then re-raised, scrubbed
            if never_connected(err):
                setattr(err, NEVER_CONNECTED, True)
            status = getattr(getattr(err, "response", None), "status_code", None)
            # A read its caller bounds (one try: a head budget) that ran out says only that
            # the endpoint is slower than that bound; three tries of KINT_RPC_TIMEOUT say
            # it does not answer, for any bound (RpcTracker.unavailable).
            bounded = not self.retry_pauses and isinstance(err, requests.exceptions.Timeout)
            self._tracker.end(token, False,
                              RATE_LIMITED if status == 429 else type(err).__name__,
                              self._timeout_s if bounded else None)
            if self._secrets:
                _scrub_exception(err, self._secrets)
            raise
        self._tracker.end(token, True)
        if self._secrets and isinstance(response, dict) and "result" not in response:
            # An error object, or an answer web3 will quote whole as malformed; a result
            # is the chain's data and is never touched.
            response = _scrubbed(response, self._secrets)
        return response


def never_connected(err: BaseException) -> bool:
    """Whether `err` is a connection that was never made, so no byte of the request reached
    the endpoint: refused, a host that does not resolve, or a connect timeout. A read
    timeout or a connection dropped after the request went out is not one."""
    if isinstance(err, requests.exceptions.ConnectTimeout):
        return True
    if isinstance(err, requests.exceptions.ConnectionError) and err.args:
        return isinstance(getattr(err.args[0], "reason", None), NewConnectionError)
    return False


def _scrubbed(value: Any, secrets: list[str]) -> Any:
    """`value` (an answer without a result: strings in dicts and lists) without
    `secrets`."""
    if isinstance(value, str):
        return scrub_url_secrets(value, secrets)
    if isinstance(value, dict):
        return {k: _scrubbed(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v, secrets) for v in value]
    return value


def _scrub_exception(err: BaseException, secrets: list[str]) -> None:
    """`err` and the exceptions chained to it say what they said, less `secrets`: their
    args (whose text is what str() and a traceback show) and their string attributes
    (web3's `message`)."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(_scrubbed_arg(arg, secrets) for arg in current.args)
        for name, value in list(vars(current).items()):
            if isinstance(value, str):
                setattr(current, name, scrub_url_secrets(value, secrets))
        current = current.__cause__ or current.__context__


def _scrubbed_arg(arg: Any, secrets: list[str]) -> Any:
    if isinstance(arg, str):
        return scrub_url_secrets(arg, secrets)
    text = str(arg)  # an object (urllib3's MaxRetryError in requests' ConnectionError)
    return scrub_url_secrets(text, secrets) if any(s in text for s in secrets) else arg


def connect(provider: TrackedHTTPProvider) -> Web3:
    """web3 over `provider` (its timeout, its retries, the tracker), without the layers kint
    does not use."""
    w3 = Web3(provider)
    # web3's validation layer asks eth_chainId around every call (three round trips for
    # one head read); kint sets the chain id on every transaction itself. ENS names are
    # never used.
    for name in ("validation", "ens_name_to_address"):
        w3.middleware_onion.remove(name)
    return w3


def _words(age: float | None, record: _EndpointRecord) -> str:
    """A call stuck now, or a last failure that was not a rate limit, is "rpc
    unresponsive"; a rate limit is said as one, since the endpoint did answer and the fix
    is the user's quota or another endpoint, not the network."""
    if (age is None or age <= STUCK_AFTER_S) and record.last_failure == RATE_LIMITED:
        return "rpc rate limited (HTTP 429 Too Many Requests)"
    return "rpc unresponsive"
