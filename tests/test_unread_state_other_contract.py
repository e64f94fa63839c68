"""A space on another EpochAnchor whose mirror and watermark both do not read (lane left18).

The refusal to read another contract says how far this machine got with the space on its
own; both files garbled were counted as nothing, so push, status, doctor and authorize
said "none of its epochs" of a machine that had anchored one. A file that does not read is
named (CORRUPT_STATE, as everywhere a state file is refused), never taken for "none".

Through the real CLI, on the session's devchain with a second EpochAnchor deployed on it.
"""

from __future__ import annotations

import json

import pytest

from chain_machines import deploy_second_anchor, kjson, new_machine

NONE_HERE = "anchored or pulled none of its epochs"


@pytest.fixture(scope="module")
def second_anchor(chain_home) -> str:
    return deploy_second_anchor(chain_home)


@pytest.fixture(scope="module")
def garbled(tmp_path_factory, chain_home, second_anchor):
    """One epoch anchored, then the mirror and the watermark garbled and `contract` set to
    the second EpochAnchor."""
    from conftest import sibyl_client

    sb = new_machine(tmp_path_factory.mktemp("unread-other"), chain_home)
    connected = kjson(sb, "connect", "--dev")
    sb.space16 = connected["space"]
    sibyl_client(sb.sibyl_db, sb.tenant).set_entity("rules", "kept", {"rule": "1"})
    assert kjson(sb, "push")["pushed"] == 1
    sb.mirror = sb.kint_home / f"mirror-{sb.space16}.json.gz"
    for name in (sb.mirror.name, f"watermark-{sb.space16}.json"):
        (sb.kint_home / name).write_bytes(b"garbled")
    path = sb.kint_home / "config.toml"
    path.write_text(f'contract = "{second_anchor}"\n')
    path.chmod(0o600)
    yield sb
    sb.shutdown()


@pytest.mark.parametrize("argv", [("push",), ("pull",), ("authorize", "payload"),
                                  ("session-key", "show")])
def test_a_refusal_names_the_file_that_does_not_read(garbled, argv):
    out = garbled.kint(*argv)
    assert out.returncode != 0, out.stdout + out.stderr
    assert NONE_HERE not in out.stderr, out.stderr
    first = out.stderr.splitlines()[0]
    assert first.endswith("[CORRUPT_STATE]") and str(garbled.mirror) in first, out.stderr


def test_status_and_doctor_do_not_say_nothing_is_held(garbled):
    status = garbled.kint("status", "--json")
    assert NONE_HERE not in status.stdout and str(garbled.mirror) in status.stdout, \
        status.stdout
    doctor = json.loads(garbled.kint("doctor", "--json").stdout)
    checks = {c["name"]: c for c in doctor["checks"]}
    assert NONE_HERE not in json.dumps(doctor), doctor
    assert checks["chain"]["ok"] is False and str(garbled.mirror) in checks["chain"]["detail"], \
        checks["chain"]
