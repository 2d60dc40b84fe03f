"""The OpenAPI document's shared parameters: ``?symbol=`` and ``?window=`` as the served
markets and windows make them, ``?period=`` and the ``Last-Event-ID`` header."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.calibration.periods import DEFAULT as DEFAULT_PERIOD
from app.calibration.periods import SPANS
from app.markets import Market, Span
from app.schemas import EXTENSION


def _any_case(names: Iterable[str]) -> str:
    """Any of ``names`` in any case (JSON Schema patterns have no flags)."""
    return "(?:" + "|".join("".join(f"[{c.upper()}{c.lower()}]" for c in n) for n in names) + ")"


def _name_pattern(markets: tuple[Market, ...]) -> str:
    """Any served symbol in any case."""
    return _any_case(m.symbol for m in markets)


def one_symbol(markets: tuple[Market, ...]) -> str:
    """The pattern of one served symbol, in any case (``POST /api/alerts``'s ``symbol`` too)."""
    return f"^{_name_pattern(markets)}$"


def one_window(windows: tuple[Span, ...]) -> str:
    """The pattern of one served window, in any case (``POST /api/alerts``'s ``window`` too)."""
    return f"^{_any_case(s.name for s in windows)}$"


def symbol_parameter(markets: tuple[Market, ...], several: bool) -> dict[str, Any]:
    """``?symbol=``: exactly the values ``app.api.symbols`` accepts (anything else: 400)."""
    name = _name_pattern(markets)
    served = ", ".join(m.symbol for m in markets)
    if several:
        pattern = f"^{name}(?:,{name})*$"
        text = (
            f"Only these rows: served symbols ({served}), comma-separated, case-insensitive; "
            "answered in board order, a name given twice once. Without it, the full board. "
            "Anything else (empty, unknown, spaces, the parameter twice) is 400 "
            "`invalid_symbol`."
        )
    else:
        pattern = f"^{name}$"
        text = (
            f"The market: one served symbol ({served}), case-insensitive; the first when "
            "absent. Anything else is 400 `invalid_symbol`."
        )
    return {
        "name": "symbol",
        "in": "query",
        "required": False,
        "description": text,
        "schema": {"type": "string", "pattern": pattern},
        EXTENSION: True,
    }


def window_parameter(windows: tuple[Span, ...], board: bool = True) -> dict[str, Any]:
    """``?window=``: exactly the values ``app.api.window_param`` accepts (else: 400); of the
    board (``/latest``, the stream) or of the track record (``board=False``)."""
    served = ", ".join(s.name for s in windows)
    what, as_before = "board", "exactly as the interface describes it"
    if not board:
        what = "track record"
        as_before = "exactly as before there were others (each length's windows apart, scored "
        as_before += "at its own checkpoints: 15m's from 870 s left)"
    return {
        "name": "window",
        "in": "query",
        "required": False,
        "description": (
            f"The window's {what}: one served window ({served}), case-insensitive. Without "
            f"it, the 5-minute {what} {as_before} (the first served window when 5m is not "
            "served). Anything else is 400 `invalid_window`."
        ),
        "schema": {"type": "string", "pattern": one_window(windows)},
        EXTENSION: True,
    }


PERIOD = {
    "name": "period",
    "in": "query",
    "required": False,
    "description": (
        "The windows scored: those that started within the last `24h`, `7d` or `30d`, or "
        "`all` (the default). Anything else, or the parameter twice, is 400 `invalid_period`."
    ),
    "schema": {"type": "string", "enum": list(SPANS), "default": DEFAULT_PERIOD},
    EXTENSION: True,
}


LAST_EVENT_ID = {
    "name": "Last-Event-ID",
    "in": "header",
    "required": False,
    "description": (
        "The id of the last event received: a board's seq within the last 2 minutes gets "
        "every board published after it first; any other value, the current board."
    ),
    "schema": {"type": "string"},
}
