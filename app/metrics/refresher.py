"""The refresher's own series, served on its own port (``REFRESHER_METRICS_PORT``)."""

from __future__ import annotations

import logging

from prometheus_client import Counter, Gauge, Histogram, start_http_server

log = logging.getLogger(__name__)

DELAY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

BOARDS_PUBLISHED = Counter("probboard_refresher_boards_total", "Boards published on the bus.")
PUBLISH_FAILURES = Counter(
    "probboard_refresher_publish_failures_total", "Ticks that could not build or publish a board."
)
PUBLISH_DELAY = Histogram(
    "probboard_refresher_publish_delay_seconds",
    "From the arrival of the newest input behind a board to its publication.",
    buckets=DELAY_BUCKETS,
)
INPUT_AGE = Gauge(
    "probboard_refresher_input_age_seconds",
    "Age of each input of the last board published (NaN when missing).",
    ["input"],
)
UPSTREAM_RECONNECTS = Counter(
    "probboard_upstream_reconnects_total",
    "Upstream connections opened again after the first, by feed.",
    ["feed"],
)
UPSTREAM_ERRORS = Counter(
    "probboard_upstream_errors_total",
    "Upstream failures (a dropped socket, a failed request, an unusable answer), by feed.",
    ["feed"],
)
UPSTREAM_SUSPECT = Counter(
    "probboard_upstream_suspect_total",
    "Upstream input not believed (app.refresher.sources.polymarket.suspects), by feed and kind.",
    ["feed", "kind"],
)
LEADING = Gauge(
    "probboard_refresher_leading",
    "1 while this refresher holds the publishing lease (sum over refreshers: 1).",
)


def serve(port: int, address: str = "127.0.0.1") -> bool:
    """Serve ``/metrics`` on ``address:port`` in a thread; False (logged) when it cannot."""
    if port == 0:
        return False
    try:
        start_http_server(port, addr=address)
    except OSError as exc:
        log.warning("refresher metrics not served on %s:%d: %s", address, port, exc)
        return False
    log.info("refresher metrics on http://%s:%d/metrics", address, port)
    return True
