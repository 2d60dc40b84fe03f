"""The ``next`` cursor of ``/windows``: where the next page starts, and the query it belongs to.

Opaque to callers: URL-safe base64 of the query (symbol, from, to; the window length after
them when it is not the 5-minute one, so a 5-minute query's cursor is the same text as before
there were others) and the next page's bound (the last window start served), then a
checksum. The checksum makes an edited, truncated or
foreign cursor a clear 400 instead of a silently different page. It is keyed with a constant,
not a secret: it stays valid across workers and restarts, and a forged cursor can only ask
for what the parameters could ask for anyway (it grants nothing).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass

from app.markets import FIVE_MINUTES

VERSION = 1
_KEY = b"probboard/windows-cursor"
_DIGEST_BYTES = 9  # 12 base64 characters


class CursorError(ValueError):
    """A cursor that this service did not mint (or that was changed since)."""


@dataclass(frozen=True)
class Cursor:
    """The query a page answered, and the start the next page stays below."""

    symbol: str
    start: int | None
    end: int | None
    before: int
    window: str = FIVE_MINUTES.name  # the windows' length (``Span.name``)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _digest(payload: bytes) -> bytes:
    return hashlib.blake2b(payload, key=_KEY, digest_size=_DIGEST_BYTES).digest()


def encode(cursor: Cursor) -> str:
    """The opaque text of ``cursor``."""
    fields = [VERSION, cursor.symbol, cursor.start, cursor.end, cursor.before]
    if cursor.window != FIVE_MINUTES.name:
        fields.append(cursor.window)
    payload = json.dumps(fields, separators=(",", ":")).encode()
    return f"{_b64(payload)}.{_b64(_digest(payload))}"


def _int_or_none(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def decode(text: str) -> Cursor:
    """The cursor ``text`` stands for; ``CursorError`` for anything ``encode`` did not make."""
    body, dot, check = text.partition(".")
    if not dot or not text.isascii():
        raise CursorError("not a cursor")
    try:
        payload, digest = _unb64(body), _unb64(check)
    except (binascii.Error, ValueError) as exc:
        raise CursorError("not a cursor") from exc
    if not hmac.compare_digest(digest, _digest(payload)):
        raise CursorError("the cursor was changed")
    fields = json.loads(payload)  # the checksum held: encode wrote it
    if not isinstance(fields, list) or len(fields) not in (5, 6) or fields[0] != VERSION:
        raise CursorError("a cursor of another version")
    _, symbol, start, end, before, *rest = fields
    window = rest[0] if rest else FIVE_MINUTES.name
    if not isinstance(symbol, str) or not all(map(_int_or_none, (start, end, before))):
        raise CursorError("not a cursor")
    if before is None or not isinstance(window, str):
        raise CursorError("not a cursor")
    return Cursor(symbol, start, end, before, window)
