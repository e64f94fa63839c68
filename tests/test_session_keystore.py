"""The session keystore (issue 16): kint must never refuse a keystore that decrypts.

eth-account writes the AES-CTR iv as the hex of an integer, so about one keystore in 256
has a 15-byte (30 hex digit) iv; an earlier reader demanded 16 bytes and refused such a
machine's session key for good. kint.custody.session_key writes every fixed-size field at
full length and reads what the standard's writers write; a truncated or garbled file is
still refused with the file named.

The keystores here use scrypt n = 2 (kint's production cost is 2^18, ~1 s each): the reader
and the format are under test, not the cost. Each KINT_HOME is a tmp_path. The one-in-256
draw is made every time (`chosen_random`) rather than waited for over thousands of random
keystores: a sweep of random ones still checks that whatever else kint's writer meets opens.
"""

from __future__ import annotations

import json
import os
import stat

import eth_keyfile.keyfile
import orjson
import pytest
from eth_account import Account

from kint.custody import session_key as SK
from kint.custody.errors import (NoLocalPassphrase, SessionKeyCorrupt, SessionKeyLocked,
                                 SessionKeyMissing)
from kint.custody.local_secret import LocalSecret

LOW_N = 2
SECRET = LocalSecret("a local passphrase", "KINT_SESSION_PASSPHRASE")
KINT_WAY = 256
RAW = 300
SALT = bytes(range(16))
SHORT_IV = b"\0" + bytes(range(101, 116))
SHORTER_IV = b"\0\0" + bytes(range(101, 115))  # one draw in 65536


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("KINT_SESSION_PASSPHRASE", "KINT_NO_KEYCHAIN"):
        monkeypatch.delenv(var, raising=False)


def _raw_keystore(private_key: bytes, password: str = SECRET.password) -> dict:
    """A keystore exactly as eth-account writes it."""
    return Account.encrypt(private_key, password, kdf="scrypt", iterations=LOW_N)


@pytest.fixture
def chosen_random(monkeypatch):
    """Make eth-keyfile draw the given bytes for its salt and iv (16 bytes each), so a test
    gets, every time, the keystore eth-account writes about once in 256 tries."""
    draws: list[bytes] = []

    def get_random_bytes(n: int) -> bytes:
        return draws.pop(0) if draws else os.urandom(n)

    monkeypatch.setattr(eth_keyfile.keyfile.Random, "get_random_bytes", get_random_bytes)
    return draws


def _short_iv_keystore(draws: list[bytes], key: bytes | None = None) -> tuple[bytes, dict]:
    """A keystore written by eth-account whose iv starts with a zero byte, so that
    eth-account writes it as 15 bytes (30 hex digits)."""
    key = key or os.urandom(32)
    draws[:] = [SALT, SHORT_IV]
    data = _raw_keystore(key)
    assert data["crypto"]["cipherparams"]["iv"] == SHORT_IV.hex()[2:]
    return key, data


@pytest.mark.parametrize("iv", [SHORT_IV, SHORTER_IV], ids=["15-byte", "14-byte"])
def test_a_keystore_kint_makes_from_a_short_iv_draw_is_full_length_and_opens(
        tmp_path, chosen_random, iv):
    """The draw that makes eth-account write a short iv, made through kint's own writer."""
    home = tmp_path / "kint"
    chosen_random[:] = [SALT, iv]
    address, existed = SK.create_session_key(home, secret=SECRET, scrypt_n=LOW_N)
    assert not existed and not chosen_random  # both draws were the chosen ones
    written = orjson.loads((home / "session.key").read_bytes())
    assert written["crypto"]["cipherparams"]["iv"] == iv.hex()  # 32 digits, zeros kept
    assert SK.session_address(home) == address
    assert SK.unlock_session_key(home, secret=SECRET).address == address


def test_random_keystores_made_the_way_kint_does_all_open(tmp_path):
    addresses = set()
    for i in range(KINT_WAY):
        home = tmp_path / f"m{i}"
        address, existed = SK.create_session_key(home, secret=SECRET, scrypt_n=LOW_N)
        assert not existed
        path = home / "session.key"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        written = orjson.loads(path.read_bytes())
        assert len(written["crypto"]["cipherparams"]["iv"]) == 32  # always full length
        assert SK.session_address(home) == address
        assert SK.unlock_session_key(home, secret=SECRET).address == address
        addresses.add(address)
    assert len(addresses) == KINT_WAY


def test_keystores_as_eth_account_writes_them_all_open(tmp_path):
    path = tmp_path / "session.key"
    short = 0
    for _ in range(RAW):
        data = _raw_keystore(os.urandom(32))
        short += len(data["crypto"]["cipherparams"]["iv"]) < 32
        path.write_text(json.dumps(data))
        read = SK.read_keystore(path)
        account = SK.decrypt_keystore(read, SECRET.password, path, SECRET.source)
        assert account.address == SK.keystore_address(read)
        assert account.address.lower() == "0x" + data["address"].lower()
    print(f"{short} of {RAW} keystores from eth-account had a short iv")


def test_a_short_iv_keystore_written_by_eth_account_opens(tmp_path, chosen_random):
    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    key, data = _short_iv_keystore(chosen_random)
    assert Account.decrypt(data, SECRET.password) == key  # the library opens it...
    (home / "session.key").write_text(json.dumps(data))
    address = Account.from_key(key).address
    assert SK.session_address(home) == address  # ...and so does kint
    account = SK.unlock_session_key(home, secret=SECRET)
    assert account.address == address and bytes(account.key) == key
    assert SK.create_session_key(home, secret=SECRET, scrypt_n=LOW_N) == (address, True)


def test_other_spellings_the_standard_allows_open(tmp_path, chosen_random):
    """0x prefixes, upper-case hex, "Crypto" (older geth), leading zero bytes dropped from
    the ciphertext, an odd number of iv digits: all decrypt, so all open."""
    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    key, data = _short_iv_keystore(chosen_random)
    crypto = data.pop("crypto")
    crypto["cipherparams"]["iv"] = "0x" + crypto["cipherparams"]["iv"].upper()
    crypto["kdfparams"]["salt"] = "0X" + crypto["kdfparams"]["salt"].upper()
    crypto["ciphertext"] = crypto["ciphertext"].upper()
    data["Crypto"] = crypto
    data["address"] = "0x" + data["address"].lower()
    (home / "session.key").write_text(json.dumps(data))
    assert bytes(SK.unlock_session_key(home, secret=SECRET).key) == key

    iv = crypto["cipherparams"]["iv"][2:].lower()
    crypto["cipherparams"]["iv"] = iv.lstrip("0") or "0"  # as hex(int) would write it
    (home / "session.key").write_text(json.dumps(data))
    assert bytes(SK.unlock_session_key(home, secret=SECRET).key) == key

    # A ciphertext with a leading zero byte, written without it. AES-CTR XORs the key with
    # a keystream fixed by the salt and iv, so a key whose first byte equals the keystream's
    # seals to a ciphertext starting with 00.
    probe, first = _short_iv_keystore(chosen_random)
    stream0 = bytes.fromhex(first["crypto"]["ciphertext"])[0] ^ probe[0]
    key, raw = _short_iv_keystore(chosen_random, bytes([stream0]) + os.urandom(31))
    assert raw["crypto"]["ciphertext"].startswith("00")
    raw["crypto"]["ciphertext"] = raw["crypto"]["ciphertext"][2:]
    (home / "session.key").write_text(json.dumps(raw))
    assert bytes(SK.unlock_session_key(home, secret=SECRET).key) == key


@pytest.mark.parametrize("garble, why", [
    (lambda b: b[: len(b) // 2], "not valid JSON"),
    (lambda b: b[:-3], "not valid JSON"),
    (lambda b: b"", "not valid JSON"),
    (lambda b: b.replace(b'"version": 3', b'"version": 4'), "not a V3 keystore"),
    (lambda b: b.replace(b'"mac"', b'"maq"'), "no ciphertext or mac"),
    (lambda b: b.replace(b'"iv": "', b'"iv": "zz'), "no valid iv"),
    (lambda b: b.replace(b'"iv": "', b'"iv": "0102'), "longer than 16 bytes"),
    (lambda b: b.replace(b'"ciphertext": "', b'"ciphertext": "ab'), "longer than 32 bytes"),
    (lambda b: b.replace(b'"n": 2,', b'"n": 3,'), "scrypt parameters"),
    (lambda b: b.replace(b'"n": 2,', b'"n": 1073741824,'), "scrypt parameters"),
    (lambda b: b.replace(b'"kdf": "scrypt"', b'"kdf": "argon2"'), "key derivation"),
    (lambda b: b"[1, 2, 3]", "not a JSON object"),
])
def test_a_truncated_or_garbled_keystore_is_refused_by_name(tmp_path, garble, why):
    home = tmp_path / "kint"
    SK.create_session_key(home, secret=SECRET, scrypt_n=LOW_N)
    path = home / "session.key"
    path.write_bytes(garble(path.read_bytes()))
    before = path.read_bytes()
    with pytest.raises(SessionKeyCorrupt, match=why) as err:
        SK.unlock_session_key(home, secret=SECRET)
    assert str(err.value).startswith(f"{path} is not a session key kint can read: it ")
    with pytest.raises(SessionKeyCorrupt):
        SK.create_session_key(home, secret=SECRET, scrypt_n=LOW_N)  # never replaced
    assert path.read_bytes() == before


def test_a_wrong_local_secret_is_locked_not_corrupt(tmp_path):
    home = tmp_path / "kint"
    SK.create_session_key(home, secret=SECRET, scrypt_n=LOW_N)
    other = LocalSecret("another passphrase", "local.secret")
    with pytest.raises(SessionKeyLocked) as err:
        SK.unlock_session_key(home, secret=other)
    assert str(home / "session.key") in str(err.value) and "local.secret" in str(err.value)


def test_create_exists_and_missing(tmp_path, monkeypatch):
    home = tmp_path / "kint"
    with pytest.raises(SessionKeyMissing) as err:
        SK.session_address(home)
    assert str(home / "session.key") in str(err.value)
    assert str(err.value).startswith("no session key on this machine")  # 14-agents.md
    address, existed = SK.create_session_key(home, secret=SECRET, scrypt_n=LOW_N)
    assert not existed and stat.S_IMODE(home.stat().st_mode) == 0o700
    assert SK.create_session_key(home, secret=SECRET, scrypt_n=LOW_N) == (address, True)
    # Unlocking only loads the local secret: with none anywhere, it says what to set.
    with pytest.raises(NoLocalPassphrase, match="set KINT_SESSION_PASSPHRASE"):
        SK.unlock_session_key(home)
    monkeypatch.setenv("KINT_SESSION_PASSPHRASE", SECRET.password)
    assert SK.unlock_session_key(home).address == address


def test_create_with_the_local_secret_file(tmp_path):
    home = tmp_path / "kint"
    address, _ = SK.create_session_key(home, scrypt_n=LOW_N)
    assert stat.S_IMODE((home / "local.secret").stat().st_mode) == 0o600
    assert SK.unlock_session_key(home).address == address


def test_rotate_moves_the_key_aside_and_makes_a_new_one(tmp_path):
    home = tmp_path / "kint"
    first, _ = SK.create_session_key(home, secret=SECRET, scrypt_n=LOW_N)
    old, new = SK.rotate_session_key(home, secret=SECRET, scrypt_n=LOW_N)
    assert old == first and new != first
    assert SK.session_address(home) == new
    assert SK.session_address(home, old=True) == first
    assert SK.unlock_session_key(home, old=True, secret=SECRET).address == first
    assert SK.unlock_session_key(home, secret=SECRET).address == new
    for name in ("session.key", "session.key.old"):
        assert stat.S_IMODE((home / name).stat().st_mode) == 0o600
    old2, newer = SK.rotate_session_key(home, secret=SECRET, scrypt_n=LOW_N)
    assert old2 == new and SK.session_address(home, old=True) == new
    assert sorted(p.name for p in home.iterdir() if p.name.startswith(("session.", ".session"))
                  ) == ["session.key", "session.key.old"]


def test_rotate_moves_a_garbled_key_aside(tmp_path):
    home = tmp_path / "kint"
    SK.create_session_key(home, secret=SECRET, scrypt_n=LOW_N)
    (home / "session.key").write_bytes(b"{garbled")
    old, new = SK.rotate_session_key(home, secret=SECRET, scrypt_n=LOW_N)
    assert old is None and SK.session_address(home) == new
    assert (home / "session.key.old").read_bytes() == b"{garbled"
