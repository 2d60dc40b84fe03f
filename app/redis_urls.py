"""Redis Sentinel URLs: ``redis+sentinel://[user:password@]host:port,host:port/service[/db]``.

The notation the limits library (the rate limits' storage) already reads: the sentinels to ask,
comma-separated, then the service (the name the sentinels monitor the primary under) and the
database number. The password, when given, is the Redis servers' (sentinels usually have
none; ``?sentinel_password=`` gives theirs). ``socket_timeout`` and
``socket_connect_timeout`` in the query apply to the servers and the sentinels alike.
Parsing needs no Redis library, so the configuration can use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote

SCHEME = "redis+sentinel"
_HOST_PORT = re.compile(r"(?P<host>[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})")
_SERVICE = re.compile(r"[A-Za-z0-9._-]{1,64}")
_TIMEOUTS = ("socket_timeout", "socket_connect_timeout")


class SentinelUrlError(ValueError):
    """A ``redis+sentinel://`` URL that does not parse; the message says what is wrong."""


@dataclass(frozen=True)
class SentinelTarget:
    """What a ``redis+sentinel://`` URL names."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    sentinel_password: str | None = field(default=None, repr=False)
    timeouts: tuple[tuple[str, float], ...] = ()


def is_sentinel_url(url: str) -> bool:
    """True for ``redis+sentinel://`` URLs."""
    return url.startswith(SCHEME + "://")


def parse_sentinel_url(url: str) -> SentinelTarget:
    """The parts of a ``redis+sentinel://`` URL; ``SentinelUrlError`` says what is wrong."""
    if not is_sentinel_url(url):
        raise SentinelUrlError(f"expected {SCHEME}://host:port,host:port/service/db")
    rest = url[len(SCHEME) + 3 :]
    rest, _, query = rest.partition("?")
    location, _, path = rest.partition("/")
    username = password = None
    if "@" in location:
        credentials, _, location = location.rpartition("@")
        user, has_password, secret = credentials.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if has_password else None
    sentinels = []
    parts = location.split(",")
    for number, part in enumerate(parts, 1):
        match = _HOST_PORT.fullmatch(part.strip())
        if match is None:
            # The piece is not echoed: it may be part of a password that was not URL-encoded.
            raise SentinelUrlError(
                f"sentinel {number} of {len(parts)} is not host:port "
                "(URL-encode a password's '/', '?', '#' and '@')"
            )
        port = int(match["port"])
        if not 0 < port < 65536:
            raise SentinelUrlError(f"bad sentinel port {port}")
        sentinels.append((match["host"].strip("[]"), port))
    service, _, db_text = path.removesuffix("/").partition("/")
    if not _SERVICE.fullmatch(service):
        raise SentinelUrlError("name the service the sentinels monitor, as in .../probboard/0")
    if db_text and not re.fullmatch(r"[0-9]{1,5}", db_text):
        raise SentinelUrlError(f"the database number must be a whole number, got {db_text!r}")
    sentinel_password = None
    timeouts = []
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == "sentinel_password":
            sentinel_password = value
        elif name == "password":  # redis-py's other spelling; the userinfo's wins
            password = password if password is not None else value
        elif name in _TIMEOUTS:
            try:
                seconds = float(value)
            except ValueError:
                raise SentinelUrlError(f"{name} must be a number of seconds") from None
            if not 0 < seconds <= 60:
                raise SentinelUrlError(f"{name} must be above 0 and at most 60 seconds")
            timeouts.append((name, seconds))
        else:
            raise SentinelUrlError(
                f"unknown option {name!r} (known: password, sentinel_password, "
                "socket_timeout, socket_connect_timeout)"
            )
    return SentinelTarget(
        sentinels=tuple(sentinels),
        service=service,
        db=int(db_text or 0),
        username=username,
        password=password,
        sentinel_password=sentinel_password,
        timeouts=tuple(timeouts),
    )
