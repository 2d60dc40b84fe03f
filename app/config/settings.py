"""``Settings``: one process's parsed, validated configuration, and the defaults it names."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.markets import Market, Span
from app.plans import GUEST, USER, VIP_PRO

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
    binance_rest_url: str
    refresher_tape_dir: str = ""  # record every upstream exchange here (empty: off)
    track_record: bool = True  # the refresher stores checkpoints and outcomes (SQL store)
    publish_min_interval_ms: int = 50  # changes within this long go out in one board
    leader_lease_ms: int = 1500  # a refresher's lease on publishing (several on one bus)
    metrics_allow: tuple[str, ...] = ("127.0.0.1/32", "::1/128")  # who may read /metrics
    refresher_metrics_host: str = "127.0.0.1"
    refresher_metrics_port: int = 9101  # the refresher's own /metrics (0: off)
    cors_origins: tuple[str, ...] = ("*",)  # origins whose pages may read /api/* (app.cors)
    limits_redis_timeout_ms: int = 500  # a limit's Redis call; past it, counted in memory
    clock_offset_ms: int = 0  # the wall clock's shift (tests and drills only; app.board.timefmt)
    trusted_proxies_legacy: bool = False  # TRUSTED_PROXIES was the old bare hop count
    verify_rate_limit: str = "30 per minute"  # valid-key checks on /api/keys/verify, per account
    stream_replay_max: int = 10  # a reconnect missing more boards gets the newest only
    # Alerts (issue 51): hosts or networks admitted as targets beyond public https ones
    # (app.alerts.targets), and how many alerts an account of each plan may hold.
    alerts: bool = True  # ALERTS: evaluate and deliver the accounts' alerts
    alerts_rate_limit: str = "120 per minute"  # an account's calls to /api/alerts
    alerts_allowed_hosts: tuple[str, ...] = ()
    alerts_deliveries_per_minute: int = 120  # calls of one account's alerts in any minute
    alerts_lost_after_s: float = 20.0  # a pending delivery untouched this long: queued again
    alerts_limit_user: int = 5
    alerts_limit_vip_pro: int = 100

    @property
    def embedded(self) -> bool:
        """True in the embedded shape (``memory://`` and no PostgreSQL): one process, nothing
        shared with another host; every other shape is the production one. Said of what it
        is, never as "not Redis": a bus URL the Redis test missed is not a shape without
        secrets."""
        return self.redis_url == "memory://" and not self.database_url.startswith("postgresql")

    @property
    def uses_redis(self) -> bool:
        """True when the board bus (and later the limiter) live in a Redis server."""
        return self.redis_url.startswith(("redis://", "rediss://", "unix://", "redis+sentinel://"))

    @property
    def source_label(self) -> str:
        """What the board's numbers are, as the page's badge and ``/api/health`` say it:
        ``simulated``; ``live``; or ``live · fake upstream on this machine`` when every
        upstream address of the live source is a loopback one (the bundled fakes)."""
        if self.board_source != "polymarket":
            return "simulated"
        upstreams = (
            self.polymarket_gamma_url,
            self.polymarket_clob_url,
            self.polymarket_clob_ws_url,
            self.polymarket_rtds_url,
            self.polymarket_site_url,
            self.binance_rest_url,
        )
        if all(is_loopback_url(url) for url in upstreams):
            return LOCAL_UPSTREAM_LABEL
        return "live"

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


LOCAL_UPSTREAM_LABEL = "live · fake upstream on this machine"
SOURCE_LABELS = ("simulated", "live", LOCAL_UPSTREAM_LABEL)


def is_loopback_url(url: str) -> bool:
    """True when ``url``'s host is this machine: ``localhost`` or a loopback address."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
