"""One open stream (``Client``) and the newest board as event bytes per view (``Frame``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from app.board.snapshot import Snapshot
from app.stream.writer import DirectWriter


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
