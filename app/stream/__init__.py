"""The vip_pro real-time stream: a per-worker broker fed by the board bus."""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask

from app.accounts.models import utcnow
from app.auth import Authenticator
from app.board.render import BoardRenderer
from app.bus import BoardBus
from app.config import Settings
from app.plans import STREAM_PLANS
from app.services import Lifecycle
from app.stream.broker import Broker, error_json
from app.stream.slots import MemorySlots, RedisSlots, StreamSlots


def _key_check(auth: Authenticator) -> Callable[[str], str | None]:
    def check(digest: str) -> str | None:
        record = auth.directory.key_by_digest(digest)
        if record is None or not record.usable(utcnow()):
            return error_json("invalid_key", "The API key is no longer valid.")
        if record.plan not in STREAM_PLANS:
            return error_json("vip_pro_required", "The stream needs the vip_pro entitlement.")
        return None

    return check


def create_broker(
    app: Flask,
    settings: Settings,
    bus: BoardBus,
    renderer: BoardRenderer,
    auth: Authenticator,
    lifecycle: Lifecycle,
) -> Broker:
    """The app's stream broker, fed by ``bus`` (no I/O until the first board)."""
    slots: StreamSlots = (
        RedisSlots(settings.redis_url, settings.redis_pool_size)
        if settings.uses_redis
        else MemorySlots()
    )

    def run_in_context(job: Callable[[], None]) -> None:
        with app.app_context():
            job()

    stream_broker = Broker(
        renderer=renderer,
        slots=slots,
        stale_ms=settings.stale_threshold_ms,
        run_in_context=run_in_context,
        history=bus.history,
        replay_max=settings.stream_replay_max,
    )
    stream_broker.key_check = _key_check(auth)
    bus.add_listener(stream_broker.on_snapshot)
    lifecycle.on_start(stream_broker.start)
    return stream_broker
