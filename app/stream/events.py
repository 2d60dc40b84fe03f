"""The wire format of the stream: Server-Sent Events, one board per event on ONE data line."""

from __future__ import annotations


def board_event(seq: int, board_json: str) -> bytes:
    """``id``, ``event: board`` and the BoardResponse JSON on a single ``data:`` line."""
    # Compact JSON never contains a raw newline (strings escape it), so one line is safe.
    return f"id: {seq}\nevent: board\ndata: {board_json}\n\n".encode()


def error_event(error_json: str) -> bytes:
    """A last ``event: error`` carrying an ErrorResponse, before the server ends the stream."""
    return f"event: error\ndata: {error_json}\n\n".encode()


def comment(text: str) -> bytes:
    """A comment line: ignored by clients, keeps proxies and dead-peer detection busy."""
    return f": {text}\n\n".encode()


def retry(ms: int) -> bytes:
    """The reconnection delay the client should use."""
    return f"retry: {ms}\n\n".encode()
