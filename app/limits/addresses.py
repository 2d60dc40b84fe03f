"""What a per-address limit counts: an IPv4 address, or an IPv6 address's /64 network.

An IPv6 client is usually given a whole /64 (SLAAC, privacy addresses), so it can send each
request from a new address of its own; counted per address, it would never meet the guest
limit or the failed-key throttle. Its /64 is counted instead, as one client. An IPv4 address
is counted as itself. Logs may keep the full address; only the counters use this.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

IPV6_PREFIX = 64


@lru_cache(maxsize=4096)
def counted_address(address: str) -> str:
    """The key part a per-address limit counts ``address`` under: an IPv4 address as it is,
    an IPv6 address as its /64 (``2001:db8:1:2::/64``); anything else unchanged."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address  # not an address (a Unix socket's peer): the server's own value
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, IPV6_PREFIX), strict=False))
    return str(parsed)
