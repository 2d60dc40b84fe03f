"""The environment read into ``Settings`` (each variable, its default and its parser), and
what the web service needs on top: its secrets."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Callable, Mapping
from typing import TypeVar

from app.config.errors import ConfigError, report_bad_setting
from app.config.parsers import (
    MIN_SECRET_LENGTH,
    address,
    boolean,
    choice,
    database_url,
    hosts_or_networks,
    integer,
    is_loopback,
    networks,
    origins,
    pepper,
    rate_limit,
    redis_url,
    symbols,
    trusted_proxies,
    url,
    windows,
)
from app.config.settings import (
    BOARD_SOURCES,
    DEFAULT_SYMBOL,
    DEFAULT_WINDOWS,
    LOG_FORMATS,
    LOG_LEVELS,
    MAX_CLOCK_OFFSET_MS,
    MIN_REFRESH_MS,
    Settings,
)

T = TypeVar("T")


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Parse settings from ``environ`` (default: the process environment)."""
    env = os.environ if environ is None else environ

    def get(variable: str, default: str, parse: Callable[[str, str], T]) -> T:
        raw = env.get(variable)
        if raw is None or raw.strip() == "":
            raw = default
        return parse(raw, variable)

    def refresh(variable: str, default: int) -> int:
        return get(variable, str(default), lambda v, n: integer(v, n, minimum=MIN_REFRESH_MS))

    refresh_vip = refresh("REFRESH_MS_VIP_PRO", 500)
    stale = get("STALE_THRESHOLD_MS", "3000", lambda v, n: integer(v, n, minimum=1))
    severe = get("SEVERE_STALE_THRESHOLD_MS", "15000", lambda v, n: integer(v, n, minimum=1))
    if severe <= stale:
        raise ConfigError(
            "SEVERE_STALE_THRESHOLD_MS",
            f"must be greater than STALE_THRESHOLD_MS ({stale}), got {severe}",
        )
    refresh_guest = refresh("REFRESH_MS_GUEST", 5000)
    refresh_user = refresh("REFRESH_MS_USER", 2000)

    def per_minute(refresh_ms: int) -> str:
        # Twice the recommended polling rate: a client polling at refreshMs is never held.
        return f"{2 * -(-60_000 // refresh_ms)} per minute"

    seed_raw = env.get("SIMULATION_SEED", "").strip()
    host = get("HOST", "127.0.0.1", lambda v, n: v.strip())
    trusted, hops, legacy = trusted_proxies(
        env.get("TRUSTED_PROXIES", ""), env.get("TRUSTED_PROXY_HOPS"), host
    )
    secret = env.get("SECRET_KEY", "").strip()

    return Settings(
        redis_url=get("REDIS_URL", "memory://", redis_url),
        database_url=get("DATABASE_URL", "", database_url),
        secret_key=secret or secrets.token_urlsafe(32),
        secret_key_generated=not secret,
        refresh_ms_guest=refresh_guest,
        refresh_ms_user=refresh_user,
        refresh_ms_vip_pro=refresh_vip,
        refresh_tick_ms=get(
            "REFRESH_TICK_MS", str(refresh_vip), lambda v, n: integer(v, n, minimum=100)
        ),
        stale_threshold_ms=stale,
        severe_stale_threshold_ms=severe,
        board_source=get("BOARD_SOURCE", "simulated", lambda v, n: choice(v, n, BOARD_SOURCES)),
        # Only an unset SYMBOLS means the default: set but empty is refused, not read as BTC.
        markets=symbols(env.get("SYMBOLS", DEFAULT_SYMBOL), "SYMBOLS"),
        windows=windows(env.get("WINDOWS", DEFAULT_WINDOWS), "WINDOWS"),
        simulation_seed=integer(seed_raw, "SIMULATION_SEED") if seed_raw else None,
        embedded_refresher=get("EMBEDDED_REFRESHER", "true", boolean),
        web_concurrency=get("WEB_CONCURRENCY", "2", lambda v, n: integer(v, n, 1, 64)),
        host=host,
        port=get("PORT", "8000", lambda v, n: integer(v, n, 1, 65535)),
        log_format=get("LOG_FORMAT", "text", lambda v, n: choice(v, n, LOG_FORMATS)),
        log_level=get("LOG_LEVEL", "INFO", lambda v, n: choice(v, n, LOG_LEVELS, upper=True)),
        api_key_pepper=get("API_KEY_PEPPER", "", pepper),
        session_ttl_days=get("SESSION_TTL_DAYS", "30", lambda v, n: integer(v, n, 1, 3650)),
        auth_cache_ms=get("AUTH_CACHE_MS", "2000", lambda v, n: integer(v, n, 0, 5000)),
        db_timeout_ms=get("DB_TIMEOUT_MS", "1500", lambda v, n: integer(v, n, 100, 60_000)),
        redis_pool_size=get("REDIS_POOL_SIZE", "64", lambda v, n: integer(v, n, 4, 10_000)),
        last_used_flush_s=get("LAST_USED_FLUSH_S", "10", lambda v, n: integer(v, n, 1, 3600)),
        auth_failure_limit=get("AUTH_FAILURE_LIMIT", "20 per minute", rate_limit),
        guest_rate_limit=get("GUEST_RATE_LIMIT", per_minute(refresh_guest), rate_limit),
        user_rate_limit=get("USER_RATE_LIMIT", per_minute(refresh_user), rate_limit),
        vip_pro_rate_limit=get("VIP_PRO_RATE_LIMIT", per_minute(refresh_vip), rate_limit),
        trusted_proxies=trusted,
        trusted_proxy_hops=hops,
        trusted_proxies_legacy=legacy,
        stream_max_per_key=get("STREAM_MAX_PER_KEY", "5", lambda v, n: integer(v, n, 1, 100_000)),
        stream_write_timeout_s=get(
            "STREAM_WRITE_TIMEOUT_S", "5", lambda v, n: integer(v, n, 1, 300)
        ),
        stream_retry_ms=get("STREAM_RETRY_MS", "2000", lambda v, n: integer(v, n, 100, 600_000)),
        polymarket_gamma_url=get(
            "POLYMARKET_GAMMA_URL", "https://gamma-api.polymarket.com", url(("http", "https"))
        ),
        polymarket_clob_url=get(
            "POLYMARKET_CLOB_URL", "https://clob.polymarket.com", url(("http", "https"))
        ),
        polymarket_clob_ws_url=get(
            "POLYMARKET_CLOB_WS_URL",
            "wss://ws-subscriptions-clob.polymarket.com/ws/market",
            url(("ws", "wss")),
        ),
        polymarket_rtds_url=get(
            "POLYMARKET_RTDS_URL", "wss://ws-live-data.polymarket.com", url(("ws", "wss"))
        ),
        polymarket_site_url=get(
            "POLYMARKET_SITE_URL", "https://polymarket.com", url(("http", "https"))
        ),
        # Binance's keyless market-data API (api.binance.com refuses some regions: 451).
        binance_rest_url=get(
            "BINANCE_REST_URL", "https://data-api.binance.vision", url(("http", "https"))
        ),
        refresher_tape_dir=get("REFRESHER_TAPE_DIR", "", lambda v, n: v.strip()),
        track_record=get("TRACK_RECORD", "true", boolean),
        publish_min_interval_ms=get(
            "PUBLISH_MIN_INTERVAL_MS", "50", lambda v, n: integer(v, n, 0, 10_000)
        ),
        leader_lease_ms=get("LEADER_LEASE_MS", "1500", lambda v, n: integer(v, n, 300, 60_000)),
        # Set but empty means nobody (metrics off), not the default.
        metrics_allow=networks(env.get("METRICS_ALLOW", "127.0.0.1/32,::1/128"), "METRICS_ALLOW"),
        refresher_metrics_host=get("REFRESHER_METRICS_HOST", "127.0.0.1", address),
        refresher_metrics_port=get(
            "REFRESHER_METRICS_PORT", "9101", lambda v, n: integer(v, n, 0, 65535)
        ),
        cors_origins=get("CORS_ORIGINS", "*", origins),
        clock_offset_ms=get(
            "CLOCK_OFFSET_MS",
            "0",
            lambda v, n: integer(v, n, -MAX_CLOCK_OFFSET_MS, MAX_CLOCK_OFFSET_MS),
        ),
        limits_redis_timeout_ms=get(
            "LIMITS_REDIS_TIMEOUT_MS", "500", lambda v, n: integer(v, n, 50, 10_000)
        ),
        verify_rate_limit=get("VERIFY_RATE_LIMIT", "30 per minute", rate_limit),
        stream_replay_max=get("STREAM_REPLAY_MAX", "10", lambda v, n: integer(v, n, 0, 10_000)),
        alerts=get("ALERTS", "true", boolean),
        alerts_rate_limit=get("ALERTS_RATE_LIMIT", "120 per minute", rate_limit),
        alerts_allowed_hosts=get("ALERTS_ALLOWED_HOSTS", "", hosts_or_networks),
        alerts_lost_after_s=get(
            "ALERTS_LOST_AFTER_S", "20", lambda v, n: float(integer(v, n, 1, 3600))
        ),
        alerts_deliveries_per_minute=get(
            "ALERTS_DELIVERIES_PER_MINUTE", "120", lambda v, n: integer(v, n, 1, 1_000_000)
        ),
        alerts_limit_user=get("ALERTS_LIMIT_USER", "5", lambda v, n: integer(v, n, 0, 10_000)),
        alerts_limit_vip_pro=get(
            "ALERTS_LIMIT_VIP_PRO", "100", lambda v, n: integer(v, n, 0, 100_000)
        ),
    )


# What the web service needs from its environment outside the embedded shape, checked in this
# order: the pepper that hashes keys and sessions, and the key that signs for the app. Made up
# per process or per release (the embedded shape's fallbacks), hosts and releases would
# disagree and every key would stop working; so they are provisioned once per environment.
WEB_SECRETS = ("API_KEY_PEPPER", "SECRET_KEY")


def require_web_secrets(settings: Settings) -> Settings:
    """``settings`` when the web service may start on them; outside the embedded shape a
    ConfigError naming the first missing secret (and any other), or a ``SECRET_KEY`` shorter
    than ``MIN_SECRET_LENGTH``."""
    if settings.embedded:
        return settings
    given = {"API_KEY_PEPPER": bool(settings.api_key_pepper)}
    given["SECRET_KEY"] = not settings.secret_key_generated
    missing = [name for name in WEB_SECRETS if not given[name]]
    if missing:
        also = f" (nor is {', '.join(missing[1:])})" if missing[1:] else ""
        raise ConfigError(
            missing[0],
            f"not set{also}: outside the embedded shape (REDIS_URL on Redis or DATABASE_URL on "
            "PostgreSQL) the web service takes it from its environment, the same value on "
            "every host, e.g. $(openssl rand -hex 32) once per environment (docs/deploy.md)",
        )
    if len(settings.secret_key) < MIN_SECRET_LENGTH:  # the pepper's length is pepper()'s
        raise ConfigError(
            "SECRET_KEY",
            f"must be at least {MIN_SECRET_LENGTH} characters outside the embedded shape "
            "(anyone who guesses it signs /windows cursors): use a random string, e.g. "
            "$(openssl rand -hex 32) once per environment (docs/deploy.md)",
        )
    return settings


def load_web_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The web service's settings (``create_app``, gunicorn, ``python -m app.config``): those
    of ``load_settings`` and, outside the embedded shape, its secrets."""
    return require_web_secrets(load_settings(environ))


def check_dev_server(settings: Settings) -> None:
    """The development server (``make run`` on ``memory://``: ``flask run``) listens on
    loopback only: lenient HTTP framing, a thread per connection and no timeouts are for this
    machine. ``ConfigError`` on ``HOST`` otherwise, pointing at the production shape."""
    if not is_loopback(settings.host):
        raise ConfigError(
            "HOST",
            f"refusing {settings.host} for the development server (make run on memory://), "
            "which serves this machine only; to serve the network run the production shape: "
            f"REDIS_URL=redis://127.0.0.1:6379/0 HOST={settings.host} make run",
        )


def main(argv: list[str] | None = None) -> int:
    """``python -m app.config [--dev-server]``: check the settings in the environment, as the
    web service reads them (its secrets included; ``make run`` and ``scripts/serve.sh`` do
    before starting anything), and with ``--dev-server`` that the development server may
    listen where ``HOST`` says (``check_dev_server``); 0 and silent when they hold, else the
    one line and 2."""
    args = sys.argv[1:] if argv is None else argv
    try:
        settings = load_web_settings()
        if "--dev-server" in args:
            check_dev_server(settings)
    except ConfigError as error:
        return report_bad_setting(error)
    return 0
