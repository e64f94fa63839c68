"""The front door's cost on the ordinary path (kint/supervisor/front_door.py): what the
supervisor's loop spends on the door for each client that connects, asks once and leaves,
as every CLI command does; at 64 and at 1,000 descriptors open in the process.

Three doors, side by side in one run, on a real ROUTER (the door's monitor on it, as the
supervisor builds it) and a DEALER per round of this process:
- `listed`: the door as it was in session 26, listing /proc/self/fd at every accept and
  every disconnect (`recount` before each look);
- `counted`: the door now, which moves its last listing by the clients its monitor told
  and lists again only near the margin, after RECOUNT_S, or after a spawn;
- `none`: the monitor's events read, no look at all: the run without the door's look.
Reported per round: the wall time of the whole round (connect, request, answer,
disconnect, the loop's share), its median over repeated blocks, and each door's ratio to
`none`; and one listing's own cost at each count. A box's other load moves these figures:
the blocks alternate the doors so that load falls on all three alike.

    .venv/bin/python bench/bench_front_door.py [--quick]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import zmq

from kint.open_files import open_files
from kint.supervisor.front_door import FrontDoor

COUNTS = (64, 1000)


def _told(door: FrontDoor, path: Path, mode: str, clients: int) -> None:
    """Read the monitor as the loop does (a look when it is readable) until it has told
    the door of `clients` connected."""
    assert door.monitor is not None
    while door.clients != clients:
        door.monitor.poll(1000)
        if mode == "none":
            door._count()
            continue
        if mode == "listed":
            door.recount()
        door.on_events(path)


def _round(ctx: zmq.Context, front: zmq.Socket, door: FrontDoor, path: Path,
           mode: str) -> None:
    """One client: connect, ask, be answered, leave; the door told of its accept and its
    disconnect as the loop tells it."""
    client = ctx.socket(zmq.DEALER)
    client.setsockopt(zmq.LINGER, 0)
    client.connect(f"ipc://{path}")
    client.send(b"ping")
    identity, body = front.recv_multipart()
    front.send_multipart([identity, body])
    client.recv()
    _told(door, path, mode, 1)
    client.close(linger=0)
    _told(door, path, mode, 0)


def _block(ctx: zmq.Context, front: zmq.Socket, door: FrontDoor, path: Path, mode: str,
           rounds: int) -> float:
    began = time.perf_counter_ns()
    for _ in range(rounds):
        _round(ctx, front, door, path, mode)
    return (time.perf_counter_ns() - began) / rounds / 1000


def _listing_us(times: int = 2000) -> float:
    began = time.perf_counter_ns()
    for _ in range(times):
        open_files()
    return (time.perf_counter_ns() - began) / times / 1000


def _at(count: int, blocks: int, rounds: int) -> dict[str, Any]:
    files = open_files()
    assert files is not None, "no open-file limit to keep under"
    fillers = [os.open(os.devnull, os.O_RDONLY) for _ in range(max(0, count - files.open))]
    ctx = zmq.Context()
    front = ctx.socket(zmq.ROUTER)
    front.setsockopt(zmq.LINGER, 0)
    door = FrontDoor(front)
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "kint.sock"
            door.prepare()
            front.bind(f"ipc://{path}")
            opened = open_files()
            assert opened is not None
            per: dict[str, list[float]] = {"listed": [], "counted": [], "none": []}
            listings = {"listed": 0, "counted": 0}
            for block in range(blocks + 1):
                for mode in per:
                    before = door.listings
                    took = _block(ctx, front, door, path, mode, rounds)
                    if block:  # the first block of each warms up
                        per[mode].append(took)
                        if mode in listings:
                            listings[mode] += door.listings - before
            none = statistics.median(per["none"])
            return {"open": opened.open, "limit": opened.limit, "listing_us": _listing_us(),
                    "rounds": blocks * rounds,
                    **{f"{mode}_us": statistics.median(t) for mode, t in per.items()},
                    **{f"{mode}_ratio": statistics.median(t) / none
                       for mode, t in per.items() if mode != "none"},
                    **{f"{mode}_listings": n for mode, n in listings.items()}}
    finally:
        door.shut(None)
        front.close(linger=0)
        ctx.term()
        for fd in fillers:
            os.close(fd)


def run(quick: bool = False) -> dict[str, Any]:
    """The figures at each count, under `counts` (as `main` prints them), with the
    `target` and `env` run_all.py reads of every benchmark: no target is set, and this
    one starts no supervisor (its own ROUTER and door in this process)."""
    blocks, rounds = (5, 200) if quick else (15, 400)
    counts = {str(count): _at(count, blocks, rounds) for count in COUNTS}
    return {"counts": counts, "params": {"blocks": blocks, "rounds": rounds, "quick": quick},
            "target": {"description": "none set; the door now against no look at all, "
                                      "reported", "met": None},
            "env": {}}


def table_rows(result: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """run_all.py's lines: a round with the door now, against no look at all, at each
    count of descriptors open."""
    return [(f"front door: a client's round at {row['open']} fds open (us)",
             f"{row['counted_us']:.0f}", f"no look {row['none_us']:.0f}", "",
             f"{row['counted_ratio']:.2f}x") for row in result["counts"].values()]


def main() -> None:
    result = run("--quick" in sys.argv)
    print(f"{'open fds':>8} {'listing':>9} {'none':>9} {'counted':>9} {'listed':>9} "
          f"{'counted/none':>12} {'listed/none':>11} {'listings c/l':>13}")
    for row in result["counts"].values():
        print(f"{row['open']:>8} {row['listing_us']:>7.1f}us {row['none_us']:>7.1f}us "
              f"{row['counted_us']:>7.1f}us {row['listed_us']:>7.1f}us "
              f"{row['counted_ratio']:>12.3f} {row['listed_ratio']:>11.3f} "
              f"{row['counted_listings']:>6}/{row['listed_listings']}")


if __name__ == "__main__":
    main()
