"""Who is on the other end of an ipc connection, in the kernel's words.

For a unix socket libzmq asks the kernel for the peer's credentials when the connection is
made (SO_PEERCRED on Linux, LOCAL_PEERCRED on the BSDs and macOS) and appends them to the
`Peer-Address` property of every message from that peer: `...:uid:gid:pid` on Linux,
`...:uid:gid:` where the OS gives no pid. A process can lie in what it writes, not in
these; where the OS says nothing, the answer is None and the token alone decides.

Both checks are made once per connection, as it is made: `admit_only_this_user` at
accept, a worker's pid at its hello. Nothing is checked per message, and nothing per
message could do better: the kernel keeps a connection's credentials from the moment it
was made (SO_PEERCRED is the connecting process's, then), so a descriptor that later
reached another process would still carry them. A connection reaches another process
only through its holder: ZeroMQ opens every descriptor close-on-exec, so a client that
runs a program (a kint-server's harness, a hook) hands it nothing; a fork is the same
user's same program; and passing the descriptor on (SCM_RIGHTS) is a process of this
user choosing to relay for another, which it could as well do by forwarding requests.
Another user cannot take over a connection of ours without such a process's help, nor
connect one of their own (refused at accept, whatever the folder's mode). The back
socket's token covers the rest: a worker's route and every message it sends are
believed only with the secret of that spawn (kint.protocol.worker_wire).
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
