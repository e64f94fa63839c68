"""What session 35's dogfood lane found, walking the docs' main job on the devchain.

- `kint verify --limit abc`, `push --confirmations x`, `history --block q`: click named its
  IntRange "integer range", so a value that is no number was refused as "'abc' is not a
  valid integer range", as if a range (1-5) were asked for; `--days abc` said "is not a
  valid integer". Every bounded number now says the latter (kint.commands.common.Whole).
"""

from __future__ import annotations

import json

import pytest

from conftest import make_sandbox, write_store

NOT_AN_INTEGER = [
    (["verify", "q", "--limit", "abc"], "--limit", "abc"),
    (["push", "--confirmations", "x"], "--confirmations", "x"),
    (["compact", "--confirmations", "x"], "--confirmations", "x"),
    (["history", "entity", "k", "--category", "c", "--block", "q"], "--block", "q"),
]


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """One machine for the module: its store holding one rule of the test account's
    tenant, written through Sibyl's client, and its test supervisor (Sibyl's real account
    gate trusting the test's signer). No chain: nothing here is connected."""
    sb = make_sandbox(tmp_path_factory.mktemp("dogfood35"))
    tenant = sb.start_entitled()
    write_store(sb.sibyl_db, tenant=tenant)
    try:
        yield sb
    finally:
        sb.shutdown()


@pytest.mark.parametrize("argv,flag,value", NOT_AN_INTEGER, ids=[a[0][0] for a in NOT_AN_INTEGER])
def test_a_bounded_number_that_is_no_number_is_said_to_be_no_integer(machine, argv, flag,
                                                                       value):
    out = machine.kint(*argv)
    assert out.returncode == 2, out.stderr
    first = out.stderr.splitlines()[0]
    assert first == (f"kint: error: Invalid value for '{flag}': '{value}' is not a valid "
                     f"integer [BAD_REQUEST]"), out.stderr
    as_json = machine.kint(*argv, "--json")
    assert json.loads(as_json.stdout)["message"] == (
        f"Invalid value for '{flag}': '{value}' is not a valid integer"), as_json.stdout

