"""The multipart send and receive of the supervisor and the workers (kint/zmq_frames.py), on real
ZeroMQ sockets: whole messages in order, a refused send that queues nothing, and
`readable` true exactly while a message waits."""

from __future__ import annotations

import pytest
import zmq

from kint.zmq_frames import readable, recv_frames, send_frames


@pytest.fixture
def pair():
    ctx = zmq.Context()
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    router.setsockopt(zmq.ROUTER_MANDATORY, 1)
    router.setsockopt(zmq.SNDHWM, 1)
    router.bind("inproc://frames")
    dealer.setsockopt(zmq.ROUTING_ID, b"peer")
    dealer.setsockopt(zmq.RCVHWM, 1)
    dealer.connect("inproc://frames")
    dealer.send(b"hello")
    assert router.poll(5000)
    yield router, dealer
    router.close(linger=0)
    dealer.close(linger=0)
    ctx.term()


def test_whole_messages_cross_in_order_and_readable_says_when_one_waits(pair):
    router, dealer = pair
    assert [f.bytes for f in recv_frames(router)] == [b"peer", b"hello"]
    assert not readable(router)
    with pytest.raises(zmq.Again):
        recv_frames(router)
    dealer.send_multipart([b"h", b"", b"body" * 100])
    dealer.send_multipart([b"second"])
    assert router.poll(5000)
    assert [f.bytes for f in recv_frames(router)] == [b"peer", b"h", b"", b"body" * 100]
    assert readable(router)
    assert [f.bytes for f in recv_frames(router)] == [b"peer", b"second"]
    assert not readable(router)


def test_a_send_that_cannot_go_raises_at_its_first_frame_and_queues_nothing(pair):
    router, dealer = pair
    recv_frames(router)
    with pytest.raises(zmq.ZMQError) as gone:
        send_frames(router, (b"nobody", b"h", b"body"))
    assert gone.value.errno == zmq.EHOSTUNREACH
    sent = 0
    with pytest.raises(zmq.Again):  # the peer reads nothing: its pipe fills
        for sent in range(1, 100):
            send_frames(router, (b"peer", b"h%d" % sent, b"body"))
    got = []
    while len(got) < sent - 1:
        assert dealer.poll(5000)
        got.append(dealer.recv_multipart())
    assert got == [[b"h%d" % i, b"body"] for i in range(1, sent)]
    assert not dealer.poll(100)  # the refused message left no frame behind



def test_a_blocking_send_waits_for_room_and_then_goes_whole():
    """A worker's replies are sent with block=True: where a plain send raises Again, the
    blocking one waits until the peer reads, and its message then arrives whole."""
    import threading

    ctx = zmq.Context()
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    push.setsockopt(zmq.SNDHWM, 1)
    pull.setsockopt(zmq.RCVHWM, 1)
    pull.bind("inproc://blocking")
    push.connect("inproc://blocking")
    try:
        filled = 0
        with pytest.raises(zmq.Again):
            for filled in range(1, 100):
                send_frames(push, (b"m%d" % filled, b"body"))
        done = threading.Event()

        def blocked() -> None:
            send_frames(push, (b"late", b"body"), block=True)
            done.set()

        sender = threading.Thread(target=blocked, daemon=True)
        sender.start()
        assert not done.wait(0.3)  # no room yet: it waits, it does not raise or drop
        got = []
        while not got or got[-1][0] != b"late":
            assert pull.poll(5000)
            got.append([f.bytes for f in recv_frames(pull)])
        assert done.wait(5)
        assert got == [[b"m%d" % i, b"body"] for i in range(1, filled)] + [[b"late", b"body"]]
    finally:
        push.close(linger=0)
        pull.close(linger=0)
        ctx.term()


def test_the_supervisor_reads_one_message_a_turn_from_a_quiet_socket_all_from_a_busy_one(pair):
    """`Supervisor._drain`: a socket not ready at the last turn gives one message (the
    next poll finds the rest); a busy one is read until nothing waits."""
    from kint.supervisor.daemon import Supervisor

    router, dealer = pair
    recv_frames(router)
    for n in range(4):
        dealer.send(b"m%d" % n)
    assert router.poll(5000)
    seen: list[bytes] = []
    Supervisor._drain(router, lambda frames: seen.append(frames[1].bytes), False)
    assert seen == [b"m0"] and router.poll(0)
    Supervisor._drain(router, lambda frames: seen.append(frames[1].bytes), True)
    assert seen == [b"m0", b"m1", b"m2", b"m3"] and not readable(router)
