"""A validated board as a web worker keeps it, pre-serialised for cheap responses.

A worker parses and validates each board it receives once; every response then only
splices the serve-time fields (age, staleness, servedAt, plan) into strings built here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app.board.row import DEFAULT_WINDOW
from app.board.timefmt import updated_at
from app.schemas import ContractError, check
from app.schemas.board import PublishedBoardSchema

_SCHEMA = PublishedBoardSchema()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def dumps(document: Any) -> str:
    """Compact JSON that refuses NaN and infinities (they are not JSON)."""
    return json.dumps(document, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True)
class Snapshot:
    """One published board: its sequence, data time and rows ready to splice."""

    seq: int
    ts_ms: int
    source: str
    updated_at_json: str
    item_ts_ms: tuple[int, ...]
    item_prefixes: tuple[str, ...]
    item_symbols: tuple[str, ...]  # each row's symbol: a filtered answer picks rows by it
    # Each row's window (``5m`` for a row without ``window``): an answer picks rows by it.
    item_windows: tuple[str, ...]
    raw: str
    newest_input_ms: int | None = None  # when the newest input arrived (epoch ms)
    only_window: str | None = DEFAULT_WINDOW  # the one window of every row (None: several)

    def rows(self) -> Iterator[tuple[str, str, int, str]]:
        """(symbol, window, ts_ms, pre-serialised prefix) of each row, in board order."""
        return zip(
            self.item_symbols, self.item_windows, self.item_ts_ms, self.item_prefixes, strict=True
        )

    @property
    def document(self) -> dict[str, Any]:
        """The published board as a dict (parsed again: for tools, not hot paths)."""
        parsed: dict[str, Any] = json.loads(self.raw)
        return parsed


def parse_snapshot(raw: bytes | str) -> Snapshot:
    """Parse and validate a published board; raise ``ContractError`` or ``ValueError``."""
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    document = json.loads(text, parse_constant=_reject_constant)
    check(_SCHEMA, document, "published board")
    windows = tuple(str(item.get("window", DEFAULT_WINDOW)) for item in document["items"])
    prefixes = []
    for item in document["items"]:
        encoded = dumps(item)
        # Drop the closing brace so serve-time fields can be appended to the object.
        prefixes.append(encoded[:-1])
    return Snapshot(
        seq=document["seq"],
        ts_ms=document["ts"],
        source=document["source"],
        updated_at_json=dumps(updated_at(document["ts"])),
        item_ts_ms=tuple(item["ts"] for item in document["items"]),
        item_prefixes=tuple(prefixes),
        item_symbols=tuple(item["symbol"] for item in document["items"]),
        raw=text,
        newest_input_ms=document.get("newestInputMs"),
        item_windows=windows,
        only_window=None if len(set(windows)) > 1 else (windows[0] if windows else DEFAULT_WINDOW),
    )


__all__ = ["ContractError", "Snapshot", "dumps", "parse_snapshot"]
