"""Who is on the other end of an ipc connection, in the kernel's words.

For a unix socket libzmq asks the kernel for the peer's credentials when the connection is
made (SO_PEERCRED on Linux, LOCAL_PEERCRED on the BSDs and macOS) and appends them to the
`Peer-Address` property of every message from that peer: `...:uid:gid:pid` on Linux,
`...:uid:gid:` where the OS gives no pid. A process can lie in what it writes, not in
these; where the OS says nothing, the answer is None and the token alone decides.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import zmq


@dataclass(frozen=True)
class PeerCredentials:
    uid: int
    gid: int | None
    pid: int | None


def peer_credentials(frame: zmq.Frame) -> PeerCredentials | None:
    """The credentials of the process that sent `frame` (received with copy=False)."""
    try:
        address = frame.get("Peer-Address")
    except (zmq.ZMQError, AttributeError, TypeError):
        return None
    if not isinstance(address, str):
        return None
    parts = address.rsplit(":", 3)
    if len(parts) != 4 or not parts[1].isdigit():
        return None
    _, uid, gid, pid = parts
    return PeerCredentials(uid=int(uid), gid=int(gid) if gid.isdigit() else None,
                           pid=int(pid) if pid.isdigit() else None)


def admit_only_this_user(sock: zmq.Socket) -> bool:
    """Have ZeroMQ close, at accept, every ipc connection whose peer the kernel says runs
    as another user: the socket folder's 0700 already keeps them out, but a folder loosened
    under a running supervisor (a `chmod -R` on the home, a restore from a backup) would
    otherwise let any local user's requests in until the next check of the folder. The
    check is the kernel's (SO_PEERCRED), made once per connection, nothing per message.

    False where this libzmq cannot ask the kernel (built without peer credentials): the
    folder's mode is then the only guard, and the caller says so in the log."""
    try:
        sock.setsockopt(zmq.IPC_FILTER_UID, os.getuid())
    except (zmq.ZMQError, AttributeError):
        return False
    return True
