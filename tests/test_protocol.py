"""The decoder is the one gate every inbound message passes: it returns a valid request
or raises the protocol's own error with the code to answer, for any bytes at all."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kint.protocol import ErrorCode, ProtocolError
from kint.protocol import worker_wire
from kint.protocol.client_codec import decode_reply, encode_request
from kint.protocol.envelope import Request, error_reply, ok_reply
from kint.protocol.limits import MAX_MESSAGE_BYTES, MAX_TIMEOUT_MS
from kint.protocol.server_codec import decode_request, encode_reply

GOOD = {"v": 1, "id": "r1", "op": "status", "tenant": "t", "db": "/tmp/m.db",
        "space": None, "args": {}, "timeout_ms": 5000}


def code_of(obj_or_bytes) -> ErrorCode:
    data = obj_or_bytes if isinstance(obj_or_bytes, bytes) else orjson.dumps(obj_or_bytes)
    with pytest.raises(ProtocolError) as err:
        decode_request(data)
    return err.value.code


def test_a_good_request_decodes_with_every_field():
    req = decode_request(orjson.dumps(GOOD))
    assert (req.id, req.op, req.tenant, req.db, req.space, req.args, req.timeout_ms) == (
        "r1", "status", "t", "/tmp/m.db", None, {}, 5000)


def test_timeout_is_capped_by_the_op():
    req = decode_request(orjson.dumps({**GOOD, "op": "sup.ping", "timeout_ms": MAX_TIMEOUT_MS}))
    assert req.timeout_ms == 10_000


@pytest.mark.parametrize("mutation, code", [
    ({"v": 2}, ErrorCode.UNSUPPORTED_VERSION),
    ({"v": "1"}, ErrorCode.BAD_REQUEST),
    ({"v": True}, ErrorCode.BAD_REQUEST),
    ({"id": ""}, ErrorCode.BAD_REQUEST),
    ({"id": "x" * 65}, ErrorCode.BAD_REQUEST),
    ({"op": "nope"}, ErrorCode.UNKNOWN_OP),
    ({"op": "worker.stop"}, ErrorCode.UNKNOWN_OP),
    ({"op": 3}, ErrorCode.BAD_REQUEST),
    ({"tenant": 3}, ErrorCode.BAD_REQUEST),
    ({"tenant": None}, ErrorCode.BAD_REQUEST),
    ({"tenant": "t" * 201}, ErrorCode.BAD_REQUEST),
    ({"db": "relative/path"}, ErrorCode.BAD_REQUEST),
    ({"db": "/a\x00b"}, ErrorCode.BAD_REQUEST),
    ({"db": None}, ErrorCode.BAD_REQUEST),
    ({"args": []}, ErrorCode.BAD_REQUEST),
    ({"args": {"unexpected": 1}}, ErrorCode.BAD_REQUEST),
    ({"timeout_ms": 0}, ErrorCode.BAD_REQUEST),
    ({"timeout_ms": 1.5}, ErrorCode.BAD_REQUEST),
    ({"timeout_ms": MAX_TIMEOUT_MS + 1}, ErrorCode.BAD_REQUEST),
    ({"cast": "yes"}, ErrorCode.BAD_REQUEST),
    ({"extra": 1}, ErrorCode.BAD_REQUEST),
])
def test_each_bad_field_gets_its_code(mutation, code):
    assert code_of({**GOOD, **mutation}) == code


def test_fields_are_refused_in_order_the_first_bad_one_named():
    """tenant, db (then that db is absolute), space: a request wrong in two places is
    refused for the first, whichever way the common case is checked."""
    def message(mutation: dict) -> str:
        with pytest.raises(ProtocolError) as err:
            decode_request(orjson.dumps({**GOOD, **mutation}))
        return err.value.message

    assert message({"db": "relative", "space": 3}) == "'db' must be an absolute path"
    assert message({"tenant": "", "db": "relative"}).startswith("'tenant' must be")
    assert message({"space": "a\x00b"}) == "'space' contains a NUL character"


def test_op_arguments_are_typed():
    base = {"v": 1, "id": "a", "op": "sup.restart"}
    assert code_of({**base, "args": {}}) == ErrorCode.BAD_REQUEST
    assert code_of({**base, "args": {"target": 5}}) == ErrorCode.BAD_REQUEST
    assert decode_request(orjson.dumps({**base, "args": {"target": "abc"}})).args == {
        "target": "abc"}


def test_size_json_and_shape():
    assert code_of(b"x" * (MAX_MESSAGE_BYTES + 1)) == ErrorCode.TOO_LARGE
    assert code_of(b"{") == ErrorCode.BAD_REQUEST
    assert code_of(b"\xff\xfe") == ErrorCode.BAD_REQUEST
    assert code_of(b"[]") == ErrorCode.BAD_REQUEST
    assert code_of(b"null") == ErrorCode.BAD_REQUEST


def test_an_error_keeps_the_request_id_when_it_could_be_read():
    with pytest.raises(ProtocolError) as err:
        decode_request(orjson.dumps({**GOOD, "op": "nope"}))
    assert err.value.request_id == "r1"
    assert err.value.hint


def test_replies_round_trip():
    ok = decode_reply(encode_reply(ok_reply("a", {"n": 1})))
    assert ok.ok and ok.result == {"n": 1} and ok.id == "a"
    bad = decode_reply(encode_reply(error_reply("b", ErrorCode.BUSY, "busy")))
    assert not bad.ok and bad.error == "BUSY" and bad.hint
    with pytest.raises(ProtocolError) as err:
        decode_reply(b'{"ok": false, "error": "MADE_UP"}')
    assert err.value.code == ErrorCode.INTERNAL


def test_a_request_the_client_encodes_passes_the_gate_as_it_was_built():
    """The client writes with the standard library, the gate reads with orjson: the same
    request on both sides, non-ASCII text and nested arguments included."""
    request = Request(id="c1", op="verify", tenant="ténant", db="/tmp/m.db",
                      space="ténant@hermes:x", timeout_ms=5000,
                      args={"query": "où est le café \u2603", "limit": 5, "write": False})
    assert decode_request(encode_request(request)) == request
    assert encode_request(request) == orjson.dumps(request.to_dict())  # the same bytes
    edges = Request(id="c3", op="history", args={"block": 2 ** 64 - 1, "n": -(2 ** 63)})
    assert orjson.loads(encode_request(edges))["args"] == edges.args  # still integers


@pytest.mark.parametrize("args", [{"query": "lone \ud800 surrogate"}, {"limit": float("nan")},
                                  {"limit": float("inf")}, {"block": 2 ** 64},
                                  {"settings": {"x": [-(2 ** 63) - 1]}}])
def test_the_client_refuses_a_request_json_cannot_carry(args):
    with pytest.raises(ProtocolError) as err:
        encode_request(Request(id="c2", op="verify", args=args))
    assert err.value.code == ErrorCode.BAD_REQUEST and err.value.request_id == "c2"


def _recording_orjson(seen: list) -> type:
    """A stand-in for the orjson module a client finds in sys.modules: orjson's own
    coders, each noting in `seen` what it was given."""

    class Recording:
        JSONEncodeError, JSONDecodeError = orjson.JSONEncodeError, orjson.JSONDecodeError

        @staticmethod
        def dumps(obj):
            seen.append(obj)
            return orjson.dumps(obj)

        @staticmethod
        def loads(data):
            seen.append(data)
            return orjson.loads(data)

    return Recording


def test_a_process_that_holds_orjson_encodes_a_request_without_arguments_with_it(monkeypatch):
    """A long-lived client (a command through click, kint-server) has orjson loaded: a
    request without arguments is written by it, the same bytes; one with arguments, or one
    orjson cannot carry, goes the standard way, and is refused in the same words. A process
    without orjson (the plain `kint supervisor status`) never imports it here."""
    import sys

    from kint.protocol import client_codec

    used: list[dict] = []
    Recording = _recording_orjson(used)
    plain = [Request(id="c6", op="status", tenant="ténant", db="/h/m.db", space="s",
                     timeout_ms=57_998),
             Request(id="c7", op="sup.ping", timeout_ms=1000),
             Request(id="c8", op="note", args={}, cast=True)]
    with_args = Request(id="c9", op="verify", args={"query": "q"})
    standard = [client_codec.encode_request(r) for r in [*plain, with_args]]  # orjson loaded
    monkeypatch.setitem(sys.modules, "orjson", Recording)
    assert [client_codec.encode_request(r) for r in [*plain, with_args]] == standard
    assert used == [r.to_dict() for r in plain]
    assert standard[:3] == [orjson.dumps(r.to_dict()) for r in plain]
    lone = Request(id="c10", op="status", tenant="lone \ud800 surrogate")
    with pytest.raises(ProtocolError) as fast:
        client_codec.encode_request(lone)
    monkeypatch.delitem(sys.modules, "orjson")
    with pytest.raises(ProtocolError) as slow:
        client_codec.encode_request(lone)
    assert (fast.value.code, fast.value.message) == (slow.value.code, slow.value.message)
    assert fast.value.code == ErrorCode.BAD_REQUEST
    assert client_codec.encode_request(plain[0]) == standard[0]
    assert "orjson" not in sys.modules


def test_the_client_refuses_arguments_that_hold_themselves():
    args: dict = {"query": "q"}
    args["settings"] = {"again": args}
    with pytest.raises(ProtocolError) as err:
        encode_request(Request(id="c3", op="verify", args=args))
    assert err.value.code == ErrorCode.BAD_REQUEST and err.value.request_id == "c3"


def test_a_python_without_the_c_encoder_sends_the_same_bytes(monkeypatch):
    from kint.protocol import client_codec

    requests = [Request(id="c4", op="verify", tenant="t", db="/m.db",
                        args={"query": "caf\u00e9 \u2603", "limit": 5, "write": False}),
                Request(id="c5", op="status", args={}, cast=True)]
    fast = [encode_request(r) for r in requests]
    monkeypatch.setattr(client_codec, "_ENCODE", None)
    assert [encode_request(r) for r in requests] == fast
    args: dict = {}
    args["again"] = args
    with pytest.raises(ProtocolError) as err:  # the public encoder's own circular check
        encode_request(Request(id="c6", op="verify", args=args))
    assert err.value.code == ErrorCode.BAD_REQUEST


def test_request_ids_are_unique_to_the_process_and_drawn_again_in_a_forked_child():
    import os

    from kint.protocol.envelope import new_request_id

    ids = [new_request_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids) and {len(i) for i in ids} == {16}
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its ids are its own, not its parent's next ones
        os.write(write, new_request_id().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    os.close(read)
    os.close(write)
    assert child[:8] != ids[-1][:8] and new_request_id() not in (child, *ids)


@pytest.mark.parametrize("frame", [b'{"id":"r","ok":true,"result":{"a":1}}',
                                   b' {"id": "r", "ok": true, "result": {"a": 1}}\n'])
def test_a_reply_decodes_with_or_without_spaces_around_it(frame):
    reply = decode_reply(frame)
    assert (reply.id, reply.ok, reply.result) == ("r", True, {"a": 1})


@pytest.mark.parametrize("frame, why", [
    (b"[1, 2]", "must be a JSON object"),
    (b'{"ok": true, "result": NaN}', "not valid JSON"),
    (b'{"ok": true, "result": {}, "x": \xff}', "not valid JSON"),
    (b"[" * 100_000, "not valid JSON"),
    (b'{"ok": true, "result": []}', "'result' is not an object"),
    (b'{"ok": 1}', "'ok' is not true or false"),
    (b'{"id": 7, "ok": true, "result": {}}', "'id' is not a string"),
    (b'{"ok": true, "result": {}} {}', "not valid JSON"),
    (b'{"ok": true, "result": {"a": -Infinity}}', "not valid JSON"),
    (b" " * (MAX_MESSAGE_BYTES + 1), "over the limit"),
])
def test_a_malformed_reply_is_an_internal_error_naming_what_is_wrong(frame, why):
    with pytest.raises(ProtocolError) as err:
        decode_reply(frame)
    assert err.value.code == ErrorCode.INTERNAL and why in err.value.message


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_fuzz_bytes_decode_as_a_reply_or_raise_the_protocol_error(data):
    try:
        decode_reply(data)
    except ProtocolError:
        pass


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=2048))
def test_fuzz_bytes_decode_or_raise_the_protocol_error(data):
    try:
        decode_request(data)
    except ProtocolError:
        pass


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(st.fixed_dictionaries({}, optional={
    "v": st.sampled_from([1, 2, "1", None, True]),
    "id": st.text(max_size=70) | st.integers(),
    "op": st.sampled_from(["status", "sup.ping", "sup.restart", "x"]) | st.text(max_size=10),
    "tenant": st.none() | st.text(max_size=30) | st.integers(),
    "db": st.none() | st.text(max_size=30) | st.just("/abs/path"),
    "space": st.none() | st.text(max_size=30),
    "args": _json,
    "timeout_ms": st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    "cast": _json,
}, ) | _json)
def test_fuzz_json_shapes_decode_or_raise_the_protocol_error(obj):
    try:
        req = decode_request(json.dumps(obj).encode())
    except ProtocolError:
        return
    assert isinstance(req.id, str) and isinstance(req.args, dict)
    assert isinstance(req.timeout_ms, int) and req.timeout_ms >= 1


def _answer(decode, data: bytes):
    try:
        return decode(data)
    except ProtocolError as err:
        return (err.code, err.message, err.request_id)


@settings(max_examples=800, deadline=None)
@given(st.sets(st.sampled_from(sorted(GOOD)), max_size=2), st.fixed_dictionaries({}, optional={
    "v": st.sampled_from([1, 2, "1", None, True]),
    "id": st.sampled_from(["r1", "", "x" * 64, "x" * 65, None]) | st.text(max_size=70),
    "op": st.sampled_from(["status", "verify", "sup.ping", "sup.restart", "history", "x", 3]),
    "tenant": st.sampled_from([None, "t", "", "a\x00b", "t" * 200, "t" * 201, 7]),
    "db": st.sampled_from([None, "/m.db", "m.db", "", "/a\x00b", "/" + "d" * 5000, False]),
    "space": st.sampled_from([None, "s", "", "s\x00", "s" * 300, []]),
    "args": st.sampled_from([None, {}, [], {"query": "q"}, {"target": "abc"}, {"x": 1},
                             {"tier": "facts", "key": "k"}, {"query": 5}]),
    "timeout_ms": st.sampled_from([0, 1, 5000, 1.5, True, "9", MAX_TIMEOUT_MS,
                                   MAX_TIMEOUT_MS + 1, None]),
    "cast": st.sampled_from([False, True, 0, "yes", None]),
    "extra": st.just(1),
}))
def test_the_gates_one_expression_answers_as_its_checks_one_by_one(dropped, changed):
    """decode_request accepts a well-formed request in one expression and leaves every
    other to `_decode_checked`: the two give the same request, or the same refusal, for a
    good request with fields dropped or changed, one or several."""
    from kint.protocol.server_codec import _decode_checked

    obj = {k: v for k, v in {**GOOD, **changed}.items() if k not in dropped}
    data = orjson.dumps(obj)
    fast, checked = _answer(decode_request, data), _answer(_decode_checked, data)
    assert fast == checked
    if isinstance(fast, Request):
        assert (type(fast.timeout_ms), type(fast.cast), fast.v) == (int, bool, 1)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512) | _json.map(lambda o: json.dumps(o).encode()),
       st.binary(max_size=64))
def test_fuzz_worker_messages_decode_or_raise_the_protocol_error(header, body):
    for decode in (worker_wire.decode_from_worker, worker_wire.decode_from_supervisor):
        try:
            decode(header, body)
        except ProtocolError:
            pass


def test_a_worker_message_whose_kind_is_not_a_string_is_refused():
    """A kind that is a list or an object is unhashable: looked up in the set of kinds as
    it was, it raised TypeError, which no caller catches (the supervisor's loop would end).
    Both directions refuse it with the protocol's error instead."""
    for kind in ([], {}, ["hello"], {"hello": 1}, 1, None):
        header = orjson.dumps({"kind": kind, "pid": 5, "id": "1"})
        for decode in (worker_wire.decode_from_worker, worker_wire.decode_from_supervisor):
            with pytest.raises(ProtocolError):
                decode(header, b"")


def test_a_reply_over_the_limit_is_encoded_as_too_large():
    """What a client could not read is never sent: the refusal, naming the op and the size,
    goes in its place, under the same id."""
    small = ok_reply("r1", {"text": "x" * 100})
    assert encode_reply(small, "history") == orjson.dumps(small.to_dict())
    answer = ok_reply("r2", {"text": "x" * MAX_MESSAGE_BYTES})
    size = len(orjson.dumps(answer.to_dict()))
    refused = decode_reply(encode_reply(answer, "history"))
    assert (refused.id, refused.ok, refused.error) == ("r2", False, "TOO_LARGE")
    assert refused.message.startswith(f"the history reply is {size} bytes, over the limit")
    assert "--block N" in (refused.hint or "")


def test_beats_are_type_checked():
    good = {"kind": "beat", "pid": 5, "state": {"op": None, "inflight": 0, "has_work": False}}
    assert worker_wire.decode_from_worker(orjson.dumps(good), b"")["state"]["inflight"] == 0
    for state in ({"inflight": "3"}, {"has_work": 1}, {"surprise": 1}, {"op_age_s": True}):
        with pytest.raises(ProtocolError):
            worker_wire.decode_from_worker(orjson.dumps({**good, "state": state}), b"")
    with pytest.raises(ProtocolError):
        worker_wire.decode_from_worker(orjson.dumps({**good, "pid": 0}), b"")


def test_a_fatal_carries_a_code_and_hint_only_together_and_only_a_real_code():
    """A start the worker refuses (kint.tenant_worker.worker_lock) names the code and hint
    its space's requests get; the supervisor answers with them, so it takes neither alone,
    nor a code kint does not have."""
    plain = {"kind": "fatal", "pid": 5, "reason": "the worker could not start: ..."}
    assert "code" not in worker_wire.decode_from_worker(orjson.dumps(plain), b"")
    refused = {**plain, "code": "WORKER_DOWN", "hint": "`kill -CONT 7`"}
    assert worker_wire.decode_from_worker(orjson.dumps(refused), b"")["code"] == "WORKER_DOWN"
    # The holder's pid, when the lock names it, comes with a refusal only.
    held = {**refused, "holder_pid": 7}
    assert worker_wire.decode_from_worker(orjson.dumps(held), b"")["holder_pid"] == 7
    for bad in ({"code": "WORKER_DOWN"}, {"hint": "x"}, {"code": "NOPE", "hint": "x"},
                {"code": ["WORKER_DOWN"], "hint": "x"}, {"code": "WORKER_DOWN", "hint": 3},
                {"holder_pid": 7}, {**refused, "holder_pid": "7"},
                {**refused, "holder_pid": True}, {**refused, "holder_pid": 0}):
        with pytest.raises(ProtocolError):
            worker_wire.decode_from_worker(orjson.dumps({**plain, **bad}), b"")


def test_a_request_and_its_reply_cross_the_supervisor_as_bytes():
    """The back socket's two frames: the supervisor routes on the header and passes the
    body on as it is, the client's request to the worker, the worker's reply (already under
    the client's id) to the client; only a reply and a request have a body, and each side
    refuses what breaks that."""
    request = orjson.dumps(GOOD)
    header, body = worker_wire.encode({"kind": "req", "id": "7"}, request)
    assert body is request
    assert worker_wire.decode_from_supervisor(header, body) == {"kind": "req", "id": "7"}
    reply = encode_reply(ok_reply("r1", {"rows": 3}))
    header, body = worker_wire.encode({"kind": "reply", "id": "7", "pid": 5}, reply)
    assert worker_wire.decode_from_worker(header, body)["id"] == "7"
    assert decode_reply(body).id == "r1"
    refused = [
        (worker_wire.decode_from_supervisor, {"kind": "req", "id": "7"}, b""),
        (worker_wire.decode_from_supervisor, {"kind": "req"}, request),
        (worker_wire.decode_from_worker, {"kind": "reply", "id": "7", "pid": 5}, b""),
        (worker_wire.decode_from_worker, {"kind": "reply", "pid": 5}, reply),
        (worker_wire.decode_from_worker, {"kind": "reply", "id": "x" * 65, "pid": 5}, reply),
        (worker_wire.decode_from_worker, {"kind": "beat", "pid": 5, "state": {}}, b"x"),
        (worker_wire.decode_from_worker, {"kind": "hello", "pid": 5}, reply),
    ]
    for decode, head, tail in refused:
        with pytest.raises(ProtocolError):
            decode(orjson.dumps(head), tail)
    # A reply's body over the limit is read as a reply (the supervisor answers its client
    # TOO_LARGE once the token says who sent it); a request's is refused.
    big = b"x" * (MAX_MESSAGE_BYTES + 1)
    header = orjson.dumps({"kind": "reply", "id": "7", "pid": 5})
    assert worker_wire.decode_from_worker(header, big)["id"] == "7"
    assert worker_wire.reply_too_large(big) and not worker_wire.reply_too_large(big[1:])
    with pytest.raises(ProtocolError) as err:
        worker_wire.decode_from_supervisor(orjson.dumps({"kind": "req", "id": "7"}), big)
    assert err.value.code == ErrorCode.TOO_LARGE


def test_a_process_that_holds_orjson_reads_a_reply_with_it_as_json_would(monkeypatch):
    """A long-lived client reads a reply with orjson, the same dict `json` reads; a reply
    with a run of 19 digits (an integer past 64 bits, which orjson reads as a float) or
    one orjson refuses is read by `json`, as is every reply of a process without orjson."""
    import sys

    read: list[bytes] = []
    Recording = _recording_orjson(read)
    status = encode_reply(ok_reply("r1", {"rows": {"hot": 1000}, "uptime_s": 12.5,
                                          "label": "caf\u00e9", "none": None, "list": [1, -2]}))
    big = b'{"id":"r2","ok":true,"result":{"n":18446744073709551616,"m":-9223372036854775809}}'
    huge = b'{"id":"r3","ok":true,"result":{"x":1e400}}'
    lone = b'{"id":"r4","ok":true,"result":{"s":"\\ud800"}}'
    frames = [status, big, huge, lone]
    monkeypatch.delitem(sys.modules, "orjson")
    standard = [decode_reply(f) for f in frames]
    assert not read
    monkeypatch.setitem(sys.modules, "orjson", Recording)
    assert [decode_reply(f) for f in frames] == standard
    assert read == [status, huge, lone]  # the 19 digits' reply never went to orjson
    assert standard[1].result == {"n": 2 ** 64, "m": -(2 ** 63) - 1}  # exact, not floats
    assert standard[2].result == {"x": float("inf")}
    with pytest.raises(ProtocolError) as err:
        decode_reply(b'{"ok": true, "result": NaN}')
    assert "not valid JSON" in err.value.message


def _typed(value):
    """`value` with each leaf's type beside it and each float as its repr, keys in their
    order: `==` alone takes 1 for 1.0, True for 1 and -0.0 for 0.0, so a reader that
    turned one into the other would compare equal."""
    if isinstance(value, dict):
        return ("dict", [(key, _typed(child)) for key, child in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(child) for child in value])
    return (type(value).__name__, repr(value) if isinstance(value, float) else value)


def test_typed_tells_apart_what_equality_takes_as_one():
    for one, other in ((1, 1.0), (True, 1), (-0.0, 0.0), ({"a": 1, "b": 2}, {"b": 2, "a": 1})):
        assert one == other and _typed(one) != _typed(other), (one, other)


@settings(max_examples=200, deadline=None)
@example(-0.0).via("a negative zero stays one")
@example([1, 1.0, True, 0, False, -0.0, 0.0, 1e-320]).via("numbers keep their types")
@example({"b": 1, "a": 2}).via("keys keep their order")
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text()
                    | st.floats(allow_nan=False, allow_infinity=False),
                    lambda kids: st.lists(kids, max_size=4)
                    | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=12))
def test_fuzz_a_reply_reads_the_same_with_orjson_or_without(value):
    import json
    import sys

    frame = json.dumps({"id": "r", "ok": True, "result": {"v": value}}).encode()
    held = sys.modules.pop("orjson")
    try:
        without = decode_reply(frame)
    finally:
        sys.modules["orjson"] = held
    read = decode_reply(frame)
    assert read.ok is True and read.id == without.id == "r"
    assert _typed(read.result) == _typed(without.result)
