"""The OpenAPI description of ``GET /api/probboard/windows``: its parameters and its two media.

Kept beside ``openapi.py`` (which assembles the document) so that module stays a table of
paths. The parameters are exactly what ``app.api.windows_query`` reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.calibration.cursor import MAX_CHARS
from app.calibration.export import DEFAULT_LIMIT, MAX_LIMIT
from app.schemas import EXTENSION

WINDOWS_SUMMARY = (
    "The recorded windows of one market, newest first, a page at a time: each window's rule, "
    "price to beat, outcome and checkpoints (JSON, or CSV with one line per checkpoint)."
)
CSV_TEXT = (
    "A header line, then one line per checkpoint with its window's columns (a window without "
    "checkpoints: one line, its checkpoint cells empty); empty cells are nulls. Columns: "
    "symbol, source, slug, windowStart, windowEnd, rule, lookbackS, priceToBeat, outcome, "
    "outcomeSource, remS, pUp, marketMid, sigma, price. `X-Next-Cursor` gives the next page."
)
_TIME = (
    "Windows starting {} this time: ISO 8601 (`2026-11-26T10:00:00Z`, an offset, or none for "
    "UTC; a date alone is its midnight) or unix seconds. Anything else is 400 `invalid_time`, "
    "as is `from` after `to`."
)


def _query(name: str, text: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": text,
            "schema": schema, EXTENSION: True}  # fmt: skip


def windows_parameters() -> list[dict[str, Any]]:
    """``from``, ``to``, ``limit``, ``cursor`` and ``format`` (``symbol`` is the shared one)."""
    return [
        _query("from", _TIME.format("at or after"), {"type": "string"}),
        _query("to", _TIME.format("before"), {"type": "string"}),
        _query(
            "limit",
            f"Windows per page, 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT}); anything else is "
            "400 `invalid_limit`.",
            {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
        ),
        _query(
            "cursor",
            "A `next` as served, with the same `symbol`, `window`, `from` and `to` (`limit` may "
            "change): the page after the one that gave it. Anything else (edited, signed under "
            f"another `SECRET_KEY`, over {MAX_CHARS} characters), or another query's cursor, is "
            "400 `invalid_cursor`; it is read after the rate limit, so it costs a request.",
            {"type": "string", "maxLength": MAX_CHARS},
        ),
        _query(
            "format",
            "`json` or `csv`; without it, CSV when `Accept` prefers `text/csv`, else JSON. "
            "Anything else is 400 `invalid_format`.",
            {"type": "string", "enum": ["json", "csv"]},
        ),
    ]


def windows_ok(
    schema: dict[str, Any], headers: dict[str, Any], header_ref: Callable[[str, bool], Any]
) -> dict[str, Any]:
    """The 200 answer: the WindowsResponse ``schema``, or its CSV."""
    csv_headers = headers | {"X-Next-Cursor": header_ref("X-Next-Cursor", False)}
    return {
        "description": "One page of windows (`next`: the cursor of the following page).",
        "headers": csv_headers,
        "content": {
            "application/json": {"schema": schema},
            "text/csv": {"schema": {"type": "string", "description": CSV_TEXT}},
        },
    }
