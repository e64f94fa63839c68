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


@pytest.mark.parametrize("urls", ["http://127.0.0.1:8545", [], [7], [""]])
def test_an_enrolment_whose_endpoints_are_not_a_list_of_urls_is_refused(tmp_path, urls):
    """The space's own endpoints (`connect --rpc-urls`) are read by the worker, `join`,
    `authorize` and `session-key show` through one reader: a value that is not a list of
    endpoints is a corrupt file, named, never an endpoint built from it."""
    from kint.tenant_worker.enrolment import Enrolment, load_enrolment, save_enrolment
    from kint.tenant_worker.state_format import CorruptStateFile

    path = tmp_path / "enrol-0000000000000000.json"
    good = Enrolment(space="00" * 32, tenant="t", owner="0x" + "ab" * 20, account="eoa",
                     contract="0x" + "00" * 20, chain_id=8453, rpc_urls=["http://127.0.0.1:9"])
    save_enrolment(path, good)
    assert load_enrolment(path) == good
    path.write_text(json.dumps({**good.to_json(), "rpc_urls": urls}))
    with pytest.raises(CorruptStateFile, match="rpc_urls that are not a list of endpoints"):
        load_enrolment(path)


@pytest.mark.parametrize("field, value", [("contract", None), ("contract", "0x12"),
                                          ("contract", 7), ("chain_id", "8453"),
                                          ("chain_id", True)])
def test_an_enrolment_naming_no_contract_or_chain_id_is_refused(tmp_path, field, value):
    """Every command that reads the space's head compares the enrolment's chain id and
    contract with the ones in force first (enrolled_chain.py): one that names none is a
    corrupt file, named, not a comparison that fails in its own way (a None has no
    `.lower()`, an INTERNAL error)."""
    from kint.tenant_worker.enrolment import Enrolment, load_enrolment, save_enrolment
    from kint.tenant_worker.state_format import CorruptStateFile

    path = tmp_path / "enrol-0000000000000000.json"
    good = Enrolment(space="00" * 32, tenant="t", owner="0x" + "ab" * 20, account="eoa",
                     contract="0x" + "00" * 20, chain_id=8453)
    save_enrolment(path, good)
    path.write_text(json.dumps({**good.to_json(), field: value}))
    with pytest.raises(CorruptStateFile, match="names no contract address or chain id"):
        load_enrolment(path)


@pytest.mark.parametrize("tags", [None, "ab" * 16, [None], ["ab" * 15], ["0x" + "ab" * 16],
                                  [7]])
def test_an_enrolment_whose_key_tags_are_not_kek_tags_is_refused(tmp_path, tags):
    """The enrolment's kek tags tell another machine's rotation from a leaked key's epoch
    (data_key.wrapped_for_here): a value that is not a list of 16-byte tags in hex is a
    corrupt file, named, not a TypeError there (`"key_tags": null` was one)."""
    from kint.tenant_worker.enrolment import Enrolment, load_enrolment, save_enrolment
    from kint.tenant_worker.state_format import CorruptStateFile

    path = tmp_path / "enrol-0000000000000000.json"
    good = Enrolment(space="00" * 32, tenant="t", owner="0x" + "ab" * 20, account="eoa",
                     contract="0x" + "00" * 20, chain_id=8453, key_tags=["Ab" * 16])
    save_enrolment(path, good)
    assert load_enrolment(path) == good
    path.write_text(json.dumps({**good.to_json(), "key_tags": tags}))
    with pytest.raises(CorruptStateFile, match="key_tags that are not a list of kek tags") \
            as refused:
        load_enrolment(path)
    assert str(path) in str(refused.value)


def test_an_enrolment_that_cannot_be_read_is_refused_by_name(tmp_path):
    """An enrolment path this user cannot read (here a directory stands there) is a
    corrupt file named with why, as every state file is, where its own reader let the
    OSError through (an INTERNAL error, a traceback on the command line); garbled JSON
    is named as before, and no file is no enrolment."""
    from kint.tenant_worker.enrolment import load_enrolment
    from kint.tenant_worker.state_format import CorruptStateFile

    path = tmp_path / "enrol-0000000000000000.json"
    assert load_enrolment(path) is None
    path.write_text('{"v": 1, "own')
    with pytest.raises(CorruptStateFile, match="is not valid JSON"):
        load_enrolment(path)
    path.unlink()
    path.mkdir()
    with pytest.raises(CorruptStateFile, match=r"cannot be read \(Is a directory\)"):
        load_enrolment(path)


def test_a_rekey_journal_that_does_not_open_is_named_by_status_and_doctor(machine):
    """A rekey journal (rekey-<space16>.json) left garbled stops every push and pull
    (CORRUPT_STATE, naming it); status and doctor's "state files" name it too. Before,
    they said every file of the space read while push and pull refused over it."""
    path = machine.kint_home / f"rekey-{machine.space16}.json"
    path.write_bytes(b'{"v": 1, "new_dek_id": "')
    try:
        out = machine.kint("push")
        assert out.returncode != 0 and "[CORRUPT_STATE]" in out.stderr, out.stderr
        assert str(path) in out.stderr
        status = ok(machine.kint("status")).stdout
        assert "PROBLEM:" in status and str(path) in status and "(in step)" not in status
        doctor = machine.kint("doctor", "--json")
        assert doctor.returncode == 1
        check = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "state files"]
        assert check and not check[0]["ok"] and str(path) in check[0]["detail"], check
        assert path.read_bytes() == b'{"v": 1, "new_dek_id": "'  # never rewritten
    finally:
        path.unlink()
    assert kjson(machine, "status")["in_step"] is True
