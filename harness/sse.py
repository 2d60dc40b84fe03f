"""The event stream as a client reads it: the items a body is parsed into (``Event``,
``Comment``, ``Retry``, ``ResponseEnd``, ``Closed``), a parser written from the WHATWG rules
(``SseParser``), the naive client that splits on newlines (``naive_boards``) and a short
description of items for assertion messages (``summarize``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# -- parsed items -------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """A dispatched SSE event: its type, its data (lines joined by LF) and the last event id."""

    type: str
    data: str
    id: str


@dataclass(frozen=True)
class Comment:
    """A comment line (``: text``), without the colon."""

    text: str


@dataclass(frozen=True)
class Retry:
    """A valid ``retry:`` field."""

    ms: int


@dataclass(frozen=True)
class ResponseEnd:
    """The end of the response body (the last chunk; for HTTP/1.0 the server's close)."""


@dataclass(frozen=True)
class Closed:
    """The server closed the connection (or reset it: ``error`` says so)."""

    error: str | None = None


Item = Event | Comment | Retry | ResponseEnd | Closed


class SseParser:
    """Incremental event-stream parser per the HTML standard ("Interpreting an event stream").

    Lines end in CRLF, LF or CR; an empty line dispatches; ``:`` starts a comment; one space
    after the field's colon is dropped; ``data`` lines are joined by LF; ``id`` without NUL
    sets the last event id; ``retry`` counts only when it is all ASCII digits; an event with
    no data is not dispatched; the event type defaults to ``message``.
    """

    def __init__(self) -> None:
        self._decoder_buffer = b""
        self._text = ""
        self._started = False
        self._data: list[str] = []
        self._type = ""
        self._last_id = ""
        self.unknown_fields: list[str] = []

    def feed(self, data: bytes) -> list[Item]:
        """Parse ``data`` (any split of the body); the items completed by it."""
        self._decoder_buffer += data
        try:
            text = self._decoder_buffer.decode("utf-8")
            self._decoder_buffer = b""
        except UnicodeDecodeError as exc:
            if exc.reason != "unexpected end of data":
                raise
            text = self._decoder_buffer[: exc.start].decode("utf-8")
            self._decoder_buffer = self._decoder_buffer[exc.start :]
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        self._text += text
        items: list[Item] = []
        while True:
            cut = self._line_end()
            if cut is None:
                return items
            line, rest_at = cut
            self._text = self._text[rest_at:]
            item = self._line(line)
            if item is not None:
                items.append(item)

    def _line_end(self) -> tuple[str, int] | None:
        text = self._text
        for index, char in enumerate(text):
            if char == "\n":
                return text[:index], index + 1
            if char == "\r":
                if index + 1 == len(text):
                    return None  # CR at the end: wait to see whether LF follows
                if text[index + 1] == "\n":
                    return text[:index], index + 2
                return text[:index], index + 1
        return None

    def _line(self, line: str) -> Item | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return Comment(line[1:].removeprefix(" "))
        field, colon, value = line.partition(":")
        if colon:
            value = value.removeprefix(" ")
        if field == "event":
            self._type = value
        elif field == "data":
            self._data.append(value)
        elif field == "id":
            if "\0" not in value:
                self._last_id = value
        elif field == "retry":
            if value and all("0" <= c <= "9" for c in value):
                return Retry(int(value))
        else:
            self.unknown_fields.append(field)
        return None

    def _dispatch(self) -> Event | None:
        data, event_type = self._data, self._type
        self._data, self._type = [], ""
        if not data:
            return None
        return Event(event_type or "message", "\n".join(data), self._last_id)


def naive_boards(body: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    """What a simple client gets: every ``data:`` line JSON-parsed on its own, with the
    ``id:`` line seen before it (None if none). Only lines of boards (``event: board``)."""
    boards: list[tuple[str | None, dict[str, Any]]] = []
    last_id: str | None = None
    event_type = ""
    for line in body.decode("utf-8").split("\n"):
        if line.startswith("id:"):
            last_id = line[3:].strip()
        elif line.startswith("event:"):
            event_type = line[6:].strip()
        elif line.startswith("data:"):
            if event_type == "board":
                boards.append((last_id, json.loads(line[5:])))
        elif line.strip() == "":
            event_type = ""
    return boards


# -- the connection -----------------------------------------------------------------------


def summarize(items: Iterable[Item]) -> list[str]:
    """A short description of items, for assertion messages."""
    out = []
    for item in items:
        if isinstance(item, Event):
            out.append(f"Event({item.type}, id={item.id}, {len(item.data)} chars)")
        else:
            out.append(repr(item))
    return out[-30:]
