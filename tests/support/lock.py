"""The pins of requirements.lock, read as the package index compares names."""

from __future__ import annotations

import re

from harness.processes import ROOT

LOCK = ROOT / "requirements.lock"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\]+)")


def canonical(name: str) -> str:
    """A distribution name as the index compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked() -> dict[str, str]:
    """The lock's pins: canonical name -> exact version."""
    pins: dict[str, str] = {}
    for line in LOCK.read_text().splitlines():
        found = PIN.match(line)
        if found:
            pins[canonical(found.group(1))] = found.group(2)
    return pins
