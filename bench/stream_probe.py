"""Probe clients for the stream benchmark: a few SSE clients that read every board whole.

The load generator (``bench.stream_client``) looks only at each event's id and
``newestInputMs``, so that a thousand clients fit beside the server. A probe parses every
board it receives and keeps, per board: its arrival time, its id (the publish time, epoch
ms), its ``newestInputMs`` and each row's best bids, so that ``bench.stream`` can tell which
change at the fake CLOB each board shows (``bench.market_maker.change_delays``) and how far
apart boards were published. It speaks the load generator's protocol: one JSON line when
every probe is connected, one with the figures (``bench.stream.merge`` pools both kinds).

    python -m bench.stream_probe --port P --key K --clients 4 --seconds 20
"""

from __future__ import annotations

import argparse
import json
import selectors
import socket
import sys
import time
from typing import Any

from harness.spans import FIVE_MINUTES

SETTLE_S = 2.0  # as bench.stream_client: connected, then this long before measuring
DRAIN_S = 1.0
STALLED_MS = 2000


class Probe:
    """One stream: its socket, unparsed bytes and the boards it received."""

    def __init__(self, port: int, request: bytes) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.sendall(request)
        self.sock.setblocking(False)
        self.buffer = b""
        self.headers_done = False
        self.ok = True
        self.boards: list[dict[str, Any]] = []
        self.seen: set[int] = set()

    def feed(self, data: bytes, now_ms: float) -> None:
        """Take bytes just read at ``now_ms``; record each complete board event."""
        self.buffer += data
        if not self.headers_done:
            head, sep, rest = self.buffer.partition(b"\r\n\r\n")
            if not sep:
                return
            self.ok = b" 200 " in head.split(b"\r\n", 1)[0] + b" "
            self.headers_done, self.buffer = True, rest
        *events, self.buffer = self.buffer.split(b"\n\n")
        for event in events:
            fields = dict(
                line.split(": ", 1) for line in event.decode().split("\n") if ": " in line
            )
            if fields.get("event") != "board" or "id" not in fields:
                continue
            board_id = int(fields["id"])
            if board_id in self.seen:  # the same board re-sent as it ages (stale)
                continue
            self.seen.add(board_id)
            document = json.loads(fields["data"])
            self.boards.append(
                {
                    "at": now_ms,
                    "id": board_id,
                    "newest": document.get("newestInputMs"),
                    "rows": {
                        item["symbol"]: {"up_bid": item["up_bid"], "down_bid": item["down_bid"]}
                        for item in document["items"]
                    },
                }
            )


def main() -> int:
    """Open the probes, measure for ``--seconds``, print the figures as JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--window", help="the stream of this window (?window=); none: 5m's")
    parser.add_argument(
        "--clock-offset-ms", type=int, default=0, help="the service's CLOCK_OFFSET_MS (its now)"
    )
    args = parser.parse_args()
    offset_ms = args.clock_offset_ms  # the service's clock: its stamps are on it
    request = (
        f"GET /api/probboard/stream{f'?window={args.window}' if args.window else ''} HTTP/1.0\r\n"
        "Host: 127.0.0.1\r\n"
        f"X-API-Key: {args.key}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    selector = selectors.DefaultSelector()
    probes: list[Probe] = []
    errors: dict[str, int] = {}
    for _ in range(args.clients):
        try:
            probe = Probe(args.port, request)
        except OSError as exc:
            kind = f"connect:{type(exc).__name__}"
            errors[kind] = errors.get(kind, 0) + 1
            continue
        probes.append(probe)
        selector.register(probe.sock, selectors.EVENT_READ, probe)

    def pump(until: float) -> None:
        while (left := until - time.monotonic()) > 0:
            for key, _ in selector.select(min(left, 0.1)):
                probe: Probe = key.data
                try:
                    data = probe.sock.recv(262144)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    errors["closed_by_server"] = errors.get("closed_by_server", 0) + 1
                    selector.unregister(probe.sock)
                    continue
                probe.feed(data, (time.time() * 1000.0 + offset_ms))

    deadline = time.monotonic() + 30
    while not all(p.headers_done for p in probes) and time.monotonic() < deadline:
        pump(time.monotonic() + 0.1)
    connected = sum(1 for p in probes if p.headers_done and p.ok)
    print(json.dumps({"phase": "connected", "connected": connected}), flush=True)
    pump(time.monotonic() + SETTLE_S)
    start_ms = time.time() * 1000.0 + offset_ms
    pump(time.monotonic() + args.seconds)
    end_ms = time.time() * 1000.0 + offset_ms
    newest = max((b["id"] for p in probes for b in p.boards), default=0)
    last = [max((b["at"] for b in p.boards), default=0.0) for p in probes]
    pump(time.monotonic() + DRAIN_S)
    measured = [[b for b in p.boards if start_ms <= b["at"] <= end_ms] for p in probes]
    latencies = [
        round(b["at"] - b["newest"], 2) for boards in measured for b in boards if b["newest"]
    ]
    for probe in probes:
        probe.sock.close()
    print(
        json.dumps(
            {
                "phase": "done",
                "window": args.window or FIVE_MINUTES.name,
                "clients": args.clients,
                "connected": connected,
                "errors": errors,
                "measure_s": round((end_ms - start_ms) / 1000.0, 1),
                "measure_ms": [start_ms, end_ms],
                "boards_published": len({b["id"] for boards in measured for b in boards}),
                "boards_received": sum(len(boards) for boards in measured),
                "stalled": sum(1 for at in last if end_ms - at > STALLED_MS),
                "latencies": latencies,
                "skipped": 0,
                "have_newest": sum(1 for p in probes if p.boards and p.boards[-1]["id"] >= newest),
                "boards": [p.boards for p in probes],
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
