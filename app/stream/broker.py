"""Fan-out of boards to this worker's stream clients.

One broker per worker listens to the board bus (one Redis subscription per worker). For
each new board it builds the event bytes once per streaming plan (``vip_pro``, ``admin``),
and once per distinct ``?symbol=`` filter when the first client holding it needs it (at
most one per plan and set of served symbols; an unfiltered client never pays for them), and
wakes every waiting client at once by setting a shared event; each client then writes the
NEWEST event: a latest-value slot, not a queue, so a slow client skips boards and never
delays others or grows memory. A ticker thread (a greenlet under gevent) re-renders the
board while it is stale (so clients see its age grow), renews stream leases, re-checks keys
(revoked, disabled or downgraded keys lose their streams) and notices worker shutdown.

The broker holds the streams (connect, the first event, disconnect); its parts live beside
it: the fan-out (``fanout.py``), the delivery loops (``delivery.py``) and the ticker
(``ticker.py``), with ``Client`` and ``Frame`` in ``client.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from app.board.render import BoardRenderer
from app.board.snapshot import Snapshot, dumps
from app.board.timefmt import now_ms
from app.metrics.web import STREAMS_OPEN
from app.stream import events
from app.stream.client import Client, Frame
from app.stream.delivery import direct_loop, yield_loop
from app.stream.fanout import FanOut
from app.stream.slots import StreamSlots
from app.stream.ticker import KeyCheck, Ticker
from app.stream.writer import DirectWriter

# Re-exported: callers import them from the broker, as before the split.
__all__ = ["Broker", "Client", "Frame", "KeyCheck", "error_json"]

MAX_ID_DIGITS = 19  # an event id is a board's seq: epoch milliseconds and a little


class Broker:
    """Per-worker stream fan-out; see the module docstring."""

    def __init__(
        self,
        renderer: BoardRenderer,
        slots: StreamSlots,
        stale_ms: int,
        run_in_context: Callable[[Callable[[], None]], None],
        history: Callable[[int, int], list[Snapshot] | None] = lambda seq, count: None,
        replay_max: int = 10,
    ) -> None:
        self._renderer = renderer
        # The bus's first ``count`` boards after a given seq (Last-Event-ID).
        self._history = history
        self._replay_max = replay_max  # more missed than this: the newest board only
        self._slots = slots
        self._clients: set[Client] = set()
        self._lock = threading.Lock()
        self._fan = FanOut(renderer, self._lock)
        self._ticker = Ticker(self._fan, slots, self._clients, self._lock, stale_ms, run_in_context)

    @property
    def key_check(self) -> KeyCheck | None:
        """The check the ticker's re-checks run on each stream's key (None: no re-checks)."""
        return self._ticker.key_check

    @key_check.setter
    def key_check(self, check: KeyCheck | None) -> None:
        self._ticker.key_check = check

    # -- producer side ----------------------------------------------------------------
    def on_snapshot(self, snapshot: Snapshot) -> None:
        """Bus listener: render the new board once per plan and wake every client."""
        self._fan.snapshot = snapshot
        self._fan.publish(snapshot)

    # -- client side ------------------------------------------------------------------
    @property
    def clients(self) -> int:
        """Streams open on this worker."""
        return len(self._clients)

    def connect(
        self,
        key_id: int,
        key_digest: str,
        plan: str,
        limit: int,
        symbols: tuple[str, ...] | None = None,
        window: str | None = None,
    ) -> Client | None:
        """Register a stream (of the rows of ``window`` and ``symbols`` only, if given) if
        its key has a free slot; None when it has not."""
        client = Client(
            key_id=key_id, key_digest=key_digest, plan=plan, symbols=symbols, window=window
        )
        if not self._slots.acquire(key_id, client.conn_id, limit):
            return None
        with self._lock:
            self._clients.add(client)
            self._ticker.fresh.append(client)  # its short first lease is renewed at the next tick
        STREAMS_OPEN.inc()
        self._ticker.ensure_started()
        return client

    def disconnect(self, client: Client) -> None:
        """Forget a stream and free its slot (idempotent)."""
        with self._lock:
            if client not in self._clients:
                return
            self._clients.discard(client)
            self._fan.direct.discard(client)
        STREAMS_OPEN.dec()
        self._slots.release(client.key_id, client.conn_id)

    def stream(
        self,
        client: Client,
        last_event_id: str | None,
        retry_ms: int,
        direct: DirectWriter | None = None,
    ) -> Iterator[bytes]:
        """The bytes of one stream: retry, the current board at once, then every new one.

        With ``direct`` (gunicorn's socket), events after the first are written by the
        broker itself; this generator then only waits, drains a slow client and heartbeats.
        """
        try:
            snapshot = self._fan.snapshot
            frame = self._fan.frame
            first = events.retry(retry_ms)
            missed = self._missed(last_event_id)
            now = now_ms()
            if missed is not None and len(missed) <= self._replay_max:
                # A reconnect within the history and the cap: every board it missed, in order.
                for old in missed:
                    board = self._renderer.render(
                        old, client.plan, now, client.symbols, client.window
                    )
                    first += events.board_event(old.seq, board)
                client.last_seq = missed[-1].seq if missed else int(last_event_id or 0)
            elif snapshot is not None and last_event_id != str(snapshot.seq):
                # A new stream, an id the history does not hold, or more missed than the cap
                # (the newest board gives the current state). Rendered now, so the first
                # board's age is exact for this client.
                board = self._renderer.render(
                    snapshot, client.plan, now, client.symbols, client.window
                )
                first += events.board_event(snapshot.seq, board)
                client.last_seq = snapshot.seq
            client.seen = frame.generation if frame is not None else 0
            yield first  # gunicorn sends the headers and this at once
            if direct is not None:
                direct_loop(self._fan, client, direct)
                if direct.dead:
                    return  # the socket is gone: nothing more can be written
            else:
                yield from yield_loop(self._fan, client)
            yield client.ended or events.comment("server shutting down; reconnect")
        finally:
            self.disconnect(client)

    def _missed(self, last_event_id: str | None) -> list[Snapshot] | None:
        """The boards after ``Last-Event-ID`` when the history still has it, at most one more
        than the replay's cap (enough to tell a capped replay); None for no id, an id that is
        not a board's, or one older than the history (then: the current)."""
        if last_event_id is None:
            return None
        text = last_event_id.strip()
        if not text.isascii() or not text.isdigit() or len(text) > MAX_ID_DIGITS:
            return None
        return self._history(int(text), self._replay_max + 1)

    # -- lifecycle --------------------------------------------------------------------
    def start(self, alive: Callable[[], bool]) -> None:
        """Begin watching ``alive`` (the gunicorn worker's flag) for shutdown."""
        self._ticker.alive = alive
        self._ticker.ensure_started()

    def shutdown(self) -> None:
        """End every stream promptly with a final comment."""
        self._fan.close()


def error_json(code: str, message: str) -> str:
    """An ErrorResponse body for an ``event: error``."""
    return dumps({"ok": False, "code": code, "error": message})
