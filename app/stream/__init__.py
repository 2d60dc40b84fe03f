"""The vip_pro real-time stream: a per-worker broker fed by the board bus."""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask, current_app

from app.accounts.models import utcnow
from app.auth import AUTH_KEY, Authenticator
from app.extensions import BUS_KEY, RENDERER_KEY, settings_of
from app.stream.broker import STREAM_PLANS, Broker, error_json
from app.stream.slots import MemorySlots, RedisSlots, StreamSlots

BROKER_KEY = "probboard.stream_broker"


def broker() -> Broker:
    """The stream broker of the current app."""
    found: Broker = current_app.extensions[BROKER_KEY]
    return found


def broker_of(app: Flask) -> Broker | None:
    """The broker of ``app`` (None for apps that are not Probboard's)."""
    return getattr(app, "extensions", {}).get(BROKER_KEY)


def _key_check(auth: Authenticator) -> Callable[[str], str | None]:
    def check(digest: str) -> str | None:
        record = auth.directory.key_by_digest(digest)
        if record is None or not record.usable(utcnow()):
            return error_json("invalid_key", "The API key is no longer valid.")
        if record.plan not in STREAM_PLANS:
            return error_json("vip_pro_required", "The stream needs the vip_pro entitlement.")
        return None

    return check


def init_app(app: Flask) -> None:
    """Create the broker and subscribe it to the bus (no I/O until the first board)."""
    settings = settings_of(app)
    slots: StreamSlots = (
        RedisSlots(settings.redis_url, settings.redis_pool_size)
        if settings.uses_redis
        else MemorySlots()
    )

    def run_in_context(job: Callable[[], None]) -> None:
        with app.app_context():
            job()

    stream_broker = Broker(
        renderer=app.extensions[RENDERER_KEY],
        slots=slots,
        stale_ms=settings.stale_threshold_ms,
        run_in_context=run_in_context,
    )
    stream_broker.key_check = _key_check(app.extensions[AUTH_KEY])
    app.extensions[BUS_KEY].add_listener(stream_broker.on_snapshot)
    app.extensions[BROKER_KEY] = stream_broker
