"""Keys and custody (DESIGN §8): the machine secret, the session key, writer keys, data
keys, recovery codes, wraps, the vault and the recovery file, on real files.

About scrypt parameters: a production session-key unlock costs ~1 s and ~260 MB, so most
tests here make their keystores with `scrypt_n=SMALL_N` (2**10) and, where a recovery wrap
is about shape rather than cost, `n=SMALL_N`. Those are keyword arguments keys.py exposes
for tests only; the production defaults are unchanged, and `test_production_parameters`
makes and opens one keystore and one recovery wrap with them.
"""

from __future__ import annotations

import base64
import fcntl
import os
import re
import stat
import tempfile
import threading
from pathlib import Path

import keyring
import keyring.backend
import keyring.backends.fail
import keyring.errors
import orjson
import pytest

from kint.tenant_worker import keys as K

SMALL_N = 2**10
SPACE_A = "a1" * 32
SPACE_B = "b2" * 32
PASSPHRASE = "correct horse battery staple"


class MemoryKeyring(keyring.backend.KeyringBackend):
    """A working OS keyring, in memory."""

    priority = 10  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.entries: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.entries.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.entries[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.entries.pop((service, username), None)


class BrokenKeyring(MemoryKeyring):
    """A keyring that is installed but fails (locked collection, no D-Bus, ...)."""

    def get_password(self, service: str, username: str) -> str | None:
        raise keyring.errors.KeyringError("the collection is locked")


@pytest.fixture(autouse=True)
def _no_keyring(monkeypatch, tmp_path):
    """No OS keyring, no passphrase, no vault-days override, and a private temp folder for
    the machine-wide lock files, unless a test says otherwise."""
    previous = keyring.get_keyring()
    keyring.set_keyring(keyring.backends.fail.Keyring())
    monkeypatch.delenv(K.PASSPHRASE_ENV, raising=False)
    monkeypatch.delenv(K.VAULT_DAYS_ENV, raising=False)
    locks = tmp_path / "tmp"
    locks.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(locks))
    yield
    keyring.set_keyring(previous)


@pytest.fixture
def home(tmp_path) -> Path:
    return tmp_path / "kint"


def assert_all_private(home: Path) -> list[Path]:
    files = [p for p in home.rglob("*") if p.is_file()]
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    return files


def small_secret(source: K.SecretSource = "passphrase") -> K.MachineSecret:
    return K.MachineSecret(PASSPHRASE.encode(), source)


# -- the machine secret --------------------------------------------------------------------


def test_source_order_keyring_then_passphrase_then_local_secret(home, monkeypatch):
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    monkeypatch.setenv(K.PASSPHRASE_ENV, PASSPHRASE)

    first = K.machine_secret(home)
    assert first.source == "keyring"
    stored = ring.entries[("kint", f"machine-secret:{home}")]
    assert first.secret == bytes.fromhex(stored) and len(first.secret) == 32
    assert K.machine_secret(home).secret == first.secret  # kept, not remade
    assert not (home / "local.secret").exists()

    keyring.set_keyring(keyring.backends.fail.Keyring())
    second = K.machine_secret(home)
    assert (second.source, second.secret) == ("passphrase", PASSPHRASE.encode())

    monkeypatch.delenv(K.PASSPHRASE_ENV)
    third = K.machine_secret(home)
    assert third.source == "local.secret" and len(third.secret) == 32
    assert (home / "local.secret").exists()


def test_a_failing_keyring_counts_as_none(home, monkeypatch):
    keyring.set_keyring(BrokenKeyring())
    monkeypatch.setenv(K.PASSPHRASE_ENV, PASSPHRASE)
    assert K.machine_secret(home).source == "passphrase"


def test_machine_secret_repr_hides_the_secret(home):
    secret = K.machine_secret(home)
    assert secret.secret.hex() not in repr(secret)
    assert secret.secret.hex() not in str(secret)


def test_local_secret_is_private_and_reused(home):
    first = K.machine_secret(home)
    path = home / "local.secret"
    assert first.source == "local.secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert K.machine_secret(home).secret == first.secret
    assert path.read_text().strip() == first.secret.hex()


def test_local_secret_with_open_permissions_is_refused(home):
    secret = K.machine_secret(home)
    path = home / "local.secret"
    os.chmod(path, 0o644)
    with pytest.raises(K.MachineSecretUnsafe) as err:
        K.machine_secret(home)
    assert str(path) in str(err.value) and secret.secret.hex() not in str(err.value)
    assert "\n" not in str(err.value)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # refused, not "fixed"


def test_local_secret_that_is_a_symlink_or_folder_is_refused(home, tmp_path):
    home.mkdir(mode=0o700)
    target = tmp_path / "elsewhere"
    target.write_text("ab" * 32)
    os.chmod(target, 0o600)
    (home / "local.secret").symlink_to(target)
    with pytest.raises(K.MachineSecretUnsafe, match="not a regular file"):
        K.machine_secret(home)
    (home / "local.secret").unlink()
    (home / "local.secret").mkdir(mode=0o700)
    with pytest.raises(K.MachineSecretUnsafe, match="not a regular file"):
        K.machine_secret(home)


def test_local_secret_with_garbage_is_refused_without_echo(home):
    home.mkdir(mode=0o700)
    path = home / "local.secret"
    path.write_text("hunter2-not-a-secret")
    os.chmod(path, 0o600)
    with pytest.raises(K.MachineSecretCorrupt) as err:
        K.machine_secret(home)
    assert "hunter2" not in str(err.value) and str(path) in str(err.value)
    assert path.read_text() == "hunter2-not-a-secret"


# -- the session key -----------------------------------------------------------------------


def test_session_key_create_unlock_rotate(home):
    secret = K.machine_secret(home)  # local.secret
    address = K.create_session_key(home, scrypt_n=SMALL_N)
    assert K.session_address(home) == address
    with pytest.raises(K.SessionKeyExists):
        K.create_session_key(home, scrypt_n=SMALL_N)

    account = K.unlock_session_key(home)
    assert account.address == address

    old, new = K.rotate_session_key(home, scrypt_n=SMALL_N)
    assert old == address and new != old
    assert K.session_address(home) == new
    assert K.session_address(home, old=True) == old
    assert K.unlock_session_key(home).address == new
    assert K.unlock_session_key(home, old=True).address == old  # same machine secret

    # A keystore any Ethereum tool can open with the secret as hex.
    keystore = orjson.loads((home / "session.key").read_bytes())
    from eth_account import Account
    assert Account.from_key(Account.decrypt(keystore, secret.password)).address == new
    files = assert_all_private(home)
    assert {p.name for p in files} == {"local.secret", "session.key", "session.key.old"}


def test_rotate_crash_before_the_rename_loses_nothing(home, monkeypatch):
    monkeypatch.setenv(K.PASSPHRASE_ENV, PASSPHRASE)
    address = K.create_session_key(home, scrypt_n=SMALL_N)
    before = (home / "session.key").read_bytes()

    real_replace = os.replace

    def crash(src, dst):
        if Path(dst).name == "session.key":
            raise OSError("simulated crash")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        K.rotate_session_key(home, scrypt_n=SMALL_N)
    monkeypatch.setattr(os, "replace", real_replace)
    assert (home / "session.key").read_bytes() == before
    assert K.unlock_session_key(home).address == address
    assert sorted(p.name for p in home.iterdir()) == ["session.key", "session.key.old"]


def test_wrong_passphrase_is_locked_with_a_hint(home, monkeypatch):
    monkeypatch.setenv(K.PASSPHRASE_ENV, PASSPHRASE)
    K.create_session_key(home, scrypt_n=SMALL_N)
    monkeypatch.setenv(K.PASSPHRASE_ENV, "a different passphrase")
    with pytest.raises(K.SessionKeyLocked) as err:
        K.unlock_session_key(home)
    message = str(err.value)
    assert "passphrase" in message and K.PASSPHRASE_ENV in message
    assert "a different passphrase" not in message and PASSPHRASE not in message
    assert "\n" not in message


def test_missing_and_garbled_session_key(home):
    with pytest.raises(K.SessionKeyMissing):
        K.session_address(home)
    home.mkdir(mode=0o700)
    (home / "session.key").write_bytes(b'{"version": 3, "addr')
    with pytest.raises(K.SessionKeyCorrupt, match="session.key"):
        K.unlock_session_key(home, secret=small_secret())


def test_unlock_waits_for_the_machine_wide_lock(home):
    secret = small_secret()
    address = K.create_session_key(home, secret=secret, scrypt_n=SMALL_N)
    done = threading.Event()
    result: dict[str, str] = {}

    def unlock() -> None:
        result["address"] = K.unlock_session_key(home, secret=secret).address
        done.set()

    with open(K.scrypt_lock_path(), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        thread = threading.Thread(target=unlock)
        thread.start()
        assert not done.wait(0.5)  # blocked behind the lock another unlock holds
        fcntl.flock(held, fcntl.LOCK_UN)
    thread.join(30)
    assert result["address"] == address


def test_production_parameters(home):
    """One keystore and one recovery wrap with the production defaults (the slow ones)."""
    secret = small_secret()
    address = K.create_session_key(home, secret=secret)
    keystore = orjson.loads((home / "session.key").read_bytes())
    assert keystore["crypto"]["kdf"] == "scrypt"
    assert keystore["crypto"]["kdfparams"]["n"] == K.SESSION_SCRYPT_N == 2**18
    assert K.unlock_session_key(home, secret=secret).address == address

    data_key = K.new_data_key()
    code = K.parse_recovery_code(K.new_recovery_code())
    wrap = K.wrap_with_recovery_code(data_key, code, SPACE_A)
    assert (wrap["kdf"]["n"], wrap["kdf"]["r"], wrap["kdf"]["p"]) == (2**15, 8, 1)
    assert K.unwrap(wrap, space_id=SPACE_A, recovery_code=code) == data_key


# -- writer keys and data keys -------------------------------------------------------------


def test_writer_key_is_deterministic_and_per_space():
    session = bytes.fromhex("11" * 32)
    a1 = K.writer_account(session, SPACE_A)
    a2 = K.writer_account(session, SPACE_A)
    b = K.writer_account(session, SPACE_B)
    other = K.writer_account(bytes.fromhex("22" * 32), SPACE_A)
    assert a1.address == a2.address and a1.key == a2.key
    assert len({a1.address, b.address, other.address}) == 3
    assert a1.key != session
    with pytest.raises(K.BadSpaceId):
        K.writer_account(session, "abc")


def test_data_key_and_id():
    key = K.new_data_key()
    assert len(key) == 32 and K.new_data_key() != key
    from eth_hash.auto import keccak
    assert K.data_key_id(key) == keccak(key)[:8]


# -- recovery codes ------------------------------------------------------------------------


def test_recovery_code_shape_and_round_trip():
    code = K.new_recovery_code()
    assert re.fullmatch(r"(?:[A-Z2-7]{4}-){7}[A-Z2-7]{4}", code)
    raw = K.parse_recovery_code(code)
    assert len(raw) == 20
    assert base64.b32encode(raw).decode() == code.replace("-", "")
    assert K.parse_recovery_code(code.lower()) == raw
    assert K.parse_recovery_code(code.replace("-", " ")) == raw
    assert K.parse_recovery_code(" " + code.replace("-", "") + "\n") == raw
    assert K.format_recovery_code(raw) == code
    assert K.new_recovery_code() != code


@pytest.mark.parametrize("bad", [
    "",
    "ABCD-EFGH",  # too short
    "ABCD-EFGH-IJKL-MNOP-QRST-UVWX-YZ23-4567-ABCD",  # too long
    "ABCD-EFGH-IJKL-MNOP-QRST-UVWX-YZ23-4560",  # 0 is not base32
    "ABCD-EFGH-IJKL-MNOP-QRST-UVWX-YZ23-456=",
    "ABCD_EFGH_IJKL_MNOP_QRST_UVWX_YZ23_4567",
])
def test_bad_recovery_codes_are_refused_without_echo(bad):
    with pytest.raises(K.BadRecoveryCode) as err:
        K.parse_recovery_code(bad)
    message = str(err.value)
    assert "32 characters" in message and "8 groups of 4" in message
    if bad:
        assert bad not in message and bad.replace("-", "") not in message


# -- wraps ---------------------------------------------------------------------------------


@pytest.fixture
def session_key() -> bytes:
    return bytes.fromhex("33" * 32)


def _machine(session_key: bytes) -> str:
    from eth_account import Account
    return Account.from_key(session_key).address


def test_wraps_round_trip_both_kinds(session_key):
    data_key = K.new_data_key()
    code = K.parse_recovery_code(K.new_recovery_code())
    address = _machine(session_key)
    rec = K.wrap_with_recovery_code(data_key, code, SPACE_A, n=SMALL_N)
    mac = K.wrap_for_machine(data_key, session_key, address, SPACE_A)

    assert set(rec) == {"v", "kind", "tag", "kdf", "nonce", "ct", "key_id"} == set(mac)
    assert (rec["v"], rec["kind"], rec["tag"]) == (1, "recovery", "recovery")
    assert rec["kdf"]["name"] == "scrypt" and len(bytes.fromhex(rec["kdf"]["salt"])) == 16
    assert (mac["kind"], mac["tag"]) == ("machine", address.lower())
    assert rec["key_id"] == mac["key_id"] == K.data_key_id(data_key).hex()
    assert data_key.hex() not in orjson.dumps([rec, mac]).decode()

    assert K.unwrap(rec, space_id=SPACE_A, recovery_code=code) == data_key
    assert K.unwrap(mac, space_id=SPACE_A, session_private_key=session_key) == data_key

    blob = K.encode_wraps([rec, mac])
    assert K.decode_wraps(blob) == [rec, mac]


def test_wrong_secrets_are_refused(session_key):
    data_key = K.new_data_key()
    code = K.parse_recovery_code(K.new_recovery_code())
    other_code = K.parse_recovery_code(K.new_recovery_code())
    rec = K.wrap_with_recovery_code(data_key, code, SPACE_A, n=SMALL_N)
    mac = K.wrap_for_machine(data_key, session_key, _machine(session_key), SPACE_A)

    with pytest.raises(K.WrongSecret) as err:
        K.unwrap(rec, space_id=SPACE_A, recovery_code=other_code)
    assert "\n" not in str(err.value)
    assert other_code.hex() not in str(err.value)
    assert base64.b32encode(other_code).decode() not in str(err.value)
    with pytest.raises(K.WrongSecret):  # moved to another space
        K.unwrap(rec, space_id=SPACE_B, recovery_code=code)
    with pytest.raises(K.WrongSecret):  # another machine's key
        K.unwrap(mac, space_id=SPACE_A, session_private_key=bytes.fromhex("44" * 32))
    with pytest.raises(K.WrongSecret):
        K.unwrap(mac, space_id=SPACE_B, session_private_key=session_key)


def test_tampered_wraps_are_refused(session_key):
    data_key = K.new_data_key()
    code = K.parse_recovery_code(K.new_recovery_code())
    rec = K.wrap_with_recovery_code(data_key, code, SPACE_A, n=SMALL_N)
    mac = K.wrap_for_machine(data_key, session_key, _machine(session_key), SPACE_A)

    flipped = dict(rec, ct=("0" if rec["ct"][0] != "0" else "1") + rec["ct"][1:])
    with pytest.raises(K.WrongSecret):
        K.unwrap(flipped, space_id=SPACE_A, recovery_code=code)
    salted = dict(rec, kdf=dict(rec["kdf"], salt="00" * 16))
    with pytest.raises(K.WrongSecret):
        K.unwrap(salted, space_id=SPACE_A, recovery_code=code)
    relabelled = dict(rec, key_id="00" * 8)
    with pytest.raises(K.BadWraps, match="key_id"):
        K.unwrap(relabelled, space_id=SPACE_A, recovery_code=code)
    retagged = dict(mac, tag="0x" + "ab" * 20)
    with pytest.raises(K.WrongSecret):
        K.unwrap(retagged, space_id=SPACE_A, session_private_key=session_key)
    as_recovery = dict(mac, kind="recovery")
    with pytest.raises(K.BadWraps, match="tag"):
        K.unwrap(as_recovery, space_id=SPACE_A, recovery_code=code)


@pytest.mark.parametrize("mutate, named", [
    (lambda w: w.pop("nonce"), "missing nonce"),
    (lambda w: w.update(extra=1), "unknown extra"),
    (lambda w: w.update(v=2), "version"),
    (lambda w: w.update(kind="paper"), "unknown kind"),
    (lambda w: w.update(nonce="zz" * 12), "nonce"),
    (lambda w: w.update(ct=w["ct"][:-2]), "ct"),
    (lambda w: w["kdf"].update(n=2**40), "scrypt n"),
    (lambda w: w["kdf"].update(salt="AB" * 16), "salt"),
])
def test_decode_wraps_names_what_is_wrong(mutate, named):
    wrap = K.wrap_with_recovery_code(K.new_data_key(), bytes(20), SPACE_A, n=SMALL_N)
    mutate(wrap)
    with pytest.raises(K.BadWraps, match=named) as err:
        K.decode_wraps(orjson.dumps([wrap]))
    assert "wrap 0" in str(err.value)


def test_decode_wraps_refuses_non_lists_and_garbage():
    with pytest.raises(K.BadWraps, match="not valid JSON"):
        K.decode_wraps(b"[{")
    with pytest.raises(K.BadWraps, match="not a list"):
        K.decode_wraps(b'{"v": 1}')
    wrap = K.wrap_with_recovery_code(K.new_data_key(), bytes(20), SPACE_A, n=SMALL_N)
    with pytest.raises(K.BadWraps, match="repeats"):
        K.encode_wraps([wrap, wrap])
    assert K.decode_wraps(orjson.dumps([wrap, wrap])) == [wrap, wrap]  # read, not made
    assert K.decode_wraps(b"[]") == []


# -- the vault -----------------------------------------------------------------------------


def test_vault_round_trip_and_expiry(home, monkeypatch):
    secret = os.urandom(32)
    data_key = K.new_data_key()
    now = 1_700_000_000.0
    expires = K.write_vault(home, SPACE_A, data_key, secret, now=now)
    assert expires == int(now) + 30 * 86400
    path = home / f"vault-{SPACE_A[:16]}.aes"
    body = orjson.loads(path.read_bytes())
    assert set(body) == {"v", "space", "expires_at", "key_id", "nonce", "ct"}
    assert (body["v"], body["space"], body["expires_at"]) == (1, SPACE_A, expires)
    assert data_key.hex() not in path.read_text()
    assert K.open_vault(home, SPACE_A, secret, now=now + 86400) == data_key

    with pytest.raises(K.VaultExpired) as err:
        K.open_vault(home, SPACE_A, secret, now=expires)
    assert ("nothing was dropped, the changes stay in the store until the next push"
            in str(err.value))
    assert SPACE_A[:16] in str(err.value)

    monkeypatch.setenv(K.VAULT_DAYS_ENV, "2")
    assert K.write_vault(home, SPACE_A, data_key, secret, now=now) == int(now) + 2 * 86400
    for bad in ("0", "-3", "soon", "1.5", ""):
        monkeypatch.setenv(K.VAULT_DAYS_ENV, bad)
        assert K.write_vault(home, SPACE_A, data_key, secret, now=now) == int(now) + 30 * 86400
    assert_all_private(home)


def test_vault_missing_says_nothing_was_dropped(home):
    with pytest.raises(K.VaultMissing) as err:
        K.open_vault(home, SPACE_A, os.urandom(32))
    assert "nothing was dropped" in str(err.value)


def test_vault_with_an_edited_expiry_is_corrupt(home):
    secret = os.urandom(32)
    now = 1_700_000_000.0
    K.write_vault(home, SPACE_A, K.new_data_key(), secret, now=now)
    path = K.vault_path(home, SPACE_A)
    body = orjson.loads(path.read_bytes())
    body["expires_at"] += 365 * 86400
    path.write_bytes(orjson.dumps(body))
    edited = path.read_bytes()
    with pytest.raises(K.VaultCorrupt) as err:
        K.open_vault(home, SPACE_A, secret, now=now)
    assert str(path) in str(err.value)
    assert path.read_bytes() == edited


def test_vault_under_another_secret_is_corrupt(home):
    K.write_vault(home, SPACE_A, K.new_data_key(), os.urandom(32))
    with pytest.raises(K.VaultCorrupt, match="another machine secret"):
        K.open_vault(home, SPACE_A, os.urandom(32))


@pytest.mark.parametrize("garble", [
    lambda raw: raw[: len(raw) // 2],
    lambda raw: b"\x00\xff" + raw,
    lambda raw: b"[]",
    lambda raw: raw.replace(b'"v":1', b'"v":"1"'),
])
def test_garbled_vault_is_named_and_left_alone(home, garble):
    secret = os.urandom(32)
    data_key = K.new_data_key()
    K.write_vault(home, SPACE_A, data_key, secret)
    path = K.vault_path(home, SPACE_A)
    garbled = garble(path.read_bytes())
    path.write_bytes(garbled)
    with pytest.raises(K.VaultCorrupt) as err:
        K.open_vault(home, SPACE_A, secret)
    message = str(err.value)
    assert str(path) in message and "\n" not in message
    assert data_key.hex() not in message and secret.hex() not in message
    assert path.read_bytes() == garbled


# -- the recovery file ---------------------------------------------------------------------


def test_recovery_file(home):
    code = K.new_recovery_code()
    space16 = SPACE_A[:16]
    path = K.write_recovery_file(home, space16, code.lower())
    assert path == K.recovery_file_path(home, space16) == home / f"RECOVERY-{space16}.txt"
    lines = path.read_text().splitlines()
    assert lines[0] == code and len(lines) == 3
    assert "kint connect --recovery-code" in lines[2]
    assert K.parse_recovery_code(lines[0]) == K.parse_recovery_code(code)
    with pytest.raises(K.BadRecoveryCode):
        K.write_recovery_file(home, space16, "not a code")
    assert_all_private(home)


def test_every_file_written_is_private(home, monkeypatch):
    """One machine's whole key set: every file under the home is 0600, the home 0700."""
    secret = K.machine_secret(home)
    K.create_session_key(home, secret=secret, scrypt_n=SMALL_N)
    K.rotate_session_key(home, secret=secret, scrypt_n=SMALL_N)
    K.write_vault(home, SPACE_A, K.new_data_key(), secret.secret)
    K.write_recovery_file(home, SPACE_A[:16], K.new_recovery_code())
    files = assert_all_private(home)
    assert {p.name for p in files} == {
        "local.secret", "session.key", "session.key.old", f"vault-{SPACE_A[:16]}.aes",
        f"RECOVERY-{SPACE_A[:16]}.txt"}
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
