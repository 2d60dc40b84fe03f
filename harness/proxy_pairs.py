"""The proxied connections of ``harness.proxy.TcpProxy`` and the bytes between them: each
client and its connection to the target, read, buffered (at most ``BUFFER_LIMIT`` waiting for
a side), written, and closed half by half as each side sends EOF. All of it runs on the
proxy's thread."""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
from dataclasses import dataclass, field

BUFFER_LIMIT = 1 << 20  # stop reading from a side while this much waits for its peer
RECV_SIZE = 65536
CONNECT_TIMEOUT_S = 5.0


def reset_socket(sock: socket.socket | None) -> None:
    """Close ``sock`` with an RST (SO_LINGER 0), ignoring errors."""
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


@dataclass(eq=False)
class Side:
    """One socket of a proxied pair and the bytes waiting to be written to it."""

    sock: socket.socket
    outbox: bytearray = field(default_factory=bytearray)
    eof: bool = False  # it sent EOF: nothing more is read from it
    shut: bool = False  # we sent it EOF (after its outbox drained)
    mask: int = 0  # what the selector watches it for


@dataclass(eq=False)
class Pair:
    """A client connection and its connection to the target (None until connected)."""

    client: Side
    upstream: Side | None = None

    def sides(self) -> list[Side]:
        """The sockets of this pair that exist."""
        return [self.client] if self.upstream is None else [self.client, self.upstream]

    def peer(self, side: Side) -> Side | None:
        """The other side of ``side``."""
        return self.upstream if side is self.client else self.client


class Forwarder:
    """The pairs of one proxy, watched by its ``selector``, forwarded to ``target``."""

    def __init__(self, selector: selectors.BaseSelector, target: tuple[str, int]) -> None:
        self._selector = selector
        self.target = target
        self.pairs: set[Pair] = set()

    def connect_upstream(self, pair: Pair) -> None:
        """Connect to the target (loopback: a blocking connect is immediate)."""
        try:
            upstream = socket.create_connection(self.target, timeout=CONNECT_TIMEOUT_S)
        except OSError:
            self.drop(pair, reset=True)  # the target refuses: so does the proxy
            return
        upstream.setblocking(False)
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pair.upstream = Side(upstream)

    def update_interest(self, paused: bool) -> None:
        """Watch each socket for what it may do now; nothing at all while paused."""
        for pair in list(self.pairs):
            for side in pair.sides():
                peer = pair.peer(side)
                mask = 0
                if not paused and peer is not None:
                    if not side.eof and len(peer.outbox) < BUFFER_LIMIT:
                        mask |= selectors.EVENT_READ
                    if side.outbox:
                        mask |= selectors.EVENT_WRITE
                if mask == side.mask:
                    continue
                if side.mask == 0:
                    self._selector.register(side.sock, mask, (pair, side))
                elif mask == 0:
                    self._selector.unregister(side.sock)
                else:
                    self._selector.modify(side.sock, mask, (pair, side))
                side.mask = mask

    def read(self, pair: Pair, side: Side) -> None:
        """Move what ``side`` sent into its peer's outbox; pass on its EOF."""
        peer = pair.peer(side)
        assert peer is not None
        try:
            data = side.sock.recv(RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.drop(pair, reset=True)
            return
        if data:
            peer.outbox += data
            self.write(pair, peer)
            return
        side.eof = True
        self.finish_half(pair, peer)

    def write(self, pair: Pair, side: Side) -> None:
        """Write what waits for ``side``; pass on its peer's EOF once drained."""
        if not side.outbox:
            return
        try:
            sent = side.sock.send(side.outbox)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.drop(pair, reset=True)
            return
        del side.outbox[:sent]
        if not side.outbox:
            peer = pair.peer(side)
            if peer is not None and peer.eof:
                self.finish_half(pair, side)

    def finish_half(self, pair: Pair, side: Side) -> None:
        """Pass an EOF on to ``side`` once what it is owed is written; close a done pair."""
        if side.outbox or side.shut:
            return
        with contextlib.suppress(OSError):
            side.sock.shutdown(socket.SHUT_WR)
        side.shut = True
        if all(s.eof and s.shut for s in pair.sides()):
            self.drop(pair, reset=False)

    def drop(self, pair: Pair, reset: bool) -> None:
        """Forget ``pair`` and close its sockets (with an RST when ``reset``)."""
        self.pairs.discard(pair)
        for side in pair.sides():
            if side.mask:
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(side.sock)
                side.mask = 0
            if reset:
                reset_socket(side.sock)
            else:
                with contextlib.suppress(OSError):
                    side.sock.close()
