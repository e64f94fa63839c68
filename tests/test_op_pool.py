"""The worker's op pool (kint.tenant_worker.op_pool): the thread that went idle last runs
the next op, so a space served one call at a time keeps one thread (one read-only store
connection, one warm stack), and more start only while ops really overlap."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from kint.tenant_worker.op_pool import OpPool


def _wait(event: threading.Event) -> None:
    assert event.wait(30), "the pool did not run the op"


def test_calls_one_at_a_time_run_on_one_thread():
    """As a client does: the next request is sent the moment the last answer arrives (the
    answer is sent from `then`). ThreadPoolExecutor started a thread for most of them."""
    pool = OpPool(4, "t")
    ran_on: list[str] = []

    def answer(_result: object, answered: threading.Event) -> None:
        answered.set()
        # The real answer leaves through ZeroMQ and the next request comes back while
        # this thread is off the core: let the submitter run first, as it does there.
        time.sleep(0.002)

    try:
        for _ in range(100):
            answered = threading.Event()
            pool.submit(lambda: ran_on.append(threading.current_thread().name),
                        then=lambda result, e=answered: answer(result, e))
            _wait(answered)
        assert pool.threads == 1
        assert set(ran_on) == {"t_0"}
    finally:
        pool.shutdown()


def test_overlapping_ops_get_their_own_threads_up_to_the_size_then_wait_in_order():
    pool = OpPool(2, "t")
    release = threading.Event()
    started = [threading.Event() for _ in range(2)]
    order: list[int] = []
    done = threading.Event()
    try:
        for i in range(2):
            pool.submit(lambda i=i: (started[i].set(), release.wait(30)))
        for event in started:
            _wait(event)
        assert pool.threads == 2
        for i in range(5):  # every thread busy: these wait, first come first run
            pool.submit(order.append, i, then=(lambda _r: done.set()) if i == 4 else None)
        # Time let pass on purpose: a pool that started a third thread or ran a queued op
        # would do it at once, and nothing must happen here.
        time.sleep(0.2)
        assert order == [] and pool.threads == 2
        release.set()
        _wait(done)
        assert order == [0, 1, 2, 3, 4]
    finally:
        release.set()
        pool.shutdown()


def test_the_answer_goes_out_with_the_ops_result_on_the_same_thread():
    pool = OpPool(1, "t")
    got: list[tuple[int, str]] = []
    done = threading.Event()
    try:
        pool.submit(lambda x: x * 2, 21,
                    then=lambda r: (got.append((r, threading.current_thread().name)),
                                    done.set()))
        _wait(done)
        assert got == [(42, "t_0")]
    finally:
        pool.shutdown()


def test_an_op_that_raises_is_logged_and_the_thread_goes_on(caplog):
    pool = OpPool(1, "t")
    answered: list[object] = []
    done = threading.Event()
    try:
        with caplog.at_level(logging.ERROR, logger="kint.worker"):
            pool.submit(lambda: 1 / 0, then=answered.append)
            pool.submit(lambda: "next", then=lambda r: (answered.append(r), done.set()))
            _wait(done)
        assert answered == ["next"]  # no answer from the failed op's `then`
        assert "an op escaped its handler" in caplog.text
        assert "ZeroDivisionError" in caplog.text
        assert pool.threads == 1
    finally:
        pool.shutdown()


def test_shutdown_ends_idle_threads_and_refuses_new_ops():
    pool = OpPool(3, "t")
    done = threading.Event()
    pool.submit(lambda: None, then=lambda _r: done.set())
    _wait(done)
    before = {t.name for t in threading.enumerate()}
    assert "t_0" in before
    pool.shutdown()
    deadline = time.monotonic() + 30
    while any(t.name == "t_0" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the idle thread did not end"
        time.sleep(0.01)
    with pytest.raises(RuntimeError):
        pool.submit(lambda: None)


def test_a_pool_needs_a_thread():
    with pytest.raises(ValueError):
        OpPool(0, "t")
