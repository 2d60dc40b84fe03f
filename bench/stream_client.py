"""Load generator for the stream benchmark: N concurrent SSE clients on one epoll loop.

A single-threaded epoll loop keeps the generator's own CPU use low: it shares the machine
with the server it measures. Each client sends an HTTP/1.0 request (the body is then the
raw event stream, no chunked framing), reads events, and records for every ``id:`` line
the delay between the board's publication (its id is the publish time in epoch ms) and
its arrival. Prints JSON lines: one when every client is connected, one with the raw figures (the
latency samples included) for bench.stream to pool across generator processes.

    python -m bench.stream_client --port P --key K --clients 1000 --seconds 20
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import select
import socket
import sys
import time

ID_MARK = b"id: "
INPUT_MARK = b'"newestInputMs":'


class Conn:
    """One client's socket and parse state."""

    __slots__ = ("buffer", "headers_done", "last_board", "last_seq", "seen", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""
        self.headers_done = False
        self.last_board = 0.0
        self.last_seq = 0
        self.seen: set[int] = set()


def main() -> int:
    """Open the streams, measure for ``--seconds``, print the figures as JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--window", help="the stream of this window (?window=); none: 5m's")
    parser.add_argument(
        "--clock-offset-ms", type=int, default=0, help="the service's CLOCK_OFFSET_MS (its now)"
    )
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument(
        "--from",
        dest="since",
        choices=("publish", "input"),
        default="publish",
        help="latency from the board's publication (its id) or from its newest input's "
        "arrival at the service (its newestInputMs)",
    )
    args = parser.parse_args()
    offset_ms = args.clock_offset_ms  # the service's clock: its stamps are on it

    request = (
        f"GET /api/probboard/stream{f'?window={args.window}' if args.window else ''} HTTP/1.0\r\n"
        "Host: 127.0.0.1\r\n"
        f"X-API-Key: {args.key}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    poller = select.epoll()
    conns: dict[int, Conn] = {}
    errors: dict[str, int] = {}
    latencies: list[float] = []
    skipped = 0
    connected = 0
    measuring = False

    def error(kind: str) -> None:
        errors[kind] = errors.get(kind, 0) + 1

    def close(fd: int, kind: str | None) -> None:
        conn = conns.pop(fd, None)
        if conn is None:
            return
        if kind:
            error(kind)
        with contextlib.suppress(OSError):
            poller.unregister(fd)
        conn.sock.close()

    def pump(timeout: float) -> None:
        nonlocal connected, skipped
        for fd, mask in poller.poll(timeout):
            conn = conns.get(fd)
            if conn is None:
                continue
            if mask & select.EPOLLOUT:
                try:
                    conn.sock.send(request)
                except OSError as exc:
                    close(fd, f"connect:{errno.errorcode.get(exc.errno or 0, 'err')}")
                    continue
                poller.modify(fd, select.EPOLLIN)
                continue
            try:
                data = conn.sock.recv(262144)
            except BlockingIOError:
                continue
            except OSError:
                close(fd, "io")
                continue
            if not data:
                close(fd, "closed_by_server")
                continue
            now = time.time() * 1000.0 + offset_ms
            if not conn.headers_done:
                conn.buffer += data
                head, sep, rest = conn.buffer.partition(b"\r\n\r\n")
                if not sep:
                    continue
                if b" 200 " not in head.split(b"\r\n", 1)[0] + b" ":
                    close(fd, "status:" + head.split(b"\r\n", 1)[0].decode(errors="replace"))
                    continue
                conn.headers_done = True
                connected += 1
                data, conn.buffer = rest, b""
            data = conn.buffer + data
            start = 0
            while True:
                at = data.find(ID_MARK, start)
                if at < 0:
                    break
                end = data.find(b"\n", at)
                if end < 0:
                    break
                seq = int(data[at + 4 : end])
                conn.last_board = now
                conn.last_seq = max(conn.last_seq, seq)
                if measuring and seq not in conn.seen:
                    conn.seen.add(seq)
                    since = float(seq)
                    if args.since == "input":
                        # In the same read as its id, or the sample is skipped (counted).
                        mark = data.find(INPUT_MARK, end)
                        following = data.find(ID_MARK, end)
                        close_at = data.find(b",", mark) if mark >= 0 else -1
                        value = data[mark + len(INPUT_MARK) : close_at] if close_at > 0 else b""
                        if mark < 0 or (0 <= following < mark) or not value.isdigit():
                            skipped += 1
                            start = end
                            continue
                        since = float(value)
                    latencies.append(now - since)
                start = end
            # Keep a short tail in case an "id:" line was cut by the read.
            conn.buffer = data[-64:] if data.rfind(b"\n") < len(data) - 1 else b""

    started = time.monotonic()
    for number in range(args.clients):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        code = sock.connect_ex(("127.0.0.1", args.port))
        if code not in (0, errno.EINPROGRESS):
            error(f"connect:{errno.errorcode.get(code, code)}")
            sock.close()
            continue
        conns[sock.fileno()] = Conn(sock)
        poller.register(sock.fileno(), select.EPOLLOUT)
        if number % args.batch == args.batch - 1:
            pump(0.05)
    deadline = time.monotonic() + 120
    while connected + sum(errors.values()) < args.clients and time.monotonic() < deadline:
        pump(0.1)
    ramp_s = time.monotonic() - started
    print(json.dumps({"phase": "connected", "connected": connected}), flush=True)
    settle = time.monotonic() + 2.0
    while time.monotonic() < settle:
        pump(0.1)
    measuring = True
    measure_start = time.time() * 1000.0 + offset_ms
    stop = time.monotonic() + args.seconds
    while time.monotonic() < stop:
        pump(0.1)
    measuring = False
    measure_end = time.time() * 1000.0 + offset_ms
    live = list(conns.values())
    stalled = sum(1 for c in live if measure_end - c.last_board > 2000)
    # The newest board: what any client had when measuring stopped; after a second more,
    # does every client have it (or a newer one)?
    newest = max((c.last_seq for c in live), default=0)
    drain = time.monotonic() + 1.0
    while time.monotonic() < drain:
        pump(0.1)
    have_newest = sum(1 for c in live if c.last_seq >= newest)
    published: set[int] = set().union(*(c.seen for c in live)) if live else set()
    per_client = [len(c.seen) for c in live]
    for fd in list(conns):
        close(fd, None)
    result = {
        "phase": "done",
        "clients": args.clients,
        "connected": connected,
        "errors": errors,
        "ramp_s": round(ramp_s, 1),
        "measure_s": round((measure_end - measure_start) / 1000.0, 1),
        "boards_published": len(published),
        "boards_received": sum(per_client),
        "stalled": stalled,
        "latencies": [round(v, 2) for v in latencies],
        "skipped": skipped,
        "have_newest": have_newest,
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
