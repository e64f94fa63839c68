"""Custody: who holds which key, as kint v0.3.0's docs/site/05-keys.md specifies.

One module per key: the vault message the owner's wallet signs (`vault_message`), the
key-encryption keys derived from it or from a passphrase (`keks`) and the wraps they open
(`wraps`), the data key (`data_key`) and its encrypted cache (`vault_cache`), the recovery
code (`recovery_code`), this machine's local secret (`local_secret`) and its session key
(`session_key`), and a rotation's new key until it settles (`rekey_journal`). `ids`
normalises the owner and space every derivation binds, `files` names, writes and locks the
files under KINT_HOME, and `errors` holds every refusal.
"""
