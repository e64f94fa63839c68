"""Whether a command's KINT_SESSION_PASSPHRASE is the supervisor's, told without sending it.

Why: a request carried only that the passphrase is set, so a command whose passphrase
differed from the supervisor's (both set) was told nothing, while the supervisor's workers
unsealed the keys with their own: a setting given and silently not used.

How: with each request the client sends, in place of `set`, `set:NONCE:MAC`: a fresh random
nonce and HMAC-SHA256 keyed with its passphrase over a fixed label and that nonce. The
worker (wire.apply) computes the same over its own passphrase and compares in constant
time; all that comes back is one bit, as a notice line or none. `kint supervisor status`
sends one too, and the supervisor, whose environment its workers take, checks it the same
way (`passphrase_differs`).

Why this way round, the client proving and the worker comparing, rather than the supervisor
handing out a salted HMAC of its passphrase for each client to compare: then every process
that connects to the socket, and every command, would get a value to guess the supervisor's
passphrase against offline. Here nothing derived from the supervisor's passphrase leaves
its worker, and the client's MAC goes only to the process that already holds a passphrase
for the same keys. That MAC would still let whoever read it test guesses offline, so it is
kept off disk and out of every log and output: it lives in memory and in the request's
frames over the supervisor's socket (in a folder of this user's alone, mode 0700:
KINT_HOME's run/, or for a long home a private kint-UID-* folder in the temp folder), and
anyone who can read those can already read the passphrase from either process's
environment. A fresh nonce per request keeps two requests' MACs from matching each other.

A supervisor older than proofs took only `set` for a secret, and refuses a proof on every
op as it decodes the request: the client asks it again with `set` and keeps doing so while
that supervisor serves (kint.client), so such a supervisor tells nothing, as before. A cast
(a request that gets no reply) carries `set` alone: no reply could bring the bit back, nor
say that such a supervisor dropped it.
"""

from __future__ import annotations

import os
import re

# What a client sends for a secret it has and cannot prove (and what status and `kint
# config show` print for one): the schema names it SECRET_SET.
SECRET_SET = "set"
_LABEL = b"kint passphrase check v1\x00"
_NONCE_BYTES = 16
_FORM = re.compile(r"set:([0-9a-f]{32}):([0-9a-f]{64})")
_OLDER_REFUSAL = re.compile(r"argument 'settings' may only say that ([A-Z_]+) is set, never "
                            r"its value")


def proof(secret: str) -> str:
    """What a client sends for a secret it has: `set:NONCE:MAC`, a new nonce each call."""
    nonce = os.urandom(_NONCE_BYTES)
    return f"{SECRET_SET}:{nonce.hex()}:{_mac(secret, nonce).hex()}"


def well_formed(raw: str) -> bool:
    """Whether `raw` is what a client may send for a secret: `set`, or a proof."""
    return raw == SECRET_SET or is_proof(raw)


def malformed(name: str) -> tuple[str, str]:
    """(why, what to do) for a request whose value of the secret `name` is neither `set`
    nor a proof: what this version takes, never the value sent. Not the words of a
    supervisor older than proofs, which the client reads as "send `set` instead"
    (`refused_as_a_value`): this supervisor takes a proof, so a refusal here is of a value
    that is neither."""
    return (f"gives {name} as neither `set` nor its proof `set:NONCE:MAC` (NONCE 32 and MAC "
            "64 lowercase hex digits); a secret's value is never sent",
            "send `set` for a secret the caller has, or the proof "
            "kint.settings.secret_proof.proof makes of it; kint's own clients (the CLI, "
            "kint-server) send these by themselves, and a kint newer than this supervisor "
            "gets one of its own version after `kint supervisor stop`")


def is_proof(raw: str) -> bool:
    """Whether `raw` is a proof (`set:NONCE:MAC`), not a bare `set` nor anything else."""
    return _FORM.fullmatch(raw) is not None


def without_proof(raw: str) -> str:
    """What an older supervisor takes for `raw`: a bare `set` in place of a proof."""
    return SECRET_SET if is_proof(raw) else raw


def refused_as_a_value(message: str) -> str | None:
    """The secret whose value a BAD_REQUEST's `message` refuses the way a supervisor older
    than proofs does, which took anything but a bare `set` for the value ("... argument
    'settings' may only say that NAME is set, never its value"); else None. A proof is no
    such value, and a supervisor of this version takes it: the client asks the older one
    again without it (kint.client)."""
    found = _OLDER_REFUSAL.search(message)
    return found.group(1) if found is not None else None


def differs(raw: str, secret: str) -> bool:
    """Whether the proof `raw` was made from a secret other than `secret`. False for a bare
    `set` (a client that sends no proof): nothing to compare, so nothing is claimed."""
    found = _FORM.fullmatch(raw)
    if found is None:
        return False
    import hmac

    nonce, mac = bytes.fromhex(found.group(1)), bytes.fromhex(found.group(2))
    return not hmac.compare_digest(mac, _mac(secret, nonce))


# Where each line's way to give the supervisor the secret begins (kint-server hands it to
# the human).
GIVE_SAME = "; give the supervisor the same ("
GIVE_THIS = "; to use this one, give it to the supervisor ("


def notice(name: str, raw: str, running: str | None) -> str | None:
    """The line for a command that sent `raw` for the secret `name` (`set` or a proof) to
    a process running with `running`: None when they agree or nothing can be compared."""
    how = ("the service's environment file, or `kint supervisor stop` and run any command "
           "from this environment")
    if not running:
        return (f"kint: {name} is set in this environment but the supervisor runs without "
                f"it, so its keys are sealed under another local secret{GIVE_SAME}{how})")
    if differs(raw, running):
        return (f"kint: {name} in this environment differs from the supervisor's, so it is "
                f"not used: the supervisor unseals the keys with its own{GIVE_THIS}{how})")
    return None


def _mac(secret: str, nonce: bytes) -> bytes:
    # Imported here: `kint supervisor status`'s plain form loads this module only when
    # its environment has the passphrase, and the rest of its start never needs these.
    import hashlib
    import hmac

    return hmac.new(secret.encode("utf-8", "surrogateescape"), _LABEL + nonce,
                    hashlib.sha256).digest()
