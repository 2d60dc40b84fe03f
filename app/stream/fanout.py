"""Fan-out: each new board rendered once per streaming plan into a ``Frame``, offered to the
clients the broker writes to itself, and every waiting client woken at once."""

from __future__ import annotations

import threading
from collections.abc import Callable

from app.board.render import BoardRenderer
from app.board.snapshot import Snapshot
from app.board.timefmt import now_ms
from app.metrics.web import STREAM_EVENTS
from app.plans import STREAM_PLANS
from app.stream import events
from app.stream.client import Client, Frame
from app.stream.writer import chunk


class FanOut:
    """The newest board and frame of this worker, and who waits for the next: the delivery
    loops read ``frame``, ``changed`` and ``closing`` here directly (one attribute each, as
    when they were the broker's)."""

    def __init__(
        self,
        renderer: BoardRenderer,
        lock: threading.Lock,
        wall_ms: Callable[[], int] = now_ms,
    ) -> None:
        self._renderer = renderer
        self._wall_ms = wall_ms  # injected: a test renders at the time it drives
        self.lock = lock  # the broker's: guards ``direct`` (and the broker's own client sets)
        self.frame: Frame | None = None
        self.snapshot: Snapshot | None = None
        self.changed = threading.Event()
        self.direct: set[Client] = set()  # clients the broker writes to directly
        self.closing = False

    def publish(self, snapshot: Snapshot) -> None:
        """Render ``snapshot`` once per plan, offer it to the direct clients, wake the rest."""
        now = self._wall_ms()
        by_view = {
            plan: events.board_event(snapshot.seq, self._renderer.render(snapshot, plan, now))
            for plan in STREAM_PLANS
        }
        chunked = {plan: chunk(data) for plan, data in by_view.items()}
        generation = self.frame.generation + 1 if self.frame else 1
        frame = Frame(generation, snapshot, now, by_view, chunked)
        self.frame = frame
        offered = 0
        for client in list(self.direct):
            writer = client.writer
            if writer is not None and frame.seq >= client.last_seq:
                views = frame.chunked_by_view if writer.chunked else frame.by_view
                writer.offer(views.get(client.view) or self.filtered(frame, client, views))
                client.seen = generation
                offered += 1
        STREAM_EVENTS.inc(offered)  # once per board, not per client
        self.wake_all()

    def filtered(self, frame: Frame, client: Client, views: dict[str, bytes]) -> bytes:
        """The event of ``client``'s filter for ``frame``: rendered once per filter per board,
        by the first client that needs it, and kept in the frame for the others."""
        board = self._renderer.render(
            frame.snapshot, client.plan, frame.now_ms, client.symbols, client.window
        )
        event = events.board_event(frame.seq, board)
        frame.by_view[client.view] = event
        frame.chunked_by_view[client.view] = chunk(event)
        return views[client.view]

    def wake_all(self) -> None:
        """Wake every client waiting in the yield loop."""
        # Swap in a fresh event before setting the old one: clients that wake and wait
        # again block on the new event instead of spinning on the set one.
        old, self.changed = self.changed, threading.Event()
        old.set()

    def wake_direct(self) -> None:
        """Wake every client the broker writes to itself."""
        for client in list(self.direct):
            if client.writer is not None:
                client.writer.wake.set()

    def close(self) -> None:
        """End every stream promptly: each loop sees ``closing`` once woken."""
        self.closing = True
        self.wake_all()
        self.wake_direct()
