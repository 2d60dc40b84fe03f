"""``GET /metrics``: the Prometheus text format, only for addresses in ``METRICS_ALLOW``.

An extension, not in the interface. The caller's address is the one the rate limits see
(after ``TRUSTED_PROXIES``), so a client behind nginx is judged by its own address, not
nginx's. Under gunicorn the values of every worker are merged (multiprocess mode).
"""

from __future__ import annotations

import ipaddress
from functools import cache

from flask import Blueprint, Response, request

from app.errors import ApiError
from app.metrics.exposition import latest_metrics
from app.services import services

bp = Blueprint("metrics", __name__)
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@cache
def _allowed(networks: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(net, strict=False) for net in networks)


def _may_read(address: str | None) -> bool:
    try:
        caller = ipaddress.ip_address(address or "")
    except ValueError:
        return False
    return any(caller in net for net in _allowed(services().settings.metrics_allow))


@bp.get("/metrics")
def metrics() -> Response:
    """The service's metrics, or 403 ``metrics_forbidden`` for an address not allowed."""
    if not _may_read(request.remote_addr):
        raise ApiError(
            403, "metrics_forbidden", "Metrics are only served to the addresses in METRICS_ALLOW."
        )
    body, content_type = latest_metrics()
    return Response(body, 200, {"Content-Type": content_type, "Cache-Control": "no-store"})
