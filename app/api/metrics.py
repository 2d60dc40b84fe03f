"""``GET /metrics``: the Prometheus text format, only for addresses in ``METRICS_ALLOW``.

An extension, not in the interface. The caller judged is the socket peer (``app.forwarded``
keeps it), never an address from a header: Prometheus scrapes gunicorn directly, and no
``X-Forwarded-For`` can unlock the metrics. A request a trusted proxy forwarded for another
client is refused whoever that proxy is, so a proxy on an allowed address (nginx on loopback)
never hands the metrics to the clients it forwards. Under gunicorn the values of every worker
are merged (multiprocess mode).
"""

from __future__ import annotations

import ipaddress
from functools import cache

from flask import Blueprint, Response, request

from app.errors import ApiError
from app.forwarded import Address, forwarded_by_proxy, socket_peer
from app.metrics.exposition import latest_metrics
from app.services import services

bp = Blueprint("metrics", __name__)
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@cache
def _allowed(networks: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(net, strict=False) for net in networks)


def _may_read(peer: Address | None, forwarded: bool) -> bool:
    if peer is None or forwarded:
        return False
    return any(peer in net for net in _allowed(services().settings.metrics_allow))


@bp.get("/metrics")
def metrics() -> Response:
    """The service's metrics, or 403 ``metrics_forbidden`` for an address not allowed."""
    if not _may_read(socket_peer(request.environ), forwarded_by_proxy(request.environ)):
        raise ApiError(
            403, "metrics_forbidden", "Metrics are only served to the addresses in METRICS_ALLOW."
        )
    body, content_type = latest_metrics()
    return Response(body, 200, {"Content-Type": content_type, "Cache-Control": "no-store"})
