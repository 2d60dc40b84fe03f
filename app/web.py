"""The web app: ``create_app`` builds the Flask app that gunicorn and ``flask run`` serve.

``create_app`` is the only way to build the application; it wires every subsystem in a
visible order and opens no connection (that happens lazily, after gunicorn forks).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping

from flask import Flask

from app import (
    api,
    auth,
    commands,
    cors,
    embedded_refresher,
    errors,
    forwarded,
    limits,
    logs,
    request_ids,
    stream,
)
from app.alerts import embedded as embedded_alerts
from app.board.render import BoardRenderer
from app.board.timefmt import now_ms, set_offset_ms
from app.board.trail import WindowTrail
from app.bus import create_bus
from app.calibration.cursor import WindowCursors
from app.config import load_web_settings
from app.extensions import init_db, pepper_loader
from app.metrics.web import RequestMetrics, board_received
from app.services import SERVICES_KEY, Lifecycle, Services

log = logging.getLogger(__name__)


def create_app(
    config: Mapping[str, object] | None = None,
    *,
    monotonic: Callable[[], float] = time.monotonic,
) -> Flask:
    """Build the app from ``config`` (variable names as in the environment) or the environment.

    A test passes its whole configuration; the process environment is then not consulted,
    so a developer's own ``REDIS_URL`` cannot leak into a test. ``monotonic`` is the clock
    the credential cache ages on (``AUTH_CACHE_MS``); a test passes one it drives.
    """
    environ = dict(os.environ) if config is None else {k: str(v) for k, v in config.items()}
    settings = load_web_settings(environ)  # outside the embedded shape: its secrets too
    set_offset_ms(settings.clock_offset_ms)  # CLOCK_OFFSET_MS, before anything reads the time

    app = Flask(__name__, instance_relative_config=True)
    # "//" in a path must not become an HTML redirect: every answer is an API answer.
    app.url_map.merge_slashes = False
    app.config.update(SECRET_KEY=settings.secret_key, MAX_CONTENT_LENGTH=64 * 1024)
    lifecycle = Lifecycle()

    # Every request: an id (assigned on first use), errors as ErrorResponse JSON, CORS
    # headers on /api/ answers to other origins. Flask runs after_request hooks last
    # registered first, so registered here CORS's run after every other's, on the final answer.
    logs.configure_logging(settings)
    request_ids.init_app(app)
    errors.init_app(app)
    cors.init_app(app, settings)  # CORS_ORIGINS
    # The services, in the order they depend on each other.
    db_guard = init_db(app, settings)
    bus = create_bus(settings)
    lifecycle.on_start(lambda alive: bus.start())  # the worker's one subscription
    bus.add_listener(lambda snapshot: board_received(snapshot.ts_ms, now_ms()))
    renderer = BoardRenderer(settings)
    trail = WindowTrail(settings.stale_threshold_ms)
    bus.add_listener(trail.add)  # one point a second per market, for the page's chart
    pepper = pepper_loader(settings, app.instance_path)
    authenticator = auth.init_app(app, settings, db_guard, pepper, lifecycle, monotonic)
    broker = stream.create_broker(app, settings, bus, renderer, authenticator, lifecycle)
    embedded_refresher.init_app(app, settings, bus, lifecycle)  # on memory:// only
    embedded_alerts.init_app(app, settings, bus, lifecycle, renderer, pepper)  # the same
    commands.init_app(app)  # operator CLI: users, keys, sessions, refresher, backtest
    api.init_app(app)  # one blueprint per endpoint
    limits_ = limits.init_app(app, settings)  # steps the limited endpoints call
    app.extensions[SERVICES_KEY] = Services(
        settings=settings,
        bus=bus,
        renderer=renderer,
        db_guard=db_guard,
        pepper=pepper,
        authenticator=authenticator,
        broker=broker,
        limits=limits_,
        lifecycle=lifecycle,
        trail=trail,
        cursors=WindowCursors(settings.secret_key, [m.symbol for m in settings.markets]),
    )

    # The WSGI middleware, innermost first. The request's id, kept from X-Request-ID when sane
    # and echoed on every answer. Then the caller's address (limits, logs): the socket peer,
    # or what a peer in TRUSTED_PROXIES forwarded for (the peer itself kept for /metrics).
    app.wsgi_app = request_ids.RequestIds(app.wsgi_app)  # type: ignore[method-assign]
    proxies = forwarded.TrustedProxies.of(settings.trusted_proxies, settings.trusted_proxy_hops)
    app.wsgi_app = forwarded.ForwardedHeaders(app.wsgi_app, proxies)  # type: ignore[method-assign]
    # Outermost: every answer is counted, whichever layer produced it.
    app.wsgi_app = RequestMetrics(app.wsgi_app)  # type: ignore[method-assign]

    if settings.trusted_proxies_legacy:
        log.warning(
            "TRUSTED_PROXIES=%d is the old hop count: read as %d hop(s) trusted from loopback "
            "only (%s); list the proxies' networks instead (docs/configuration.md)",
            settings.trusted_proxy_hops,
            settings.trusted_proxy_hops,
            ",".join(settings.trusted_proxies),
        )
    if settings.secret_key_generated:
        _warn_when_serving(app)
    return app


def _warn_when_serving(app: Flask) -> None:
    """Say once, at the first request this process serves, that its SECRET_KEY is random:
    an operator's command (``flask users``, ``flask db upgrade``) serves none and signs
    nothing, so it says nothing; the hook then removes itself (no cost per request)."""
    hooks = app.before_request_funcs.setdefault(None, [])

    def warn() -> None:
        try:
            hooks.remove(warn)
        except ValueError:  # another thread's first request said it
            return
        log.warning("SECRET_KEY is not set: using a random one for this process only")

    hooks.append(warn)
