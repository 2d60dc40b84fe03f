"""Reading what the service's own log handler writes (the one configured by app/logs.py)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO


def probboard_handler() -> logging.StreamHandler[TextIO]:
    """The service's stderr handler on the root logger (exactly one is installed)."""
    handlers = [h for h in logging.getLogger().handlers if h.get_name() == "probboard"]
    assert len(handlers) == 1, handlers
    handler = handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    return handler


@contextmanager
def captured_log() -> Iterator[io.StringIO]:
    """What the service's log handler writes (to stderr in production), as text."""
    handler = probboard_handler()
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    try:
        yield buffer
    finally:
        if previous is not None:
            handler.setStream(previous)
