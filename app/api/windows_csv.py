"""The CSV form of a page of windows: a header line, then one line per checkpoint.

Each line repeats its window's columns, so every line stands on its own in a spreadsheet or
``pandas.read_csv``; a window with no checkpoint stored yet is one line with empty checkpoint
columns (it is still listed). Empty cells are nulls.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from typing import Any

WINDOW_COLUMNS = ("slug", "windowStart", "windowEnd", "rule", "lookbackS", "priceToBeat",
                  "outcome", "outcomeSource")  # fmt: skip
CHECKPOINT_COLUMNS = ("remS", "pUp", "marketMid", "sigma", "price")
HEADER = ("symbol", "source", *WINDOW_COLUMNS, *CHECKPOINT_COLUMNS)
_NO_CHECKPOINT: dict[str, Any] = {}


def _text(rows: Iterable[Iterable[Any]]) -> str:
    """``rows`` as CSV lines (``\\r\\n`` ends each, as RFC 4180 says)."""
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    return buffer.getvalue()


def csv_lines(symbol: str, source: str, windows: list[dict[str, Any]]) -> Iterator[str]:
    """The header, then each window's lines: one chunk per window, written as it is sent."""
    yield _text([HEADER])
    for window in windows:
        head = [symbol, source, *(window[name] for name in WINDOW_COLUMNS)]
        taken = window["checkpoints"] or [_NO_CHECKPOINT]
        yield _text([*head, *(c.get(name) for name in CHECKPOINT_COLUMNS)] for c in taken)
