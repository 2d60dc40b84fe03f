"""The one place where configuration is read: environment variables, parsed strictly.

Every setting comes from an environment variable (or the mapping a test passes to
``create_app``). A value that does not parse stops start-up with a ``ConfigError`` that
names the variable, so a typo never turns into a silently different service.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

from app.markets import Market, Span, parse_symbols, parse_windows
from app.plans import GUEST, USER, VIP_PRO
from app.redis_urls import SentinelUrlError, is_sentinel_url, parse_sentinel_url

T = TypeVar("T")

MIN_REFRESH_MS = 500
BOARD_SOURCES = ("simulated", "polymarket")
# One symbol, the contract's board: what SYMBOLS means when it is not set. The only default
# market there is; everything after the settings is given its markets.
DEFAULT_SYMBOL = "BTC"
# The contract's window: what WINDOWS means when it is not set (``5m,15m`` serves both).
DEFAULT_WINDOWS = "5m"
LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
MAX_CLOCK_OFFSET_MS = 86_400_000  # CLOCK_OFFSET_MS (tests and drills): a day either way


class ConfigError(ValueError):
    """A configuration variable is missing or malformed; the message names it."""

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable}: {problem}")
        self.variable = variable


# Every program ends with this status on a bad setting: a usage error, as argparse and click say.
BAD_SETTING_STATUS = 2


def report_bad_setting(error: ConfigError) -> int:
    """Print the one line an operator needs on stderr (the variable and what it allows, no
    traceback); the exit status to end with. Every entry point reports through here."""
    print(f"probboard: {error}", file=sys.stderr, flush=True)
    return BAD_SETTING_STATUS


@dataclass(frozen=True)
class Settings:
    """Parsed, validated configuration of one process."""

    redis_url: str
    database_url: str
    secret_key: str
    secret_key_generated: bool
    refresh_ms_guest: int
    refresh_ms_user: int
    refresh_ms_vip_pro: int
    refresh_tick_ms: int
    stale_threshold_ms: int
    severe_stale_threshold_ms: int
    board_source: str
    markets: tuple[Market, ...]  # the board's rows, in order (``SYMBOLS``)
    windows: tuple[Span, ...]  # the windows served, in order (``WINDOWS``)
    simulation_seed: int | None
    embedded_refresher: bool
    web_concurrency: int
    host: str
    port: int
    log_format: str
    log_level: str
    api_key_pepper: str
    session_ttl_days: int
    auth_cache_ms: int
    db_timeout_ms: int
    redis_pool_size: int
    last_used_flush_s: int
    auth_failure_limit: str
    guest_rate_limit: str
    user_rate_limit: str
    vip_pro_rate_limit: str
    trusted_proxies: tuple[str, ...]  # networks whose X-Forwarded-* are read (app.forwarded)
    trusted_proxy_hops: int  # at most this many X-Forwarded-For entries walked from the right
    stream_max_per_key: int
    stream_write_timeout_s: int
    stream_retry_ms: int
    polymarket_gamma_url: str
    polymarket_clob_url: str
    polymarket_clob_ws_url: str
    polymarket_rtds_url: str
    polymarket_site_url: str
    refresher_tape_dir: str = ""  # record every upstream exchange here (empty: off)
    track_record: bool = True  # the refresher stores checkpoints and outcomes (SQL store)
    publish_min_interval_ms: int = 50  # changes within this long go out in one board
    leader_lease_ms: int = 1500  # a refresher's lease on publishing (several on one bus)
    metrics_allow: tuple[str, ...] = ("127.0.0.1/32", "::1/128")  # who may read /metrics
    refresher_metrics_host: str = "127.0.0.1"
    refresher_metrics_port: int = 9101  # the refresher's own /metrics (0: off)
    cors_origins: tuple[str, ...] = ("*",)  # origins whose pages may read /api/* (app.cors)
    trusted_proxies_legacy: bool = False  # TRUSTED_PROXIES was the old bare hop count
    verify_rate_limit: str = "30 per minute"  # valid-key checks on /api/keys/verify, per account
    stream_replay_max: int = 10  # a reconnect missing more boards gets the newest only
    clock_offset_ms: int = 0  # the wall clock's shift (tests and drills only; app.board.timefmt)

    @property
    def embedded(self) -> bool:
        """True in the embedded shape (``memory://`` and no PostgreSQL): one process, nothing
        shared with another host; every other shape is the production one."""
        return not self.uses_redis and not self.database_url.startswith("postgresql")

    @property
    def uses_redis(self) -> bool:
        """True when the board bus (and later the limiter) live in a Redis server."""
        return self.redis_url.startswith(("redis://", "rediss://", "unix://", "redis+sentinel://"))

    @property
    def default_window(self) -> Span:
        """The window served without ``?window=``: the contract's 5 minutes when served,
        else the first of ``WINDOWS``."""
        return next((s for s in self.windows if s.name == DEFAULT_WINDOWS), self.windows[0])

    @property
    def refresh_ms(self) -> dict[str, int]:
        """Recommended refresh interval per plan, as the health endpoint reports it."""
        return {
            GUEST: self.refresh_ms_guest,
            USER: self.refresh_ms_user,
            VIP_PRO: self.refresh_ms_vip_pro,
        }


_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]{1,12}")


def _int(value: str, variable: str, minimum: int | None = None, maximum: int | None = None) -> int:
    text = value.strip()
    if not _WHOLE_NUMBER.fullmatch(text):
        raise ConfigError(variable, f"expected a whole number, got {value!r}")
    number = int(text)
    if minimum is not None and number < minimum:
        raise ConfigError(variable, f"must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ConfigError(variable, f"must be at most {maximum}, got {number}")
    return number


def _bool(value: str, variable: str) -> bool:
    text = value.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ConfigError(variable, f"expected true or false, got {value!r}")


def _choice(value: str, variable: str, choices: tuple[str, ...], upper: bool = False) -> str:
    text = value.strip().upper() if upper else value.strip().lower()
    if text not in choices:
        raise ConfigError(variable, f"expected one of {', '.join(choices)}, got {value!r}")
    return text


def _without_password(url: str) -> str:
    """``url`` with any password replaced, so an error message never prints one."""
    scheme, separator, rest = url.partition("://")
    if separator and "@" in rest:
        # Everything up to the last "@": a password may hold "/", "?" or "@" unencoded.
        credentials, _, hosts = rest.rpartition("@")
        user, colon, _ = credentials.partition(":")
        rest = f"{user}:***@{hosts}" if colon else f"***@{hosts}"
    hidden = f"{scheme}{separator}{rest}"
    return re.sub(r"((?:^|[?&])(?:sentinel_)?password=)[^&]*", r"\1***", hidden)


def _redis_url(value: str, variable: str) -> str:
    text = value.strip()
    shown = _without_password(text)
    if text == "memory://":
        return text
    parts = urlsplit(text)
    if parts.scheme == "unix" and parts.path:
        return text
    if is_sentinel_url(text):
        try:
            parse_sentinel_url(text)
        except SentinelUrlError as exc:
            raise ConfigError(variable, f"{exc} in {shown!r}") from None
        return text
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise ConfigError(
            variable,
            "expected memory://, redis://host:port/db or "
            f"redis+sentinel://host:port,host:port/service/db, got {shown!r}",
        )
    try:
        port = parts.port
    except ValueError as exc:
        raise ConfigError(variable, f"bad port in {shown!r}") from exc
    if port == 0:
        raise ConfigError(variable, f"bad port in {shown!r}")
    db = parts.path.lstrip("/")
    if db and not re.fullmatch(r"[0-9]{1,5}", db):
        raise ConfigError(variable, f"the database number must be a whole number, got {db!r}")
    return text


def _database_url(value: str, variable: str) -> str:
    """Accept the plain PostgreSQL form and map it to the psycopg 3 driver."""
    text = value.strip()
    if text == "":
        return ""  # the embedded default: an SQLite file in the instance folder
    shown = _without_password(text)
    parts = urlsplit(text)
    scheme = parts.scheme
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        if not parts.path.strip("/"):
            raise ConfigError(variable, f"name the database, as in postgresql://host/db: {shown!r}")
        return "postgresql+psycopg://" + text.split("://", 1)[1]
    if scheme == "sqlite" and text.startswith("sqlite:///"):
        return text
    raise ConfigError(
        variable, f"expected postgresql://user@host:port/db or sqlite:///path, got {shown!r}"
    )


def _networks(value: str, variable: str) -> tuple[str, ...]:
    """Comma-separated addresses or networks (``10.0.0.0/8``); empty: nobody."""
    parts = [part.strip() for part in value.split(",") if part.strip()]
    for part in parts:
        try:
            ipaddress.ip_network(part, strict=False)
        except ValueError:
            raise ConfigError(variable, f"not an address or network: {part!r}") from None
    return tuple(parts)


# What the old form TRUSTED_PROXIES=N (a bare hop count, before issue 46) trusts: the nginx
# on the same host, never the private network.
LEGACY_TRUSTED_PROXIES = ("127.0.0.1/32", "::1/128")
MAX_PROXY_HOPS = 10


def _trusted_proxies(value: str, hops_value: str | None) -> tuple[tuple[str, ...], int, bool]:
    """``TRUSTED_PROXIES`` and ``TRUSTED_PROXY_HOPS``: (networks, hops, old form).

    ``TRUSTED_PROXIES`` lists the proxies' networks (``127.0.0.1/32,10.0.0.0/24``; empty:
    nobody). A bare whole number N is the old hop count: N hops trusted from loopback only
    (0: nobody), and then ``TRUSTED_PROXY_HOPS`` may not be set as well.
    """
    hops_given = hops_value is not None and hops_value.strip() != ""
    text = value.strip()
    if _WHOLE_NUMBER.fullmatch(text):
        if hops_given:
            raise ConfigError(
                "TRUSTED_PROXIES",
                f"the old hop count {text!r} cannot be combined with TRUSTED_PROXY_HOPS: "
                "list the proxies' networks instead, e.g. 127.0.0.1/32,10.0.0.0/24",
            )
        legacy_hops = _int(text, "TRUSTED_PROXIES", 0, MAX_PROXY_HOPS)
        networks: tuple[str, ...] = LEGACY_TRUSTED_PROXIES if legacy_hops else ()
        return networks, max(legacy_hops, 1), legacy_hops > 0
    hops = _int(
        hops_value if hops_value and hops_given else "1", "TRUSTED_PROXY_HOPS", 1, MAX_PROXY_HOPS
    )
    networks = tuple(
        str(ipaddress.ip_network(part, strict=False))
        for part in _networks(value, "TRUSTED_PROXIES")
    )
    for network in networks:
        if network.endswith("/0"):
            raise ConfigError(
                "TRUSTED_PROXIES",
                f"{network} trusts every address: any caller could pick its own; "
                "list the proxies' networks",
            )
    return networks, hops, False


_ORIGIN = re.compile(r"https?://(?:[a-z0-9-]+(?:\.[a-z0-9-]+)*|\[[0-9a-f:.]+\])(?::([0-9]{1,5}))?")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origins(value: str, variable: str) -> tuple[str, ...]:
    """``*``, or comma-separated origins ``scheme://host[:port]`` as browsers send them."""
    parts = [part.strip().lower() for part in value.split(",") if part.strip()]
    if parts == ["*"]:
        return ("*",)
    if not parts or "*" in parts:
        raise ConfigError(variable, f"expected * alone or a list of origins, got {value!r}")
    for part in parts:
        found = _ORIGIN.fullmatch(part)
        if found is None:
            raise ConfigError(
                variable,
                f"expected * or comma-separated origins scheme://host[:port] (no path), "
                f"got {part!r}",
            )
        port = found[1]
        # A browser leaves a default port out of Origin: a listed one would never match.
        if port is not None and not 0 < int(port) <= 65535:
            raise ConfigError(variable, f"bad port in {part!r}")
        if port is not None and int(port) == _DEFAULT_PORTS[part.partition(":")[0]]:
            raise ConfigError(variable, f"leave the default port out of {part!r}")
    if len(set(parts)) != len(parts):
        raise ConfigError(variable, f"an origin is listed twice in {value!r}")
    return tuple(parts)


def _address(value: str, variable: str) -> str:
    """An IP address to listen on."""
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        raise ConfigError(variable, f"expected an IP address, got {value!r}") from None


def _rate_limit(value: str, variable: str) -> str:
    """A rate string of the limits library, such as ``20 per minute`` (several joined by ``;``)."""
    from limits import parse_many

    text = value.strip()
    try:
        parse_many(text)
    except ValueError as exc:
        raise ConfigError(
            variable, f"expected a rate such as '20 per minute', got {value!r}"
        ) from exc
    return text


def _url(schemes: tuple[str, ...]) -> Callable[[str, str], str]:
    def parse(value: str, variable: str) -> str:
        text = value.strip()
        parts = urlsplit(text)
        if parts.scheme not in schemes or not parts.hostname:
            raise ConfigError(variable, f"expected a {'/'.join(schemes)} URL, got {value!r}")
        return text.rstrip("/")

    return parse


def _symbols(value: str, variable: str) -> tuple[Market, ...]:
    """The markets named by ``SYMBOLS`` (``app.markets.parse_symbols``)."""
    try:
        return parse_symbols(value)
    except ValueError as exc:
        raise ConfigError(variable, str(exc)) from None


def _windows(value: str, variable: str) -> tuple[Span, ...]:
    """The windows named by ``WINDOWS`` (``app.markets.parse_windows``)."""
    try:
        return parse_windows(value)
    except ValueError as exc:
        raise ConfigError(variable, str(exc)) from None


def _pepper(value: str, variable: str) -> str:
    text = value.strip()
    if text and len(text) < 16:
        raise ConfigError(variable, "must be at least 16 characters (use a random string)")
    return text


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Parse settings from ``environ`` (default: the process environment)."""
    env = os.environ if environ is None else environ

    def get(variable: str, default: str, parse: Callable[[str, str], T]) -> T:
        raw = env.get(variable)
        if raw is None or raw.strip() == "":
            raw = default
        return parse(raw, variable)

    def refresh(variable: str, default: int) -> int:
        return get(variable, str(default), lambda v, n: _int(v, n, minimum=MIN_REFRESH_MS))

    refresh_vip = refresh("REFRESH_MS_VIP_PRO", 500)
    stale = get("STALE_THRESHOLD_MS", "3000", lambda v, n: _int(v, n, minimum=1))
    severe = get("SEVERE_STALE_THRESHOLD_MS", "15000", lambda v, n: _int(v, n, minimum=1))
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
    trusted, hops, legacy = _trusted_proxies(
        env.get("TRUSTED_PROXIES", ""), env.get("TRUSTED_PROXY_HOPS")
    )
    secret = env.get("SECRET_KEY", "").strip()

    return Settings(
        redis_url=get("REDIS_URL", "memory://", _redis_url),
        database_url=get("DATABASE_URL", "", _database_url),
        secret_key=secret or secrets.token_urlsafe(32),
        secret_key_generated=not secret,
        refresh_ms_guest=refresh_guest,
        refresh_ms_user=refresh_user,
        refresh_ms_vip_pro=refresh_vip,
        refresh_tick_ms=get(
            "REFRESH_TICK_MS", str(refresh_vip), lambda v, n: _int(v, n, minimum=100)
        ),
        stale_threshold_ms=stale,
        severe_stale_threshold_ms=severe,
        board_source=get("BOARD_SOURCE", "simulated", lambda v, n: _choice(v, n, BOARD_SOURCES)),
        # Only an unset SYMBOLS means the default: set but empty is refused, not read as BTC.
        markets=_symbols(env.get("SYMBOLS", DEFAULT_SYMBOL), "SYMBOLS"),
        windows=_windows(env.get("WINDOWS", DEFAULT_WINDOWS), "WINDOWS"),
        simulation_seed=_int(seed_raw, "SIMULATION_SEED") if seed_raw else None,
        embedded_refresher=get("EMBEDDED_REFRESHER", "true", _bool),
        web_concurrency=get("WEB_CONCURRENCY", "2", lambda v, n: _int(v, n, 1, 64)),
        host=get("HOST", "127.0.0.1", lambda v, n: v.strip()),
        port=get("PORT", "8000", lambda v, n: _int(v, n, 1, 65535)),
        log_format=get("LOG_FORMAT", "text", lambda v, n: _choice(v, n, LOG_FORMATS)),
        log_level=get("LOG_LEVEL", "INFO", lambda v, n: _choice(v, n, LOG_LEVELS, upper=True)),
        api_key_pepper=get("API_KEY_PEPPER", "", _pepper),
        session_ttl_days=get("SESSION_TTL_DAYS", "30", lambda v, n: _int(v, n, 1, 3650)),
        auth_cache_ms=get("AUTH_CACHE_MS", "2000", lambda v, n: _int(v, n, 0, 5000)),
        db_timeout_ms=get("DB_TIMEOUT_MS", "1500", lambda v, n: _int(v, n, 100, 60_000)),
        redis_pool_size=get("REDIS_POOL_SIZE", "64", lambda v, n: _int(v, n, 4, 10_000)),
        last_used_flush_s=get("LAST_USED_FLUSH_S", "10", lambda v, n: _int(v, n, 1, 3600)),
        auth_failure_limit=get("AUTH_FAILURE_LIMIT", "20 per minute", _rate_limit),
        guest_rate_limit=get("GUEST_RATE_LIMIT", per_minute(refresh_guest), _rate_limit),
        user_rate_limit=get("USER_RATE_LIMIT", per_minute(refresh_user), _rate_limit),
        vip_pro_rate_limit=get("VIP_PRO_RATE_LIMIT", per_minute(refresh_vip), _rate_limit),
        trusted_proxies=trusted,
        trusted_proxy_hops=hops,
        trusted_proxies_legacy=legacy,
        stream_max_per_key=get("STREAM_MAX_PER_KEY", "5", lambda v, n: _int(v, n, 1, 100_000)),
        stream_write_timeout_s=get("STREAM_WRITE_TIMEOUT_S", "5", lambda v, n: _int(v, n, 1, 300)),
        stream_retry_ms=get("STREAM_RETRY_MS", "2000", lambda v, n: _int(v, n, 100, 600_000)),
        polymarket_gamma_url=get(
            "POLYMARKET_GAMMA_URL", "https://gamma-api.polymarket.com", _url(("http", "https"))
        ),
        polymarket_clob_url=get(
            "POLYMARKET_CLOB_URL", "https://clob.polymarket.com", _url(("http", "https"))
        ),
        polymarket_clob_ws_url=get(
            "POLYMARKET_CLOB_WS_URL",
            "wss://ws-subscriptions-clob.polymarket.com/ws/market",
            _url(("ws", "wss")),
        ),
        polymarket_rtds_url=get(
            "POLYMARKET_RTDS_URL", "wss://ws-live-data.polymarket.com", _url(("ws", "wss"))
        ),
        polymarket_site_url=get(
            "POLYMARKET_SITE_URL", "https://polymarket.com", _url(("http", "https"))
        ),
        refresher_tape_dir=get("REFRESHER_TAPE_DIR", "", lambda v, n: v.strip()),
        track_record=get("TRACK_RECORD", "true", _bool),
        publish_min_interval_ms=get(
            "PUBLISH_MIN_INTERVAL_MS", "50", lambda v, n: _int(v, n, 0, 10_000)
        ),
        leader_lease_ms=get("LEADER_LEASE_MS", "1500", lambda v, n: _int(v, n, 300, 60_000)),
        # Set but empty means nobody (metrics off), not the default.
        metrics_allow=_networks(env.get("METRICS_ALLOW", "127.0.0.1/32,::1/128"), "METRICS_ALLOW"),
        refresher_metrics_host=get("REFRESHER_METRICS_HOST", "127.0.0.1", _address),
        refresher_metrics_port=get(
            "REFRESHER_METRICS_PORT", "9101", lambda v, n: _int(v, n, 0, 65535)
        ),
        cors_origins=get("CORS_ORIGINS", "*", _origins),
        verify_rate_limit=get("VERIFY_RATE_LIMIT", "30 per minute", _rate_limit),
        stream_replay_max=get("STREAM_REPLAY_MAX", "10", lambda v, n: _int(v, n, 0, 10_000)),
        clock_offset_ms=get(
            "CLOCK_OFFSET_MS",
            "0",
            lambda v, n: _int(v, n, -MAX_CLOCK_OFFSET_MS, MAX_CLOCK_OFFSET_MS),
        ),
    )


# What the web service needs from its environment outside the embedded shape, checked in this
# order: the pepper that hashes keys and sessions, and the key that signs for the app. Made up
# per process or per release (the embedded shape's fallbacks), hosts and releases would
# disagree and every key would stop working; so they are provisioned once per environment.
WEB_SECRETS = ("API_KEY_PEPPER", "SECRET_KEY")


def require_web_secrets(settings: Settings) -> Settings:
    """``settings`` when the web service may start on them; a ConfigError naming the first
    missing secret (and any other) outside the embedded shape."""
    if settings.embedded:
        return settings
    given = {"API_KEY_PEPPER": bool(settings.api_key_pepper)}
    given["SECRET_KEY"] = not settings.secret_key_generated
    missing = [name for name in WEB_SECRETS if not given[name]]
    if not missing:
        return settings
    also = f" (nor is {', '.join(missing[1:])})" if missing[1:] else ""
    raise ConfigError(
        missing[0],
        f"not set{also}: outside the embedded shape (REDIS_URL on Redis or DATABASE_URL on "
        "PostgreSQL) the web service takes it from its environment, the same value on every "
        "host, e.g. $(openssl rand -hex 32) once per environment (docs/deploy.md)",
    )


def load_web_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The web service's settings (``create_app``, gunicorn, ``python -m app.config``): those
    of ``load_settings`` and, outside the embedded shape, its secrets."""
    return require_web_secrets(load_settings(environ))


def main() -> int:
    """``python -m app.config``: check the settings in the environment, as the web service
    reads them (its secrets included; ``make run`` and ``scripts/serve.sh`` do before starting
    anything); 0 and silent when they parse, else the one line and 2."""
    try:
        load_web_settings()
    except ConfigError as error:
        return report_bad_setting(error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
