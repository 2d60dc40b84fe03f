"""The ``next`` cursor of ``/windows``: where the next page starts, and the query it belongs to.

Opaque to callers: URL-safe base64 of the query (symbol, from, to; the window length after
them when it is not the 5-minute one) and the next page's bound (the last window start
served), then a signature. The signature is an HMAC-SHA256 (cut to 16 bytes) under a key of
its own, derived from the service's ``SECRET_KEY`` (``HMAC(secret, "probboard/windows-cursor")``),
so only a process holding that secret can mint a cursor: one with the same ``SECRET_KEY``
(every worker and host of a deployment, across restarts) takes it, any other refuses it. A
process without ``SECRET_KEY`` draws a random one, and its cursors are good only in that
process.

Nothing a caller sends is trusted, signed or not: the text is capped at ``MAX_CHARS`` before
anything is decoded, every decoding error is a ``CursorError``, and every value must be one
the service could have minted (whole numbers in the range of a window start, a known window,
a served symbol). A ``CursorError`` is the view's 400 ``invalid_cursor``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Collection
from dataclasses import dataclass

from app.markets import DEFAULT_SPAN, SPANS

VERSION = 1
PURPOSE = b"probboard/windows-cursor"  # the derived key's purpose: no other use shares it
MAX_CHARS = 256  # a served cursor is about 100 characters; nothing longer is decoded
_DIGEST_BYTES = 16  # 22 base64 characters
# Every time a cursor holds is a window start or a from/to: unix seconds of 12 digits at most
# (what ``from``/``to`` accept, and within the store's BIGINT).
TIME_LIMIT = 10**12
_TEXT = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}")  # the URL-safe alphabet, unpadded


class CursorError(ValueError):
    """A cursor that this service did not mint (or that was changed since)."""


@dataclass(frozen=True)
class Cursor:
    """The query a page answered, and the start the next page stays below."""

    symbol: str
    start: int | None
    end: int | None
    before: int
    window: str = DEFAULT_SPAN.name  # the windows' length (``Span.name``)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """Strict: only the URL-safe alphabet (checked by ``_TEXT``), no padding written."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _seconds(value: object, low: int = -TIME_LIMIT) -> int:
    """``value`` when it is a whole number a cursor may hold (in (``low``, ``TIME_LIMIT``))."""
    if type(value) is not int or not low < value < TIME_LIMIT:
        raise CursorError("a time out of range")
    return value


def _seconds_or_none(value: object) -> int | None:
    """A bound of the query: None, or a time in range."""
    return None if value is None else _seconds(value)


class WindowCursors:
    """Mints and reads the cursors of one app, under a key derived from its ``SECRET_KEY``."""

    def __init__(self, secret_key: str, symbols: Collection[str]) -> None:
        self._key = hmac.new(secret_key.encode(), PURPOSE, hashlib.sha256).digest()
        self._symbols = frozenset(symbols)

    def _digest(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:_DIGEST_BYTES]

    def sign(self, payload: bytes) -> str:
        """``payload`` as cursor text, signed (tests sign payloads ``encode`` never writes)."""
        return f"{_b64(payload)}.{_b64(self._digest(payload))}"

    def encode(self, cursor: Cursor) -> str:
        """The opaque text of ``cursor``."""
        fields = [VERSION, cursor.symbol, cursor.start, cursor.end, cursor.before]
        if cursor.window != DEFAULT_SPAN.name:
            fields.append(cursor.window)
        return self.sign(json.dumps(fields, separators=(",", ":")).encode())

    def decode(self, text: str) -> Cursor:
        """The cursor ``text`` stands for; ``CursorError`` for anything ``encode`` did not make."""
        if len(text) > MAX_CHARS or not _TEXT.fullmatch(text):
            raise CursorError("not a cursor")
        body, _, check = text.partition(".")
        try:
            payload, digest = _unb64(body), _unb64(check)
        except (binascii.Error, ValueError) as exc:
            raise CursorError("not a cursor") from exc
        if _b64(payload) != body or not hmac.compare_digest(digest, self._digest(payload)):
            raise CursorError("the cursor was changed, or minted elsewhere")
        try:
            # Signed here, so written by encode; guarded anyway: a key can leak.
            fields = json.loads(payload.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # JSON and UTF-8 errors are ValueErrors
            raise CursorError("not a cursor") from exc
        return self._checked(fields)

    def _checked(self, fields: object) -> Cursor:
        """The cursor of decoded ``fields``, each value one ``encode`` could have written."""
        if not isinstance(fields, list) or len(fields) not in (5, 6):
            raise CursorError("not a cursor")
        version, symbol, start, end, before, *rest = fields
        if type(version) is not int or version != VERSION:
            raise CursorError("a cursor of another version")
        window = rest[0] if rest else DEFAULT_SPAN.name
        if not isinstance(symbol, str) or symbol not in self._symbols:
            raise CursorError("not a served symbol")
        if not isinstance(window, str) or window not in SPANS:
            raise CursorError("not a known window")
        # A next page's bound is a window start the store served: never negative.
        bound = _seconds(before, low=-1)
        return Cursor(symbol, _seconds_or_none(start), _seconds_or_none(end), bound, window)
