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
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from app.board.render import BoardRenderer
from app.board.snapshot import Snapshot, dumps
from app.board.timefmt import now_ms
from app.metrics.web import STREAM_EVENTS, STREAMS_OPEN
from app.plans import STREAM_PLANS
from app.stream import events
from app.stream.slots import StreamSlots
from app.stream.writer import DirectWriter, chunk

log = logging.getLogger(__name__)

HEARTBEAT_S = 15.0
TICK_S = 0.25
RECHECK_S = 10.0
RENEW_S = 5.0  # leases last LEASE_S (15 s): two renewals may fail before one lapses
RENEW_RETRY_S = 1.0
STALE_REFRESH_S = 1.0
MAX_ID_DIGITS = 19  # an event id is a board's seq: epoch milliseconds and a little


@dataclass(eq=False)
class Client:
    """One open stream."""

    key_id: int
    key_digest: str
    plan: str
    conn_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    ended: bytes | None = None  # set to the farewell bytes when the server ends the stream
    writer: DirectWriter | None = None  # set when the broker writes to the socket itself
    seen: int = 0  # generation of the newest frame this client was given
    last_seq: int = 0  # the newest board it was given (a frame older than that is skipped)
    symbols: tuple[str, ...] | None = None  # ``?symbol=``: only these rows (None: all)
    window: str | None = None  # ``?window=``: that window's rows (None: the default window's)
    view: str = field(init=False)  # its key in a frame's events: the plan, and the filter

    def __post_init__(self) -> None:
        view = self.plan if self.window is None else f"{self.plan}@{self.window}"
        self.view = view if self.symbols is None else f"{view}?{','.join(self.symbols)}"


@dataclass(frozen=True)
class Frame:
    """The newest board as event bytes per view (a plan, or a plan and a filter: a client's
    ``view``), rendered at ``now_ms``, and a generation that counts renders."""

    generation: int
    snapshot: Snapshot
    now_ms: int
    by_view: dict[str, bytes]
    chunked_by_view: dict[str, bytes]

    @property
    def seq(self) -> int:
        """The board's sequence number (its event id)."""
        return self.snapshot.seq


# A key check returns None when the key may keep streaming, else the ErrorResponse JSON.
KeyCheck = Callable[[str], str | None]


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
        self._stale_ms = stale_ms
        self._run_in_context = run_in_context
        self._frame: Frame | None = None
        self._snapshot: Snapshot | None = None
        self._changed = threading.Event()
        self._clients: set[Client] = set()
        self._direct: set[Client] = set()  # clients the broker writes to directly
        self._lock = threading.Lock()
        self._ticker: threading.Thread | None = None
        self._closing = False
        self._rechecking = False
        self._fresh: list[Client] = []
        self._alive: Callable[[], bool] = lambda: True
        self.key_check: KeyCheck | None = None

    # -- producer side ----------------------------------------------------------------
    def on_snapshot(self, snapshot: Snapshot) -> None:
        """Bus listener: render the new board once per plan and wake every client."""
        self._snapshot = snapshot
        self._publish(snapshot)

    def _publish(self, snapshot: Snapshot) -> None:
        now = now_ms()
        by_view = {
            plan: events.board_event(snapshot.seq, self._renderer.render(snapshot, plan, now))
            for plan in STREAM_PLANS
        }
        chunked = {plan: chunk(data) for plan, data in by_view.items()}
        generation = self._frame.generation + 1 if self._frame else 1
        frame = Frame(generation, snapshot, now, by_view, chunked)
        self._frame = frame
        offered = 0
        for client in list(self._direct):
            writer = client.writer
            if writer is not None and frame.seq >= client.last_seq:
                views = frame.chunked_by_view if writer.chunked else frame.by_view
                writer.offer(views.get(client.view) or self._filtered(frame, client, views))
                client.seen = generation
                offered += 1
        STREAM_EVENTS.inc(offered)  # once per board, not per client
        self._wake_all()

    def _filtered(self, frame: Frame, client: Client, views: dict[str, bytes]) -> bytes:
        """The event of ``client``'s filter for ``frame``: rendered once per filter per board,
        by the first client that needs it, and kept in the frame for the others."""
        board = self._renderer.render(
            frame.snapshot, client.plan, frame.now_ms, client.symbols, client.window
        )
        event = events.board_event(frame.seq, board)
        frame.by_view[client.view] = event
        frame.chunked_by_view[client.view] = chunk(event)
        return views[client.view]

    def _wake_all(self) -> None:
        # Swap in a fresh event before setting the old one: clients that wake and wait
        # again block on the new event instead of spinning on the set one.
        old, self._changed = self._changed, threading.Event()
        old.set()

    def _wake_direct(self) -> None:
        for client in list(self._direct):
            if client.writer is not None:
                client.writer.wake.set()

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
            self._fresh.append(client)  # its short first lease is renewed at the next tick
        STREAMS_OPEN.inc()
        self._ensure_ticker()
        return client

    def disconnect(self, client: Client) -> None:
        """Forget a stream and free its slot (idempotent)."""
        with self._lock:
            if client not in self._clients:
                return
            self._clients.discard(client)
            self._direct.discard(client)
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
            snapshot = self._snapshot
            frame = self._frame
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
                self._direct_loop(client, direct)
                if direct.dead:
                    return  # the socket is gone: nothing more can be written
            else:
                yield from self._yield_loop(client)
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

    def _yield_loop(self, client: Client) -> Iterator[bytes]:
        last_write = time.monotonic()
        while True:
            changed = self._changed
            frame = self._frame
            if client.ended is not None or self._closing:
                return
            if frame is not None and frame.generation != client.seen:
                client.seen = frame.generation
                if frame.seq < client.last_seq:
                    continue  # the replay already gave this client a newer board
                last_write = time.monotonic()
                STREAM_EVENTS.inc()
                views = frame.by_view
                yield views.get(client.view) or self._filtered(frame, client, views)
                continue
            quiet = time.monotonic() - last_write
            if quiet >= HEARTBEAT_S:
                last_write = time.monotonic()
                yield events.comment("keep-alive")
                continue
            changed.wait(HEARTBEAT_S - quiet)

    def _direct_loop(self, client: Client, writer: DirectWriter) -> None:
        client.writer = writer
        frame = self._frame
        if frame is not None and frame.generation != client.seen and frame.seq >= client.last_seq:
            # A board arrived while the first event was being sent.
            views = frame.chunked_by_view if writer.chunked else frame.by_view
            writer.offer(views.get(client.view) or self._filtered(frame, client, views))
            client.seen = frame.generation
        with self._lock:
            self._direct.add(client)
        heartbeat = events.comment("keep-alive")
        if writer.chunked:
            heartbeat = chunk(heartbeat)
        while not (client.ended is not None or self._closing or writer.dead):
            quiet = time.monotonic() - writer.last_write
            if quiet >= HEARTBEAT_S:
                writer.offer(heartbeat)
                continue
            writer.wake.wait(HEARTBEAT_S - quiet)
            writer.wake.clear()
            writer.drain()
        with self._lock:
            self._direct.discard(client)
        if writer.dead:
            return
        writer.drain()  # finish a partial event before gunicorn writes the last one

    # -- ticker -----------------------------------------------------------------------
    def start(self, alive: Callable[[], bool]) -> None:
        """Begin watching ``alive`` (the gunicorn worker's flag) for shutdown."""
        self._alive = alive
        self._ensure_ticker()

    def shutdown(self) -> None:
        """End every stream promptly with a final comment."""
        self._closing = True
        self._wake_all()
        self._wake_direct()

    def _ensure_ticker(self) -> None:
        if self._ticker is not None:
            return
        with self._lock:
            if self._ticker is None:
                self._ticker = threading.Thread(
                    target=self._tick_forever, name="probboard-stream-ticker", daemon=True
                )
                self._ticker.start()

    def _tick_forever(self) -> None:
        last_recheck = last_renew = last_restale = time.monotonic()
        renew_every = RENEW_S
        while not self._closing:
            time.sleep(TICK_S)
            if not self._alive():
                log.info("worker stopping: ending %d streams", len(self._clients))
                self.shutdown()
                return
            now = time.monotonic()
            try:
                if now - last_restale >= STALE_REFRESH_S:
                    last_restale = now
                    self._refresh_if_stale()
                if now - last_renew >= renew_every and self._clients:
                    last_renew = now
                    # After a failed renewal (Redis away or hung) try every second, so
                    # leases are back in Redis within a second of it answering again.
                    renewed = self._renew_leases(list(self._clients))
                    renew_every = RENEW_S if renewed else RENEW_RETRY_S
                elif self._fresh:
                    self._renew_leases(self._fresh)
                if now - last_recheck >= RECHECK_S and self._clients:
                    last_recheck = now
                    self._start_recheck()
            except Exception:
                log.exception("stream ticker step failed")

    def _renew_leases(self, live: list[Client]) -> bool:
        with self._lock:
            self._fresh = []
        renewed = self._slots.renew([(c.key_id, c.conn_id) for c in live])
        # A stream that ended while the renewal was on its way may have had its lease
        # written back after it removed it: remove those again.
        for client in live:
            if client not in self._clients:
                self._slots.release(client.key_id, client.conn_id)
        return renewed

    def _refresh_if_stale(self) -> None:
        snapshot = self._snapshot
        if snapshot is not None and now_ms() - snapshot.ts_ms > self._stale_ms:
            self._publish(snapshot)  # same board and id, its age and latencyLevel updated

    def _start_recheck(self) -> None:
        """Re-check keys in a thread of its own: the ticker (leases, shutdown) never waits
        on the database, and a re-check still running is not started twice."""
        if self._rechecking:
            return
        self._rechecking = True

        def run() -> None:
            try:
                self._run_in_context(self._recheck_keys)
            except Exception:
                log.exception("stream key re-check failed")
            finally:
                self._rechecking = False

        threading.Thread(target=run, name="probboard-stream-recheck", daemon=True).start()

    def _recheck_keys(self) -> None:
        check = self.key_check
        if check is None:
            return
        verdicts: dict[str, str | None] = {}
        ended = 0
        unchecked = 0
        for client in list(self._clients):
            if client.key_digest not in verdicts:
                try:
                    verdicts[client.key_digest] = check(client.key_digest)
                except Exception as exc:
                    # The store cannot answer: the last answer (it may stream) stands, and
                    # the next re-check tries again.
                    verdicts[client.key_digest] = None
                    unchecked += 1
                    if unchecked == 1:
                        log.warning("stream key re-check deferred: %s", type(exc).__name__)
            verdict = verdicts[client.key_digest]
            if verdict is not None and client.ended is None:
                client.ended = events.error_event(verdict)
                ended += 1
        if ended:
            log.info("ended %d streams whose keys lost the entitlement", ended)
            self._wake_all()
            self._wake_direct()


def error_json(code: str, message: str) -> str:
    """An ErrorResponse body for an ``event: error``."""
    return dumps({"ok": False, "code": code, "error": message})
