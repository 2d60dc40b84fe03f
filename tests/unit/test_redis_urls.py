"""``redis+sentinel://`` URLs: what ``app.redis_urls`` reads from them, and REDIS_URL checks.

Good URLs name several sentinels, a service, a database, the servers' password and the
sentinels' password; bad ones stop start-up with a ConfigError naming REDIS_URL, and no
ConfigError ever prints a password.
"""

from __future__ import annotations

import pytest

from app.config import ConfigError, load_settings
from app.redis_urls import SentinelTarget, SentinelUrlError, is_sentinel_url, parse_sentinel_url

PASSWORD = "Pw-of-the-servers-7x"
SENTINEL_PASSWORD = "Pw-of-the-sentinels-9q"


# -- parse_sentinel_url: good URLs -------------------------------------------------------


def test_several_sentinels_a_service_and_a_database() -> None:
    target = parse_sentinel_url(
        "redis+sentinel://s1.internal:26379,10.0.0.2:26380,s3:5000/probboard/3"
    )

    assert target.sentinels == (("s1.internal", 26379), ("10.0.0.2", 26380), ("s3", 5000))
    assert target.service == "probboard"
    assert target.db == 3
    assert target.username is None
    assert target.password is None
    assert target.sentinel_password is None
    assert target.timeouts == ()


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://s1:26379/probboard",
        "redis+sentinel://s1:26379/probboard/",
        "redis+sentinel://s1:26379/probboard/0",
    ],
)
def test_the_database_defaults_to_zero(url: str) -> None:
    target = parse_sentinel_url(url)

    assert target.service == "probboard"
    assert target.db == 0


def test_one_sentinel_is_enough_and_ipv6_hosts_lose_their_brackets() -> None:
    target = parse_sentinel_url("redis+sentinel://[::1]:26379,[fd00::2]:26380/my-service.a_b/15")

    assert target.sentinels == (("::1", 26379), ("fd00::2", 26380))
    assert target.service == "my-service.a_b"
    assert target.db == 15


def test_password_sentinel_password_and_timeouts() -> None:
    url = (
        f"redis+sentinel://:{PASSWORD}@s1:26379,s2:26379/probboard/2"
        f"?sentinel_password={SENTINEL_PASSWORD}&socket_timeout=0.5&socket_connect_timeout=2"
    )

    target = parse_sentinel_url(url)

    assert target.sentinels == (("s1", 26379), ("s2", 26379))
    assert (target.service, target.db) == ("probboard", 2)
    assert target.username is None
    assert target.password == PASSWORD
    assert target.sentinel_password == SENTINEL_PASSWORD
    assert dict(target.timeouts) == {"socket_timeout": 0.5, "socket_connect_timeout": 2.0}


def test_username_and_percent_encoded_secrets_are_decoded() -> None:
    url = "redis+sentinel://app%2Dreader:p%40ss%3Aw%2Frd@s1:26379/probboard?sentinel_password=a%26b%3Dc"

    target = parse_sentinel_url(url)

    assert target.username == "app-reader"
    assert target.password == "p@ss:w/rd"
    assert target.sentinel_password == "a&b=c"
    assert target.sentinels == (("s1", 26379),)


def test_a_username_without_a_password() -> None:
    target = parse_sentinel_url("redis+sentinel://reader@s1:26379/probboard")

    assert target.username == "reader"
    assert target.password is None


def test_the_repr_of_a_target_hides_both_passwords() -> None:
    target = parse_sentinel_url(
        f"redis+sentinel://:{PASSWORD}@s1:26379/probboard?sentinel_password={SENTINEL_PASSWORD}"
    )

    shown = repr(target)

    assert isinstance(target, SentinelTarget)
    assert "probboard" in shown
    assert PASSWORD not in shown
    assert SENTINEL_PASSWORD not in shown


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis+sentinel://s1:26379/probboard", True),
        ("redis://s1:6379/0", False),
        ("rediss://s1:6379/0", False),
        ("memory://", False),
        ("redis+sentinel:/s1:26379/probboard", False),
        ("sentinel://s1:26379/probboard", False),
    ],
)
def test_is_sentinel_url(url: str, expected: bool) -> None:
    assert is_sentinel_url(url) is expected


# -- parse_sentinel_url: bad URLs --------------------------------------------------------

BAD_URLS: list[tuple[str, str]] = [
    ("redis://s1:6379/0", "redis+sentinel://"),  # not a sentinel URL at all
    ("redis+sentinel://s1:26379", "service"),  # no service
    ("redis+sentinel://s1:26379/", "service"),
    ("redis+sentinel://s1:26379/pro board/0", "service"),
    ("redis+sentinel://s1/probboard", "host:port"),  # no port
    ("redis+sentinel://s1:/probboard", "host:port"),
    ("redis+sentinel://s1:abc/probboard", "host:port"),
    ("redis+sentinel://s1:123456/probboard", "host:port"),
    ("redis+sentinel://s1:0/probboard", "port"),
    ("redis+sentinel://s1:65536/probboard", "port"),
    ("redis+sentinel://s1:99999/probboard", "port"),
    ("redis+sentinel:///probboard", "host:port"),  # no sentinel
    ("redis+sentinel://s1:26379,/probboard", "host:port"),  # an empty one
    ("redis+sentinel://s1:26379,s2/probboard", "host:port"),
    ("redis+sentinel://s1:26379/probboard/abc", "whole number"),  # a non-numeric db
    ("redis+sentinel://s1:26379/probboard/-1", "whole number"),
    ("redis+sentinel://s1:26379/probboard/1.5", "whole number"),
    ("redis+sentinel://s1:26379/probboard/0/1", "whole number"),
    ("redis+sentinel://s1:26379/probboard/\u00b2", "whole number"),
    ("redis+sentinel://s1:26379/probboard?db=2", "unknown option"),  # unknown query option
    ("redis+sentinel://s1:26379/probboard?socket_timeout=1&retry=3", "unknown option"),
    ("redis+sentinel://s1:26379/probboard?socket_timeout=abc", "socket_timeout"),  # bad timeout
    ("redis+sentinel://s1:26379/probboard?socket_timeout=", "socket_timeout"),
    ("redis+sentinel://s1:26379/probboard?socket_timeout=0", "socket_timeout"),
    ("redis+sentinel://s1:26379/probboard?socket_timeout=-1", "socket_timeout"),
    ("redis+sentinel://s1:26379/probboard?socket_timeout=61", "socket_timeout"),
    ("redis+sentinel://s1:26379/probboard?socket_timeout=nan", "socket_timeout"),
    ("redis+sentinel://s1:26379/probboard?socket_timeout=inf", "socket_timeout"),
    ("redis+sentinel://s1:26379/probboard?socket_connect_timeout=soon", "socket_connect_timeout"),
]


@pytest.mark.parametrize(("url", "says"), BAD_URLS)
def test_a_bad_url_raises_sentinel_url_error_saying_what_is_wrong(url: str, says: str) -> None:
    with pytest.raises(SentinelUrlError) as caught:
        parse_sentinel_url(url)

    assert isinstance(caught.value, ValueError)
    assert says in str(caught.value)


def test_an_empty_service_before_the_database_is_not_taken_for_the_service() -> None:
    # ``//3``: the service was left out; "3" is the database, not the name of a service.
    with pytest.raises(SentinelUrlError):
        parse_sentinel_url("redis+sentinel://s1:26379//3")


def test_the_largest_timeout_and_port_are_accepted() -> None:
    target = parse_sentinel_url("redis+sentinel://s1:65535/probboard?socket_timeout=60")

    assert target.sentinels == (("s1", 65535),)
    assert target.timeouts == (("socket_timeout", 60.0),)


# -- REDIS_URL in the configuration --------------------------------------------------------

GOOD_SENTINEL_URLS = [
    "redis+sentinel://s1:26379,s2:26379,s3:26379/probboard/0",
    "redis+sentinel://127.0.0.1:26379/probboard",
    f"redis+sentinel://:{PASSWORD}@s1:26379,s2:26380/probboard/4",
    f"redis+sentinel://app:{PASSWORD}@s1:26379/probboard/1?sentinel_password={SENTINEL_PASSWORD}",
    "redis+sentinel://s1:26379/probboard/0?socket_timeout=0.25&socket_connect_timeout=1.5",
]


@pytest.mark.parametrize("url", GOOD_SENTINEL_URLS)
def test_config_accepts_sentinel_urls_and_uses_redis(url: str) -> None:
    settings = load_settings({"REDIS_URL": url})

    assert settings.redis_url == url
    assert settings.uses_redis is True


def test_config_keeps_a_sentinel_url_as_given_apart_from_surrounding_blanks() -> None:
    url = "redis+sentinel://s1:26379,s2:26379/probboard/2"

    assert load_settings({"REDIS_URL": f"  {url} "}).redis_url == url


BAD_SENTINEL_URLS = [
    "redis+sentinel://s1:26379",  # no service
    "redis+sentinel://s1:26379/",
    "redis+sentinel://s1:notaport/probboard/0",  # bad port
    "redis+sentinel://s1:0/probboard/0",
    "redis+sentinel://s1:70000/probboard/0",
    "redis+sentinel://s1:26379,s2/probboard/0",
    "redis+sentinel://s1:26379/probboard/abc",  # non-numeric db
    "redis+sentinel://s1:26379/probboard/0?foo=1",  # unknown query option
    "redis+sentinel://s1:26379/probboard/0?socket_timeout=abc",  # bad timeouts
    "redis+sentinel://s1:26379/probboard/0?socket_timeout=0",
    "redis+sentinel://s1:26379/probboard/0?socket_connect_timeout=600",
]


@pytest.mark.parametrize("url", BAD_SENTINEL_URLS)
def test_config_refuses_a_bad_sentinel_url_naming_the_variable(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"REDIS_URL": url})

    assert caught.value.variable == "REDIS_URL"
    assert str(caught.value).startswith("REDIS_URL: ")


def test_the_config_error_says_what_is_wrong_with_the_sentinel_url() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"REDIS_URL": "redis+sentinel://s1:26379/probboard/abc"})

    assert "whole number" in str(caught.value)
    assert "'abc'" in str(caught.value)


def test_a_misspelt_scheme_is_refused_with_the_sentinel_form_in_the_message() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"REDIS_URL": "redis-sentinel://s1:26379/probboard/0"})

    assert caught.value.variable == "REDIS_URL"
    assert "redis+sentinel://" in str(caught.value)


# Every way a sentinel URL can be wrong, each carrying both secrets.
LEAKY_URLS = [
    f"redis+sentinel://:{PASSWORD}@s1:26379?sentinel_password={SENTINEL_PASSWORD}",
    f"redis+sentinel://:{PASSWORD}@s1:99999/probboard?sentinel_password={SENTINEL_PASSWORD}",
    f"redis+sentinel://user:{PASSWORD}@s1:x/probboard/0?sentinel_password={SENTINEL_PASSWORD}",
    f"redis+sentinel://user:{PASSWORD}@s1:26379/probboard/abc?sentinel_password={SENTINEL_PASSWORD}",
    f"redis+sentinel://:{PASSWORD}@s1:26379/probboard/0?sentinel_password={SENTINEL_PASSWORD}&foo=1",
    f"redis+sentinel://:{PASSWORD}@s1:26379/probboard/0?socket_timeout=x&sentinel_password={SENTINEL_PASSWORD}",
    f"redis+sentinel://:{PASSWORD}@s1:26379/probboard/0?sentinel_password={SENTINEL_PASSWORD}&socket_timeout=0",
    f"redis+sentinel://:{PASSWORD}@s1:26379,/probboard/0?sentinel_password={SENTINEL_PASSWORD}",
    f"redis+sentinel://u:{PASSWORD}@/probboard/0?sentinel_password={SENTINEL_PASSWORD}",
]


@pytest.mark.parametrize("url", LEAKY_URLS)
def test_a_config_error_never_prints_the_password_or_the_sentinel_password(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"REDIS_URL": url})

    message = str(caught.value)
    assert caught.value.variable == "REDIS_URL"
    assert PASSWORD not in message
    assert SENTINEL_PASSWORD not in message
    assert "***" in message  # the URL is still shown, with its secrets hidden
    assert "s1" in message or "probboard" in message


def test_a_password_given_in_the_query_is_taken_and_never_printed() -> None:
    # redis-py's URLs take ``?password=``; so does ours, and an error elsewhere in the URL
    # must not print it.
    url = f"redis+sentinel://s1:26379/probboard/0?password={PASSWORD}"
    assert parse_sentinel_url(url).password == PASSWORD

    with pytest.raises(ConfigError) as caught:
        load_settings({"REDIS_URL": url + "&socket_timeout=soon"})

    assert caught.value.variable == "REDIS_URL"
    assert PASSWORD not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "pieces"),
    [
        # A base64 password with "/" and "+" left unencoded: the URL does not parse.
        ("redis+sentinel://:Secret0/Part1+Two=@s1:26379/probboard/0", ("Secret0", "Part1+Two")),
        # "@" inside the password (the parser takes the last "@"), and a bad database.
        ("redis+sentinel://:Secret0@Part1Two@s1:26379/probboard/x", ("Secret0", "Part1Two")),
        # "?" inside the password: the URL does not parse.
        ("redis+sentinel://:Secret0?Part1Two@s1:26379/probboard/0", ("Secret0", "Part1Two")),
    ],
)
def test_no_piece_of_a_password_with_url_delimiters_in_it_is_printed(
    url: str, pieces: tuple[str, ...]
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"REDIS_URL": url})

    message = str(caught.value)
    assert caught.value.variable == "REDIS_URL"
    for piece in pieces:
        assert piece not in message
