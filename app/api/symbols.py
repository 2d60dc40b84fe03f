"""The ``symbol`` query parameter: one parser for the board, the stream and the track record.

A value is one or more served symbols (``SYMBOLS``), comma-separated, case-insensitive, with
nothing else around them (``eth``, ``ETH,btc``); on the board and the stream a name given
twice counts once, and the track record takes exactly one name. Anything
else is a 400 ``invalid_symbol``: an empty value, an unknown or unserved name, spaces, or the
parameter given more than once (``?symbol=eth&symbol=btc``: send ``?symbol=eth,btc``).
``app.schemas.openapi`` documents exactly this language (``symbol_parameter``).
"""

from __future__ import annotations

from flask import Request

from app.errors import ApiError
from app.markets import Market

PARAMETER = "symbol"
# The symbols a filtered request asks for, in board order (``SYMBOLS``'s order).
Symbols = tuple[str, ...]


def _invalid(served: tuple[Market, ...], what: str) -> ApiError:
    names = ", ".join(m.symbol for m in served)
    return ApiError(400, "invalid_symbol", f"symbol must be {what} of the served: {names}.")


def _names(served: tuple[Market, ...], request: Request) -> list[str] | None:
    """The upper-case names of ``?symbol=``, each served; None without the parameter."""
    if not request.environ.get("QUERY_STRING"):  # then ``args`` is never parsed: the hot path
        return None
    values = request.args.getlist(PARAMETER)
    if not values:
        return None
    if len(values) > 1:
        raise _invalid(served, "one or more (comma-separated, in one parameter)")
    known = {m.symbol for m in served}
    names = [name.upper() for name in values[0].split(",")]
    # isascii: str.upper maps a few non-ASCII letters onto ASCII ones ("\u017fol" -> "SOL").
    if not values[0].isascii() or any(name not in known for name in names):
        raise _invalid(served, "one or more (comma-separated)")
    return names


def requested_symbols(served: tuple[Market, ...], request: Request) -> Symbols | None:
    """The served symbols ``?symbol=`` names, in board order; None without the parameter.

    Raises a 400 ``invalid_symbol`` for any value but served symbols, comma-separated.
    """
    names = _names(served, request)
    if names is None:
        return None
    return tuple(m.symbol for m in served if m.symbol in names)


def requested_market(served: tuple[Market, ...], request: Request) -> Market:
    """The one served market ``?symbol=`` names (the first served without it); 400 otherwise."""
    names = _names(served, request)
    if names is None:
        return served[0]
    if len(names) != 1:  # exactly one name (the OpenAPI document's pattern says so)
        raise _invalid(served, "one")
    return next(m for m in served if m.symbol == names[0])
