"""One strict parser per kind of value: ``(value, variable) -> parsed``, or a ``ConfigError``
that names the variable."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from urllib.parse import urlsplit

from app.config.errors import ConfigError
from app.markets import Market, Span, parse_symbols, parse_windows
from app.redis_urls import SentinelUrlError, is_sentinel_url, parse_sentinel_url

_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]{1,12}")


def integer(
    value: str, variable: str, minimum: int | None = None, maximum: int | None = None
) -> int:
    """A whole number of at most 12 digits, within ``minimum`` and ``maximum`` when given."""
    text = value.strip()
    if not _WHOLE_NUMBER.fullmatch(text):
        raise ConfigError(variable, f"expected a whole number, got {value!r}")
    number = int(text)
    if minimum is not None and number < minimum:
        raise ConfigError(variable, f"must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ConfigError(variable, f"must be at most {maximum}, got {number}")
    return number


def boolean(value: str, variable: str) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off``, in any case."""
    text = value.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ConfigError(variable, f"expected true or false, got {value!r}")


def choice(value: str, variable: str, choices: tuple[str, ...], upper: bool = False) -> str:
    """One of ``choices`` (compared in lower case, or upper with ``upper``)."""
    text = value.strip().upper() if upper else value.strip().lower()
    if text not in choices:
        raise ConfigError(variable, f"expected one of {', '.join(choices)}, got {value!r}")
    return text


def without_password(url: str) -> str:
    """``url`` with any password replaced, so an error message never prints one."""
    scheme, separator, rest = url.partition("://")
    if separator and "@" in rest:
        # Everything up to the last "@": a password may hold "/", "?" or "@" unencoded.
        credentials, _, hosts = rest.rpartition("@")
        user, colon, _ = credentials.partition(":")
        rest = f"{user}:***@{hosts}" if colon else f"***@{hosts}"
    hidden = f"{scheme}{separator}{rest}"
    return re.sub(r"((?:^|[?&])(?:sentinel_)?password=)[^&]*", r"\1***", hidden)


def lower_scheme(text: str) -> str:
    """``text`` with its URL scheme in lower case (``REDIS://h`` is ``redis://h``): schemes
    are case-insensitive (RFC 3986), and every test of one here compares lower case."""
    scheme, separator, rest = text.partition("://")
    return f"{scheme.lower()}{separator}{rest}" if separator else text


def redis_url(value: str, variable: str) -> str:
    """``REDIS_URL``: memory://, redis://, rediss://, unix:// or a Sentinel URL."""
    text = lower_scheme(value.strip())
    shown = without_password(text)
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


def database_url(value: str, variable: str) -> str:
    """Accept the plain PostgreSQL form and map it to the psycopg 3 driver."""
    text = lower_scheme(value.strip())
    if text == "":
        return ""  # the embedded default: an SQLite file in the instance folder
    shown = without_password(text)
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


_IPV4_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")


def networks(value: str, variable: str) -> tuple[str, ...]:
    """Comma-separated addresses or networks (``10.0.0.0/8``); empty: nobody.

    An IPv4-mapped IPv6 network (``::ffff:10.0.0.0/104``) is read as the IPv4 network it maps
    (``10.0.0.0/8``): peers are normalised to IPv4 (``app.forwarded``), so as written it could
    never match one.
    """
    parts = [part.strip() for part in value.split(",") if part.strip()]
    found = []
    for part in parts:
        try:
            network = ipaddress.ip_network(part, strict=False)
        except ValueError:
            raise ConfigError(variable, f"not an address or network: {part!r}") from None
        if isinstance(network, ipaddress.IPv6Network) and network.subnet_of(_IPV4_MAPPED):
            mapped = network.network_address.ipv4_mapped
            assert mapped is not None  # inside ::ffff:0:0/96
            part = str(ipaddress.IPv4Network((mapped, network.prefixlen - 96)))
        found.append(part)
    return tuple(found)


_HOST_NAME = re.compile(r"(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?)+")


def hosts_or_networks(value: str, variable: str) -> tuple[str, ...]:
    """Comma-separated host names, addresses or networks (``receiver.internal``,
    ``127.0.0.1``, ``10.0.0.0/8``); empty: none."""
    found = []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        try:
            ipaddress.ip_network(part, strict=False)
        except ValueError:
            if not _HOST_NAME.fullmatch(part):
                raise ConfigError(variable, f"not a host, address or network: {part!r}") from None
        found.append(part)
    return tuple(found)


# What the old form TRUSTED_PROXIES=N (a bare hop count, before issue 46) trusts: the nginx
# on the same host, never the private network.
LEGACY_TRUSTED_PROXIES = ("127.0.0.1/32", "::1/128")
MAX_PROXY_HOPS = 10


def is_loopback(host: str) -> bool:
    """True when ``HOST`` (gunicorn's bind address) is on loopback only."""
    text = host.strip()
    if text == "localhost":
        return True
    try:
        return ipaddress.ip_address(text.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost: it may be any interface


def trusted_proxies(
    value: str, hops_value: str | None, host: str
) -> tuple[tuple[str, ...], int, bool]:
    """``TRUSTED_PROXIES`` and ``TRUSTED_PROXY_HOPS``: (networks, hops, old form).

    ``TRUSTED_PROXIES`` lists the proxies' networks (``127.0.0.1/32,10.0.0.0/24``; empty:
    nobody). A bare whole number N is the old hop count: N hops trusted from loopback only
    (0: nobody), and then ``TRUSTED_PROXY_HOPS`` may not be set as well. The old N is
    refused when ``HOST`` is not loopback: there nginx may be another host, which loopback
    only would not trust, making every client nginx's one address (one caller could then
    fill the failed-key throttle for every key holder).
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
        legacy_hops = integer(text, "TRUSTED_PROXIES", 0, MAX_PROXY_HOPS)
        if legacy_hops and not is_loopback(host):
            raise ConfigError(
                "TRUSTED_PROXIES",
                f"the old hop count {text!r} trusts loopback only, but HOST={host.strip()} "
                "is not loopback: list the proxies' networks instead, 127.0.0.1/32,::1/128 "
                "for nginx on the same host or the nginx hosts' (e.g. 10.0.0.5/32) "
                "(docs/deploy.md)",
            )
        legacy: tuple[str, ...] = LEGACY_TRUSTED_PROXIES if legacy_hops else ()
        return legacy, max(legacy_hops, 1), legacy_hops > 0
    hops = integer(
        hops_value if hops_value and hops_given else "1", "TRUSTED_PROXY_HOPS", 1, MAX_PROXY_HOPS
    )
    trusted = tuple(
        str(ipaddress.ip_network(part, strict=False)) for part in networks(value, "TRUSTED_PROXIES")
    )
    for network in trusted:
        if network.endswith("/0"):
            raise ConfigError(
                "TRUSTED_PROXIES",
                f"{network} trusts every address: any caller could pick its own; "
                "list the proxies' networks",
            )
    return trusted, hops, False


_ORIGIN = re.compile(r"https?://(?:[a-z0-9-]+(?:\.[a-z0-9-]+)*|\[[0-9a-f:.]+\])(?::([0-9]{1,5}))?")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def origins(value: str, variable: str) -> tuple[str, ...]:
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


def address(value: str, variable: str) -> str:
    """An IP address to listen on."""
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        raise ConfigError(variable, f"expected an IP address, got {value!r}") from None


def rate_limit(value: str, variable: str) -> str:
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


def url(schemes: tuple[str, ...]) -> Callable[[str, str], str]:
    """A parser of a URL of one of ``schemes`` with a host (its trailing ``/`` dropped)."""

    def parse(value: str, variable: str) -> str:
        text = value.strip()
        parts = urlsplit(text)
        if parts.scheme not in schemes or not parts.hostname:
            raise ConfigError(variable, f"expected a {'/'.join(schemes)} URL, got {value!r}")
        return text.rstrip("/")

    return parse


def symbols(value: str, variable: str) -> tuple[Market, ...]:
    """The markets named by ``SYMBOLS`` (``app.markets.parse_symbols``)."""
    try:
        return parse_symbols(value)
    except ValueError as exc:
        raise ConfigError(variable, str(exc)) from None


def windows(value: str, variable: str) -> tuple[Span, ...]:
    """The windows named by ``WINDOWS`` (``app.markets.parse_windows``)."""
    try:
        return parse_windows(value)
    except ValueError as exc:
        raise ConfigError(variable, str(exc)) from None


# The shortest API_KEY_PEPPER, and SECRET_KEY outside the embedded shape.
MIN_SECRET_LENGTH = 16


def pepper(value: str, variable: str) -> str:
    """The key pepper: empty (the embedded shape makes one up) or at least 16 characters."""
    text = value.strip()
    if text and len(text) < MIN_SECRET_LENGTH:
        raise ConfigError(variable, "must be at least 16 characters (use a random string)")
    return text
