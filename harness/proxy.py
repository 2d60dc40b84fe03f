"""A pausable TCP proxy on a free loopback port, for fault tests (a hung or refusing server).

``TcpProxy(target_port)`` listens on ``127.0.0.1:<free port>`` and forwards every connection
to the target (PostgreSQL, a test redis-server). Its modes:

- forwarding (the start, and after ``resume``);
- ``pause()``: a hung server. New connections are still accepted and existing ones stay
  open (the kernel keeps ACKing whatever the client sends), but not one byte is forwarded in
  either direction, and no connection to the target is opened for a new client until
  ``resume()``;
- ``refuse()``: nothing listens on the port any more (connections are refused);
  ``accept_again()`` listens again on the same port; existing connections are left as they
  are (pair with ``close()`` to make the server unreachable altogether);
- ``close()``: every open connection is reset (both sides), the mode is kept;
- ``stop()``: ``close()``, stop listening, and join the proxy's thread.

One daemon thread runs a ``selectors`` loop; the control methods hand it a command and wait
until it is done, so when ``pause()`` returns nothing more is forwarded. The proxied pairs and
the bytes between them are ``harness.proxy_pairs``'s.
"""

from __future__ import annotations

import contextlib
import errno
import queue
import selectors
import socket
import threading
from collections.abc import Callable

from harness.ports import free_port
from harness.proxy_pairs import Forwarder, Pair, Side


class TcpProxy:
    """A TCP proxy in front of ``target_host:target_port``; see the module docstring."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        """Listen at once on a free loopback port and start forwarding."""
        self.target = (target_host, target_port)
        self.host = "127.0.0.1"
        # A port of this worker's block (harness/ports.py), not the kernel's ephemeral range:
        # accept_again() listens on it again, after outbound connections may have taken others.
        self._listener: socket.socket | None = self._listen(free_port())
        self.port: int = self._listener.getsockname()[1]
        self._paused = False
        self._selector = selectors.DefaultSelector()
        self._forwarder = Forwarder(self._selector, self.target)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._commands: queue.Queue[tuple[Callable[[], None], threading.Event]] = queue.Queue()
        self._stopping = False
        self.accepted = 0  # connections accepted since the start
        self._thread = threading.Thread(
            target=self._loop, name=f"tcp-proxy-{self.port}", daemon=True
        )
        self._thread.start()

    # -- control (any thread) ------------------------------------------------------------

    @property
    def mode(self) -> str:
        """``forwarding``, ``paused`` or ``refusing`` (``stopped`` after ``stop``)."""
        if self._stopping:
            return "stopped"
        if self._listener is None:
            return "refusing"
        return "paused" if self._paused else "forwarding"

    @property
    def connections(self) -> int:
        """Client connections open right now."""
        return len(self._forwarder.pairs)

    def pause(self) -> None:
        """Keep accepting and keep connections open, but forward nothing (a hung server)."""
        self._run(lambda: setattr(self, "_paused", True))

    def resume(self) -> None:
        """Forward again, connecting clients that arrived during the pause."""
        self._run(self._do_resume)

    def refuse(self) -> None:
        """Stop listening: new connections are refused (existing ones are kept)."""
        self._run(self._do_refuse)

    def accept_again(self) -> None:
        """Listen again on the same port."""
        self._run(self._do_accept_again)

    def close(self) -> None:
        """Reset every open connection, client and target side alike."""
        self._run(self._do_close)

    def stop(self) -> None:
        """Drop everything, stop listening and join the thread (idempotent)."""
        if not self._thread.is_alive():
            return
        self._run(self._do_stop)
        self._thread.join(10)

    def __enter__(self) -> TcpProxy:
        """The proxy itself."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop the proxy."""
        self.stop()

    def _run(self, command: Callable[[], None]) -> None:
        """Hand ``command`` to the proxy thread and wait until it has run."""
        if not self._thread.is_alive():
            raise RuntimeError("the proxy is stopped")
        done = threading.Event()
        self._commands.put((command, done))
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if not done.wait(10):
            raise RuntimeError("the proxy thread did not run the command")

    # -- commands (proxy thread) -----------------------------------------------------------

    def _listen(self, port: int) -> socket.socket:
        """A non-blocking listening socket on ``port`` (0: a free one)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, port))
        sock.listen(1024)
        sock.setblocking(False)
        return sock

    def _do_resume(self) -> None:
        """Forward again; connect the clients accepted during the pause."""
        self._paused = False
        for pair in list(self._forwarder.pairs):
            if pair.upstream is None:
                self._forwarder.connect_upstream(pair)

    def _do_refuse(self) -> None:
        """Close the listening socket."""
        if self._listener is not None:
            self._selector.unregister(self._listener)
            self._listener.close()
            self._listener = None

    def _do_accept_again(self) -> None:
        """Listen again on the proxy's port."""
        if self._listener is None:
            self._listener = self._listen(self.port)
            self._selector.register(self._listener, selectors.EVENT_READ, None)

    def _do_close(self) -> None:
        """Reset every pair."""
        for pair in list(self._forwarder.pairs):
            self._forwarder.drop(pair, reset=True)

    def _do_stop(self) -> None:
        """Reset every pair, stop listening, end the loop."""
        self._do_close()
        self._do_refuse()
        self._stopping = True

    # -- the loop (proxy thread) -----------------------------------------------------------

    def _loop(self) -> None:
        """The proxy thread: run commands, watch sockets, move bytes; clean up at the end."""
        try:
            while not self._stopping:
                self._run_commands()
                if self._stopping:
                    break
                self._forwarder.update_interest(self._paused)
                for key, mask in self._selector.select(timeout=0.5):
                    self._dispatch(key, mask)
        finally:
            for pair in list(self._forwarder.pairs):
                self._forwarder.drop(pair, reset=True)
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()
            # Wake anyone still waiting on a command.
            while not self._commands.empty():
                self._commands.get_nowait()[1].set()

    def _run_commands(self) -> None:
        """Run the commands other threads handed over, and tell them."""
        while True:
            try:
                command, done = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                command()
            finally:
                done.set()

    def _dispatch(self, key: selectors.SelectorKey, mask: int) -> None:
        """Handle one ready socket: the wake-up pipe, the listener, or a pair's side."""
        if key.fileobj is self._wake_r:
            with contextlib.suppress(BlockingIOError):
                self._wake_r.recv(4096)
            return
        if key.fileobj is self._listener:
            self._accept()
            return
        pair, side = key.data
        if pair not in self._forwarder.pairs:
            return
        if mask & selectors.EVENT_WRITE:
            self._forwarder.write(pair, side)
        if pair in self._forwarder.pairs and mask & selectors.EVENT_READ:
            self._forwarder.read(pair, side)

    def _accept(self) -> None:
        """Accept every waiting client; connect it to the target unless paused."""
        assert self._listener is not None
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.ECONNABORTED, errno.EMFILE, errno.ENFILE):
                    return
                raise
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.accepted += 1
            pair = Pair(client=Side(sock))
            self._forwarder.pairs.add(pair)
            if not self._paused:
                self._forwarder.connect_upstream(pair)
