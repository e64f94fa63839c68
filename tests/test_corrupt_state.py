"""Corrupt state is refused by name, never overwritten (issue 14, item 4): each of a
space's files under KINT_HOME, garbled, gets CORRUPT_STATE naming the file from the op that
reads it, `kint status` reports it instead of "in step", `kint doctor` fails its
"state files" check, and the file is left exactly as it was."""

from __future__ import annotations

import json

import pytest

from chain_machines import kjson, new_machine, ok
from conftest import sibyl_client

VICTIMS = [
    # (file, the op that reads it)
    ("mirror-{s}.json.gz", "push"),
    ("watermark-{s}.json", "pull"),
    ("enrol-{s}.json", "push"),
    ("wraps-{s}.json", "push"),
    ("vault-{s}.aes", "push"),
    ("session.key", None),
]


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home):
    sb = new_machine(tmp_path_factory.mktemp("corrupt"), chain_home)
    sibyl_client(sb.sibyl_db, sb.tenant).set_entity("rules", "r", {"rule": "kept"})
    space = kjson(sb, "connect", "--dev")["space"]
    kjson(sb, "push")
    sb.space16 = space
    yield sb
    sb.shutdown()


@pytest.mark.parametrize("name,op", VICTIMS, ids=[v[0].split("-")[0] for v in VICTIMS])
def test_a_garbled_file_is_named_and_left_alone(machine, name, op):
    path = machine.kint_home / name.format(s=machine.space16)
    original = path.read_bytes()
    garbled = original[: len(original) // 2]
    path.write_bytes(garbled)
    try:
        if op is not None:
            out = machine.kint(op)
            assert out.returncode != 0 and "[CORRUPT_STATE]" in out.stderr, out.stderr
            assert str(path) in out.stderr and "bug in kint" not in out.stderr
        status = ok(machine.kint("status")).stdout
        assert "PROBLEM:" in status and str(path) in status and "(in step)" not in status
        doctor = machine.kint("doctor", "--json")
        assert doctor.returncode == 1
        check = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "state files"]
        assert check and not check[0]["ok"] and str(path) in check[0]["detail"]
        assert path.read_bytes() == garbled  # never rewritten
    finally:
        path.write_bytes(original)
    assert kjson(machine, "status")["in_step"] is True
