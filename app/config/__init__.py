"""The one place where configuration is read: environment variables, parsed strictly.

Every setting comes from an environment variable (or the mapping a test passes to
``create_app``). A value that does not parse stops start-up with a ``ConfigError`` that
names the variable, so a typo never turns into a silently different service.

One package, one job per module: ``settings`` (the ``Settings`` dataclass and the defaults it
names), ``parsers`` (one strict parser per kind of value), ``load`` (the environment read into
``Settings``, and the web service's secrets), ``errors`` (``ConfigError`` and the one line a bad
setting prints). Every public name is importable from here, as before the split.
"""

from __future__ import annotations

from app.config.errors import BAD_SETTING_STATUS, ConfigError, report_bad_setting
from app.config.load import WEB_SECRETS, load_settings, load_web_settings, main, require_web_secrets
from app.config.parsers import LEGACY_TRUSTED_PROXIES, MAX_PROXY_HOPS, MIN_SECRET_LENGTH
from app.config.settings import (
    BOARD_SOURCES,
    DEFAULT_SYMBOL,
    DEFAULT_WINDOWS,
    LOG_FORMATS,
    LOG_LEVELS,
    MIN_REFRESH_MS,
    SOURCE_LABELS,
    Settings,
)

__all__ = [
    "BAD_SETTING_STATUS",
    "BOARD_SOURCES",
    "DEFAULT_SYMBOL",
    "DEFAULT_WINDOWS",
    "LEGACY_TRUSTED_PROXIES",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "MAX_PROXY_HOPS",
    "MIN_REFRESH_MS",
    "MIN_SECRET_LENGTH",
    "SOURCE_LABELS",
    "WEB_SECRETS",
    "ConfigError",
    "Settings",
    "load_settings",
    "load_web_settings",
    "main",
    "report_bad_setting",
    "require_web_secrets",
]
