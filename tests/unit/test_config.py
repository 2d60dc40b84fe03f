"""``app.config``: defaults, strict parsing, and a ConfigError naming the variable at start-up."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from app.config import ConfigError, Settings, load_settings, load_web_settings
from app.services import services_of
from app.web import create_app
from harness.spans import FIVE_MINUTES
from tests.conftest import BASE_CONFIG
from tests.support.contract import validated


def test_defaults_when_nothing_is_set() -> None:
    settings = load_settings({})

    assert settings.refresh_ms_guest == 5000
    assert settings.refresh_ms_user == 2000
    assert settings.refresh_ms_vip_pro == 500
    assert settings.refresh_tick_ms == 500  # follows REFRESH_MS_VIP_PRO
    assert settings.redis_url == "memory://"
    assert settings.uses_redis is False
    assert settings.database_url == ""
    assert settings.port == 8000
    assert settings.host == "127.0.0.1"
    assert settings.stale_threshold_ms == 3000
    assert settings.severe_stale_threshold_ms == 15000
    assert settings.board_source == "simulated"
    assert settings.simulation_seed is None
    assert settings.embedded_refresher is True
    assert settings.web_concurrency == 2
    assert settings.log_format == "text"
    assert settings.log_level == "INFO"
    assert settings.refresh_ms == {"guest": 5000, "user": 2000, "vip_pro": 500}


def test_secret_key_is_generated_only_when_missing() -> None:
    generated = load_settings({})
    other = load_settings({})
    given = load_settings({"SECRET_KEY": "  my-secret  "})

    assert generated.secret_key_generated is True
    assert len(generated.secret_key) >= 32
    assert generated.secret_key != other.secret_key
    assert given.secret_key_generated is False
    assert given.secret_key == "my-secret"


def test_blank_values_fall_back_to_defaults() -> None:
    settings = load_settings({"REFRESH_MS_GUEST": "  ", "PORT": "", "LOG_FORMAT": ""})

    assert settings.refresh_ms_guest == 5000
    assert settings.port == 8000
    assert settings.log_format == "text"


def test_values_are_parsed_and_normalised() -> None:
    settings = load_settings(
        {
            "REFRESH_MS_GUEST": " 7000 ",
            "REFRESH_MS_USER": "+1500",
            "REFRESH_MS_VIP_PRO": "750",
            "STALE_THRESHOLD_MS": "1000",
            "SEVERE_STALE_THRESHOLD_MS": "1001",
            "PORT": "65535",
            "LOG_FORMAT": "JSON",
            "LOG_LEVEL": "debug",
            "EMBEDDED_REFRESHER": "Off",
            "SIMULATION_SEED": "42",
            "WEB_CONCURRENCY": "64",
            "BOARD_SOURCE": " Simulated ",
        }
    )

    assert settings.refresh_ms == {"guest": 7000, "user": 1500, "vip_pro": 750}
    assert settings.refresh_tick_ms == 750
    assert settings.stale_threshold_ms == 1000
    assert settings.severe_stale_threshold_ms == 1001
    assert settings.port == 65535
    assert settings.log_format == "json"
    assert settings.log_level == "DEBUG"
    assert settings.embedded_refresher is False
    assert settings.simulation_seed == 42
    assert settings.web_concurrency == 64
    assert settings.board_source == "simulated"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", True),
        ("true", True),
        ("YES", True),
        ("on", True),
        ("0", False),
        ("False", False),
        ("no", False),
        ("OFF", False),
    ],
)
def test_embedded_refresher_booleans(text: str, expected: bool) -> None:
    assert load_settings({"EMBEDDED_REFRESHER": text}).embedded_refresher is expected


@pytest.mark.parametrize(
    ("url", "uses_redis"),
    [
        ("memory://", False),
        ("redis://localhost:6379/0", True),
        ("redis://127.0.0.1", True),
        ("redis://user:pw@cache.internal:6380/3", True),
        ("rediss://cache.internal:6380/1", True),
        ("unix:///run/redis/redis.sock", True),
    ],
)
def test_accepted_redis_urls(url: str, uses_redis: bool) -> None:
    settings = load_settings({"REDIS_URL": url})

    assert settings.redis_url == url
    assert settings.uses_redis is uses_redis


SUPERSCRIPT_TWO = "\u00b2"  # str.isdigit() says yes, int() says no

BAD_VALUES: list[tuple[str, str]] = [
    *[
        (variable, value)
        for variable in ("REFRESH_MS_GUEST", "REFRESH_MS_USER", "REFRESH_MS_VIP_PRO")
        for value in ("499", "0", "-600", "abc", "5e3", "1000.0", "0x400", "1 000")
    ],
    ("REFRESH_MS_GUEST", "5000" + SUPERSCRIPT_TWO),
    ("REFRESH_TICK_MS", "99"),
    ("PORT", "0"),
    ("PORT", "70000"),
    ("PORT", "abc"),
    ("PORT", "-1"),
    ("PORT", "80.5"),
    ("REDIS_URL", "http://x"),
    ("REDIS_URL", "redis://"),
    ("REDIS_URL", "redis://:6379/0"),
    ("REDIS_URL", "redis://localhost:6379/abc"),
    ("REDIS_URL", "redis://localhost:6379/-1"),
    ("REDIS_URL", "redis://localhost:6379/0/1"),
    ("REDIS_URL", "redis://localhost:6379/" + SUPERSCRIPT_TWO),
    ("REDIS_URL", "redis://localhost:notaport/0"),
    ("REDIS_URL", "redis://localhost:0/0"),
    ("REDIS_URL", "redis://localhost:99999/0"),
    ("REDIS_URL", "unix://"),
    ("REDIS_URL", "memory"),
    ("LOG_FORMAT", "xml"),
    ("LOG_LEVEL", "trace"),
    ("BOARD_SOURCE", "live"),
    ("EMBEDDED_REFRESHER", "maybe"),
    ("EMBEDDED_REFRESHER", "2"),
    ("SIMULATION_SEED", "abc"),
    ("SIMULATION_SEED", "1.5"),
    ("WEB_CONCURRENCY", "0"),
    ("WEB_CONCURRENCY", "65"),
    ("STALE_THRESHOLD_MS", "0"),
    ("STALE_THRESHOLD_MS", "abc"),
    ("SEVERE_STALE_THRESHOLD_MS", "soon"),
]


@pytest.mark.parametrize(("variable", "value"), BAD_VALUES)
def test_bad_value_raises_config_error_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({variable: value})

    assert caught.value.variable == variable
    assert variable in str(caught.value)


@pytest.mark.parametrize(
    ("stale", "severe"),
    [("3000", "3000"), ("3000", "2999"), ("20000", None), (None, "3000"), (None, "100")],
)
def test_severe_threshold_must_exceed_stale_threshold(
    stale: str | None, severe: str | None
) -> None:
    env = {}
    if stale is not None:
        env["STALE_THRESHOLD_MS"] = stale
    if severe is not None:
        env["SEVERE_STALE_THRESHOLD_MS"] = severe

    with pytest.raises(ConfigError) as caught:
        load_settings(env)

    assert caught.value.variable == "SEVERE_STALE_THRESHOLD_MS"
    assert "SEVERE_STALE_THRESHOLD_MS" in str(caught.value)


def test_severe_threshold_one_above_stale_is_accepted() -> None:
    settings = load_settings({"STALE_THRESHOLD_MS": "3000", "SEVERE_STALE_THRESHOLD_MS": "3001"})

    assert (settings.stale_threshold_ms, settings.severe_stale_threshold_ms) == (3000, 3001)


def test_config_error_is_a_value_error_with_the_problem() -> None:
    with pytest.raises(ValueError, match=r"^PORT: must be at most 65535, got 70000$"):
        load_settings({"PORT": "70000"})


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("REFRESH_MS_GUEST", "abc"),
        ("REFRESH_MS_VIP_PRO", "100"),
        ("PORT", "70000"),
        ("REDIS_URL", "http://x"),
        ("LOG_FORMAT", "xml"),
        ("EMBEDDED_REFRESHER", "maybe"),
        ("SEVERE_STALE_THRESHOLD_MS", "3000"),
    ],
)
def test_create_app_refuses_bad_config(variable: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        create_app({**BASE_CONFIG, variable: value})

    assert caught.value.variable == variable


def test_create_app_with_a_mapping_ignores_the_process_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REFRESH_MS_GUEST", "abc")
    monkeypatch.setenv("REDIS_URL", "http://not-used")
    monkeypatch.setenv("PORT", "70000")

    app = create_app({**BASE_CONFIG, "REFRESH_MS_USER": "2500"})
    settings: Settings = services_of(app).settings

    assert settings.refresh_ms == {"guest": 5000, "user": 2500, "vip_pro": 500}
    assert settings.redis_url == "memory://"
    assert settings.port == 8000
    health = validated("health", app.test_client().get("/api/health").data)
    assert health["refreshMs"] == {"guest": 5000, "user": 2500, "vip_pro": 500}


def test_create_app_accepts_non_string_values() -> None:
    app = create_app({**BASE_CONFIG, "REFRESH_MS_GUEST": 6000, "PORT": 9000})

    assert services_of(app).settings.refresh_ms_guest == 6000
    assert services_of(app).settings.port == 9000


@pytest.mark.parametrize(
    ("value", "named"),
    [("DOGE", "DOGE"), ("BTC,ETH,BTC", "BTC"), ("BTC,,ETH", "BTC,,ETH"), ("btc;eth", "BTC;ETH")],
)
def test_an_unknown_or_repeated_symbol_stops_the_app_naming_symbols(value: str, named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        create_app({**BASE_CONFIG, "SYMBOLS": value})

    assert caught.value.variable == "SYMBOLS"
    assert str(caught.value).startswith("SYMBOLS: ") and named in str(caught.value).upper()


@pytest.mark.parametrize("value", ["", " ", ",", " , "])
def test_a_set_but_empty_symbols_is_refused_not_read_as_btc(value: str) -> None:
    """Only an unset ``SYMBOLS`` means the default: an empty one is an operator's slip."""
    with pytest.raises(ConfigError) as caught:
        load_settings({"SYMBOLS": value})

    assert caught.value.variable == "SYMBOLS"
    assert "expected comma-separated symbols among BTC, ETH, SOL, XRP" in str(caught.value)


def test_symbols_choose_the_board_rows_in_order() -> None:
    default = load_settings({})
    assert [m.symbol for m in default.markets] == ["BTC"]
    four = load_settings({"SYMBOLS": " xrp, BTC ,sol,Eth "})
    assert [m.symbol for m in four.markets] == ["XRP", "BTC", "SOL", "ETH"]
    assert [m.chainlink for m in four.markets] == ["xrp/usd", "btc/usd", "sol/usd", "eth/usd"]
    assert four.markets[0].slug(1_795_516_200, FIVE_MINUTES) == "xrp-updown-5m-1795516200"


@pytest.mark.parametrize(
    ("value", "named"),
    [("1d", "'1d'"), ("5m,15m,5m", "5m given more than once"), ("5m,,15m", "'5m,,15m'"),
     ("", "expected comma-separated windows among 5m, 15m"), ("5m;15m", "'5m;15m'")],
)  # fmt: skip
def test_an_unknown_repeated_or_empty_window_stops_the_app_naming_windows(
    value: str, named: str
) -> None:
    """WINDOWS is refused at start as SYMBOLS is (issue 39): the variable and the bad value."""
    with pytest.raises(ConfigError) as caught:
        create_app({**BASE_CONFIG, "WINDOWS": value})

    assert caught.value.variable == "WINDOWS"
    assert str(caught.value).startswith("WINDOWS: ") and named in str(caught.value)


def test_windows_choose_the_spans_served_in_order() -> None:
    default = load_settings({})
    assert [(s.name, s.seconds) for s in default.windows] == [("5m", 300)]
    both = load_settings({"WINDOWS": " 15M, 5m "})
    assert [(s.name, s.seconds, s.site_variant) for s in both.windows] == [
        ("15m", 900, "fifteen"),
        ("5m", 300, "fiveminute"),
    ]
    assert both.windows[0].start(1_795_516_799.9) == 1_795_516_200  # a multiple of 900
    assert both.windows[1].start(1_795_516_799.9) == 1_795_516_500
    assert both.markets[0].slug(1_795_516_200, both.windows[0]) == ("btc-updown-15m-1795516200")


# -- TRUSTED_PROXIES and TRUSTED_PROXY_HOPS (issue 46) ----------------------------------------


def test_nobody_is_a_trusted_proxy_by_default() -> None:
    settings = load_settings({})

    assert settings.trusted_proxies == ()
    assert settings.trusted_proxy_hops == 1
    assert settings.trusted_proxies_legacy is False


def test_trusted_proxies_are_networks_with_a_hop_count() -> None:
    settings = load_settings(
        {"TRUSTED_PROXIES": " 127.0.0.1/32, 10.0.0.5/24 ,::1,fd00::/8", "TRUSTED_PROXY_HOPS": "3"}
    )

    # Normalised: a host address becomes its /32 or /128, a host bit set its network.
    assert settings.trusted_proxies == ("127.0.0.1/32", "10.0.0.0/24", "::1/128", "fd00::/8")
    assert settings.trusted_proxy_hops == 3
    assert settings.trusted_proxies_legacy is False


@pytest.mark.parametrize(("value", "hops"), [("1", 1), ("2", 2), (" 10 ", 10)])
def test_a_bare_hop_count_is_the_old_form_trusted_from_loopback_only(value: str, hops: int) -> None:
    """Existing VMs keep TRUSTED_PROXIES=1 in an env file the deploy never rewrites."""
    settings = load_settings({"TRUSTED_PROXIES": value})

    assert settings.trusted_proxies == ("127.0.0.1/32", "::1/128")  # never the private network
    assert settings.trusted_proxy_hops == hops
    assert settings.trusted_proxies_legacy is True


def test_the_old_zero_trusts_nobody() -> None:
    settings = load_settings({"TRUSTED_PROXIES": "0"})

    assert settings.trusted_proxies == ()
    assert settings.trusted_proxies_legacy is False


@pytest.mark.parametrize(
    ("env", "variable", "problem"),
    [
        ({"TRUSTED_PROXIES": "nginx"}, "TRUSTED_PROXIES", "not an address or network"),
        ({"TRUSTED_PROXIES": "10.0.0.0/33"}, "TRUSTED_PROXIES", "not an address or network"),
        ({"TRUSTED_PROXIES": "127.0.0.1:8000"}, "TRUSTED_PROXIES", "not an address or network"),
        ({"TRUSTED_PROXIES": "0.0.0.0/0"}, "TRUSTED_PROXIES", "trusts every address"),
        ({"TRUSTED_PROXIES": "10.0.0.0/24,::/0"}, "TRUSTED_PROXIES", "trusts every address"),
        ({"TRUSTED_PROXIES": "11"}, "TRUSTED_PROXIES", "at most 10"),
        ({"TRUSTED_PROXIES": "-1"}, "TRUSTED_PROXIES", "at least 0"),
        ({"TRUSTED_PROXIES": "1", "TRUSTED_PROXY_HOPS": "1"}, "TRUSTED_PROXIES", "old hop count"),
        ({"TRUSTED_PROXY_HOPS": "0"}, "TRUSTED_PROXY_HOPS", "at least 1"),
        ({"TRUSTED_PROXY_HOPS": "11"}, "TRUSTED_PROXY_HOPS", "at most 10"),
        ({"TRUSTED_PROXY_HOPS": "two"}, "TRUSTED_PROXY_HOPS", "whole number"),
    ],
)
def test_a_bad_trusted_proxies_setting_stops_start_up_naming_it(
    env: dict[str, str], variable: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        create_app({**BASE_CONFIG, **env})

    assert caught.value.variable == variable
    assert problem in str(caught.value)


# -- issue 46: the production shape refuses to start without its secrets ----------------------

SECRETS = {
    "SECRET_KEY": "secret-of-this-environment",
    "API_KEY_PEPPER": "pepper-of-this-environment",
}
PRODUCTION_SHAPES = {
    "redis": {"REDIS_URL": "redis://127.0.0.1:6379/0"},
    "postgresql": {"DATABASE_URL": "postgresql://probboard@127.0.0.1:5432/probboard"},
}


@pytest.mark.parametrize("blank", [None, "", "   "], ids=["unset", "empty", "blank"])
@pytest.mark.parametrize("missing", list(SECRETS))
@pytest.mark.parametrize("shape", list(PRODUCTION_SHAPES))
def test_create_app_refuses_the_production_shape_without_a_secret(
    shape: str, missing: str, blank: str | None
) -> None:
    """Redis or PostgreSQL without ``API_KEY_PEPPER`` (or ``SECRET_KEY``): a ConfigError
    naming the variable, one line, before anything is built (no pepper file is written)."""
    config = {**BASE_CONFIG, **PRODUCTION_SHAPES[shape], **SECRETS}
    del config[missing]
    if blank is not None:
        config[missing] = blank

    with pytest.raises(ConfigError) as caught:
        create_app(config)

    assert caught.value.variable == missing
    assert str(caught.value).startswith(f"{missing}: ") and "\n" not in str(caught.value)


def test_with_both_missing_the_line_names_the_pepper_and_the_key() -> None:
    config = {**BASE_CONFIG, **PRODUCTION_SHAPES["redis"]}
    del config["SECRET_KEY"], config["API_KEY_PEPPER"]

    with pytest.raises(ConfigError) as caught:
        create_app(config)

    assert caught.value.variable == "API_KEY_PEPPER"
    assert "SECRET_KEY" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("missing", list(SECRETS))
def test_the_config_check_exits_2_with_one_line_naming_the_secret(
    missing: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m app.config`` (what ``make run`` and ``scripts/serve.sh`` run first)."""
    from app.config import main

    for name in ("REDIS_URL", "DATABASE_URL", *SECRETS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")
    for name, value in SECRETS.items():
        if name != missing:
            monkeypatch.setenv(name, value)

    assert main() == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [err.rstrip("\n")] and err.startswith(f"probboard: {missing}: ")


def test_the_embedded_shape_needs_no_secret(tmp_path: Path) -> None:
    """memory:// with SQLite (the default) starts without either: one process, nothing to
    share; the pepper file in ``instance/`` and a per-process key are enough there."""
    config = {k: v for k, v in BASE_CONFIG.items() if k not in SECRETS}
    app = create_app({**config, "DATABASE_URL": f"sqlite:///{tmp_path / 'app.sqlite3'}"})
    assert services_of(app).settings.secret_key_generated


def test_a_random_secret_key_is_said_once_when_serving_not_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 50, point 6: an operator's command builds the app and serves nothing: no
    warning then; the first request served says it, once."""
    config = {k: v for k, v in BASE_CONFIG.items() if k not in SECRETS}
    with caplog.at_level(logging.WARNING, logger="app.web"):
        app = create_app({**config, "DATABASE_URL": f"sqlite:///{tmp_path / 'app.sqlite3'}"})
        assert "SECRET_KEY" not in caplog.text
        client = app.test_client()
        assert client.get("/api/health").status_code == 200
        assert client.get("/api/health").status_code == 200
    assert caplog.text.count("SECRET_KEY is not set") == 1, caplog.text


def test_the_refresher_needs_no_secret() -> None:
    """The refresher's settings (``load_settings``) take the production shape without the
    web's secrets: it hashes no key and signs nothing."""
    settings = load_settings(PRODUCTION_SHAPES["redis"])
    assert settings.uses_redis and settings.api_key_pepper == ""


def test_the_web_settings_take_the_production_shape_with_both_secrets() -> None:
    from app.config import load_web_settings

    settings = load_web_settings({**PRODUCTION_SHAPES["postgresql"], **SECRETS})
    assert settings.api_key_pepper == SECRETS["API_KEY_PEPPER"]
    assert settings.secret_key == SECRETS["SECRET_KEY"] and not settings.secret_key_generated


def test_stream_replay_max_is_parsed_strictly() -> None:
    assert load_settings({}).stream_replay_max == 10
    assert load_settings({"STREAM_REPLAY_MAX": "0"}).stream_replay_max == 0
    assert load_settings({"STREAM_REPLAY_MAX": " 240 "}).stream_replay_max == 240
    for bad in ("-1", "ten", "1.5", "10001"):
        with pytest.raises(ConfigError) as caught:
            load_settings({"STREAM_REPLAY_MAX": bad})
        assert caught.value.variable == "STREAM_REPLAY_MAX"


# -- the security review of issue 46 ----------------------------------------------------------


@pytest.mark.parametrize("host", ["10.0.0.11", "0.0.0.0", "::", "fd00::5", "gunicorn.internal"])
@pytest.mark.parametrize("value", ["1", "2"])
def test_the_old_hop_count_is_refused_when_gunicorn_listens_beyond_loopback(
    host: str, value: str
) -> None:
    """Several hosts (gunicorn on ``HOST=10.0.0.x``, nginx elsewhere) with an old env file's
    ``TRUSTED_PROXIES=1``: read as loopback only, every client would be nginx's address, and
    anyone could fill the failed-key throttle for all. One line naming the variable, and what
    to write instead."""
    with pytest.raises(ConfigError) as caught:
        create_app({**BASE_CONFIG, "HOST": host, "TRUSTED_PROXIES": value})

    message = str(caught.value)
    assert caught.value.variable == "TRUSTED_PROXIES"
    assert message.startswith("TRUSTED_PROXIES: ") and "\n" not in message
    assert "127.0.0.1/32,::1/128" in message and "nginx" in message and host in message


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost", " 127.0.0.1 "])
def test_on_a_loopback_host_the_old_hop_count_still_starts(host: str) -> None:
    settings = load_settings({"HOST": host, "TRUSTED_PROXIES": "1"})

    assert settings.trusted_proxies == ("127.0.0.1/32", "::1/128")
    assert settings.trusted_proxies_legacy is True


def test_the_old_zero_trusts_nobody_on_any_host() -> None:
    """``0`` meant no proxy before and means nobody now: nothing to misread, so not refused."""
    settings = load_settings({"HOST": "10.0.0.11", "TRUSTED_PROXIES": "0"})

    assert settings.trusted_proxies == ()


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        ("REDIS://127.0.0.1:6399/0", "redis://127.0.0.1:6399/0"),
        ("Rediss://cache.internal:6380/1", "rediss://cache.internal:6380/1"),
        ("UNIX:///run/redis/redis.sock", "unix:///run/redis/redis.sock"),
        (
            "Redis+Sentinel://s1:26379,s2:26379/probboard/0",
            "redis+sentinel://s1:26379,s2:26379/probboard/0",
        ),
    ],
)
def test_a_redis_scheme_in_capitals_is_the_production_shape(url: str, parsed: str) -> None:
    """Once ``REDIS://`` parsed but ran the embedded shape (memory bus, no secrets check)."""
    settings = load_settings({"REDIS_URL": url})

    assert settings.redis_url == parsed
    assert settings.uses_redis and not settings.embedded
    with pytest.raises(ConfigError) as caught:
        load_web_settings({"REDIS_URL": url})
    assert caught.value.variable == "API_KEY_PEPPER"


def test_database_schemes_are_read_in_any_case(tmp_path: Path) -> None:
    postgres = load_settings({"DATABASE_URL": "PostgreSQL://probboard@db.internal/probboard"})
    assert postgres.database_url == "postgresql+psycopg://probboard@db.internal/probboard"
    assert not postgres.embedded
    sqlite = load_settings({"DATABASE_URL": f"SQLite:///{tmp_path / 'a.sqlite3'}"})
    assert sqlite.database_url == f"sqlite:///{tmp_path / 'a.sqlite3'}" and sqlite.embedded
    assert load_settings({"REDIS_URL": "MEMORY://"}).redis_url == "memory://"


def test_only_the_memory_bus_is_the_embedded_shape() -> None:
    """``embedded`` says what it is (memory:// and no PostgreSQL), not what it is not: a Redis
    URL the Redis test misses is never the shape without secrets."""
    settings = load_settings({})
    assert settings.embedded
    assert not replace(settings, redis_url="REDIS://127.0.0.1:6399/0").embedded
    assert not replace(settings, redis_url="valkey://127.0.0.1:6399/0").embedded


@pytest.mark.parametrize("shape", list(PRODUCTION_SHAPES))
@pytest.mark.parametrize("key", ["Z9", "test-secret", "  fifteen-chars!!  "])
def test_a_short_secret_key_stops_the_production_shape(shape: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        create_app({**BASE_CONFIG, **PRODUCTION_SHAPES[shape], **SECRETS, "SECRET_KEY": key})

    message = str(caught.value)
    assert caught.value.variable == "SECRET_KEY"
    assert message.startswith("SECRET_KEY: ") and "at least 16" in message and "\n" not in message
    assert key.strip() not in message  # never echoed


def test_a_secret_key_of_16_characters_is_enough_and_only_the_web_asks() -> None:
    shape = {**PRODUCTION_SHAPES["redis"], **SECRETS}
    assert load_web_settings({**shape, "SECRET_KEY": "0123456789abcdef"}).secret_key
    assert load_settings({**shape, "SECRET_KEY": "x"}).secret_key == "x"  # the refresher
    assert load_web_settings({"SECRET_KEY": "x"}).embedded  # the embedded shape: anything


@pytest.mark.parametrize(
    ("variable", "value", "parsed"),
    [
        ("TRUSTED_PROXIES", "::ffff:10.0.0.0/104", ("10.0.0.0/8",)),
        ("TRUSTED_PROXIES", "127.0.0.1/32,::ffff:10.0.0.5", ("127.0.0.1/32", "10.0.0.5/32")),
        ("METRICS_ALLOW", "::ffff:10.0.0.9/128,::1/128", ("10.0.0.9/32", "::1/128")),
        ("METRICS_ALLOW", "::ffff:192.0.2.0/120", ("192.0.2.0/24",)),
    ],
)
def test_ipv4_mapped_networks_are_read_as_ipv4(
    variable: str, value: str, parsed: tuple[str, ...]
) -> None:
    """Peers are normalised to IPv4, so an IPv4-mapped network would never match one."""
    settings = load_settings({variable: value})

    assert getattr(settings, variable.lower()) == parsed


def test_the_whole_ipv4_mapped_range_is_every_address() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"TRUSTED_PROXIES": "::ffff:0.0.0.0/96"})
    assert caught.value.variable == "TRUSTED_PROXIES" and "trusts every address" in str(
        caught.value
    )


def test_clock_offset_ms_is_a_whole_number_of_milliseconds_within_a_day() -> None:
    assert load_settings({}).clock_offset_ms == 0
    assert load_settings({"CLOCK_OFFSET_MS": " -3600000 "}).clock_offset_ms == -3_600_000
    assert load_settings({"CLOCK_OFFSET_MS": "86400000"}).clock_offset_ms == 86_400_000
    assert load_settings({"CLOCK_OFFSET_MS": "-86400000"}).clock_offset_ms == -86_400_000


@pytest.mark.parametrize("bad", ["86400001", "-86400001", "1.5", "1e3", "an hour", "0x10", "5 s"])
def test_a_bad_clock_offset_ms_stops_start_up_in_one_line_naming_it(bad: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"CLOCK_OFFSET_MS": bad})
    assert caught.value.variable == "CLOCK_OFFSET_MS"
    message = str(caught.value)
    assert message.startswith("CLOCK_OFFSET_MS: ") and "\n" not in message, message
    with pytest.raises(ConfigError, match=r"^CLOCK_OFFSET_MS: "):
        create_app({**BASE_CONFIG, "CLOCK_OFFSET_MS": bad})
