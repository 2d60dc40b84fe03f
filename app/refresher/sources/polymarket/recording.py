"""HTTP exchanges on a tape: an httpx transport that records each request and its answer."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from app.refresher.tape import Tape


class RecordingTransport(httpx.BaseTransport):
    """Passes each request to ``inner`` and records the exchange at the time of the response.

    ``sources`` maps an upstream's base URL to its name on the tape (``gamma``,
    ``clob-rest``, ``site``); a request that fails is recorded with status 0 and an empty
    frame, then raised as before.
    """

    def __init__(self, inner: httpx.BaseTransport, tape: Tape, sources: Mapping[str, str]) -> None:
        self._inner = inner
        self._tape = tape
        # The longest base first, so a base that extends another wins.
        self._sources = sorted(sources.items(), key=lambda item: -len(item[0]))

    def _src(self, url: str) -> str:
        for base, name in self._sources:
            if url.startswith(base):
                return name
        return "http"

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; record it with its response (read whole: answers are small)."""
        url = str(request.url)
        content = request.read()
        body = content.decode("utf-8", errors="replace") if content else None
        src = self._src(url)
        try:
            response = self._inner.handle_request(request)
            frame = response.read().decode("utf-8", errors="replace")
        except Exception:
            self._tape.exchange(src, request.method, url, body, 0, "")
            raise
        self._tape.exchange(src, request.method, url, body, response.status_code, frame)
        return response

    def close(self) -> None:
        """Close the transport below."""
        self._inner.close()
