"""One signed call to an alert's target (issue 51, points 3 and 4).

The body (``body``) is JSON: ``{"type": "probboard.alert", "alertId", "symbol", "window",
"condition", "level", "side", "row", "updatedAt", "expiresAt"}``, the row as ``/latest``
serves it; for a chat webhook (``format`` ``slack`` or ``discord``) a text those accept
(``{"text"}`` / ``{"content"}``) with the same facts. Every call is signed per the Standard
Webhooks specification (the ``standardwebhooks`` package): ``webhook-id`` (the delivery's id,
the same on every retry: the receiver's idempotency key), ``webhook-timestamp`` and
``webhook-signature`` over the raw body.

``call`` makes one attempt: the target resolved again and checked (``targets.resolve``: a name
now at a private address is refused, not called), the connection made to the address checked
(the URL's host kept for TLS and the Host header, so no second lookup can differ), no
redirects (a 3xx is a failure), short connect and total timeouts, and at most
``MAX_ANSWER_BYTES`` of the answer read. Its outcome says what happened in words of ours:
nothing of the target's answer, and never the secret, reaches a log.

The calls go through httpcore's connection pool, the layer under httpx, without httpx's
client layer (URL and header merging, cookies, auth, redirect handling): none of it is
wanted here, and it was 40 % of a call's CPU (0.56 against 0.34 ms a call on loopback,
``bench/alerts.py``).
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpcore
from standardwebhooks.webhooks import Webhook

from app.alert_kinds import AlertSpec
from app.alerts.targets import (
    AllowList,
    Resolver,
    Target,
    TargetRefusedError,
    resolve,
    system_resolver,
)
from app.board.timefmt import served_at
from app.network_deadline import DeadlineBackend, within

CONNECT_TIMEOUT_S = 2.0
TOTAL_TIMEOUT_S = 5.0
MAX_ANSWER_BYTES = 4096
USER_AGENT = "Probboard-Alerts/1 (+https://github.com/probboard)"
# httpcore logs each connection's host and TLS name at DEBUG; a target's URL may hold its
# own secret (a chat webhook's token is in its path): the delivering thread's are dropped.
_delivering = threading.local()
_QUIET = ("httpcore.connection", "httpcore.http11", "httpcore.http2", "httpcore.proxy", "httpx")
# Whatever a call can raise for the target's doing (httpcore has no one base class).
_FAILED_CONNECTION = (
    httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol,
    httpcore.ProxyError, httpcore.ConnectionNotAvailable,
)  # fmt: skip


class _QuietDeliveries(logging.Filter):
    """Drops the HTTP libraries' records of the requests a delivery makes (in the
    delivering thread)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_delivering, "on", False)


@dataclass(frozen=True)
class Firing:
    """One alert fired on one row: what the call says."""

    delivery_id: str
    alert_id: str
    spec: AlertSpec
    row: Mapping[str, Any]
    updated_at: str
    expires_at: float  # epoch seconds: no call after it (the window's end)


@dataclass(frozen=True)
class Outcome:
    """One attempt: delivered (a 2xx), and if not whether another attempt may help."""

    delivered: bool
    retry: bool
    http_status: int | None
    latency_ms: int | None
    error: str | None


def _text(firing: Firing) -> str:
    """The chat line: which line, on which market, and the numbers."""
    row, spec = firing.row, firing.spec
    if spec.condition == "stale":
        what = "the row turned stale" if row.get("isStale") else "the row is fresh again"
    elif spec.condition == "edge_above":
        what = f"the model's {spec.side} edge passed {spec.level:g} pts"
    else:
        way = "rose above" if spec.condition == "p_up_above" else "fell below"
        what = f"P(up) {way} {spec.level:g} %"
    numbers = f"P(up) {row.get('p_up_pct')} %, UP ask {row.get('up_ask')}"
    return (
        f"Probboard {spec.symbol} {spec.window}: {what}. {numbers}, {row.get('rem_secs')} s left "
        f"(alert {firing.alert_id}, until {served_at(int(firing.expires_at * 1000))})"
    )


def body(firing: Firing) -> bytes:
    """The call's raw body (see the module docstring)."""
    if firing.spec.format == "slack":
        document: dict[str, Any] = {"text": _text(firing)}
    elif firing.spec.format == "discord":
        document = {"content": _text(firing)}
    else:
        document = {
            "type": "probboard.alert",
            "alertId": firing.alert_id,
            "symbol": firing.spec.symbol,
            "window": firing.spec.window,
            "condition": firing.spec.condition,
            "level": firing.spec.level,
            "side": firing.spec.side,
            "row": dict(firing.row),
            "updatedAt": firing.updated_at,
            "expiresAt": served_at(int(firing.expires_at * 1000)),
        }
    return json.dumps(document, separators=(",", ":")).encode()


def signed_headers(secret: str, delivery_id: str, raw: bytes, now: float) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt."""
    stamp = datetime.fromtimestamp(int(now), UTC)
    signature = Webhook(secret).sign(delivery_id, stamp, raw.decode())
    return {
        "webhook-id": delivery_id,
        "webhook-timestamp": str(int(now)),
        "webhook-signature": signature,
        "content-type": "application/json",
        "user-agent": USER_AGENT,
    }


def _request_url(target: Target) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The URL to the checked address, the Host header and the TLS name (so the connection
    goes where the check looked, and the certificate is still the host's)."""
    address = target.addresses[0]
    literal = f"[{address}]" if ":" in address else address
    default = 443 if target.scheme == "https" else 80
    port = "" if target.port == default else f":{target.port}"
    host_header = target.host + port
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    return f"{target.scheme}://{literal}{port}{target.path}", {"host": host_header}, extensions


def call(
    client: httpcore.ConnectionPool,
    firing: Firing,
    secret: str,
    allowed: AllowList,
    resolver: Resolver = system_resolver,
    clock: Any = time.time,
) -> Outcome:
    """One attempt of ``firing`` (see the module docstring); never raises for the target's
    doing."""
    if clock() >= firing.expires_at:
        return Outcome(False, False, None, None, "expired before a call got through")
    try:
        target = resolve(firing.spec.url, allowed, resolver)
    except TargetRefusedError as refused:
        return Outcome(False, False, None, None, f"target refused: url {refused}"[:200])
    raw = body(firing)
    url, host, extensions = _request_url(target)
    # Signed at the real time: the receiver checks the stamp against its own clock.
    headers = {**signed_headers(secret, firing.delivery_id, raw, time.time()), **host}
    started = time.monotonic()
    deadline = started + TOTAL_TIMEOUT_S
    _delivering.on = True
    try:
        with within(deadline), client.stream(
            "POST", url, headers=list(headers.items()), content=raw,
            extensions={**extensions, "timeout": _timeouts()},
        ) as answer:  # fmt: skip
            read = 0
            for chunk in answer.iter_stream():  # at most a little of it: never logged
                read += len(chunk)
                if read >= MAX_ANSWER_BYTES:
                    break
            status = answer.status
    except httpcore.TimeoutException:
        return _failed(started, None, "timed out")
    except _FAILED_CONNECTION as exc:
        return _failed(started, None, f"connection failed ({type(exc).__name__})")
    finally:
        _delivering.on = False
    latency = round((time.monotonic() - started) * 1000)
    if 200 <= status < 300:
        return Outcome(True, False, status, latency, None)
    if 300 <= status < 400:
        return Outcome(False, False, status, latency, "answered a redirect (never followed)")
    return Outcome(False, status >= 500 or status == 429, status, latency, f"answered {status}")


def _timeouts() -> dict[str, float]:
    """httpcore's timeouts of one call (read from the settings at each call)."""
    total = TOTAL_TIMEOUT_S
    return {"connect": CONNECT_TIMEOUT_S, "read": total, "write": total, "pool": total}


def _failed(started: float, status: int | None, why: str) -> Outcome:
    return Outcome(False, True, status, round((time.monotonic() - started) * 1000), why)


def client(ssl_context: ssl.SSLContext | None = None) -> httpcore.ConnectionPool:
    """The HTTP connections of a delivery worker: no redirects (httpcore follows none), no
    proxies from the environment (it reads none), connections kept between calls, TLS
    verified (with the system's certificates, or ``ssl_context``'s: tests)."""
    for name in _QUIET:
        quiet = logging.getLogger(name)
        if not any(isinstance(f, _QuietDeliveries) for f in quiet.filters):
            quiet.addFilter(_QuietDeliveries())
    return httpcore.ConnectionPool(
        ssl_context=ssl_context, max_connections=64, max_keepalive_connections=16,
        network_backend=DeadlineBackend(),  # the total bound, over every read and write
    )  # fmt: skip
