"""Percent-encoding as a log reader meets it: an encoded key is still the key."""

from __future__ import annotations

from urllib.parse import unquote


def percent_encoded(text: str) -> str:
    """Every character of ``text`` as ``%XX``."""
    return "".join(f"%{ord(c):02X}" for c in text)


def percent_decodings(text: str, times: int = 3) -> list[str]:
    """``text`` as it stands, then decoded once, twice... up to ``times`` times."""
    views = [text]
    for _ in range(times):
        views.append(unquote(views[-1]))
    return views
