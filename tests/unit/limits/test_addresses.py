"""``app.limits.addresses``: per-address limits count an IPv6 client by its /64."""

from __future__ import annotations

import pytest

from app.limits.addresses import counted_address


@pytest.mark.parametrize(
    ("address", "counted"),
    [
        ("198.51.100.7", "198.51.100.7"),
        ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("::1", "::/64"),
        ("::ffff:198.51.100.7", "198.51.100.7"),  # IPv4-mapped: the IPv4 address
        ("unknown", "unknown"),  # no address (a Unix socket's peer): as the server gave it
    ],
)
def test_ipv4_is_counted_by_address_and_ipv6_by_its_64(address: str, counted: str) -> None:
    assert counted_address(address) == counted
