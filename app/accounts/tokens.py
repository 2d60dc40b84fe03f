"""Key and session-token material: generation, keyed hashing, masking, format checks.

A key is ``pbk_`` + 43 URL-safe characters (32 random bytes); a session token is ``pbs_`` +
the same. Only ``HMAC-SHA256(API_KEY_PEPPER, value)`` is stored, so a copy of the database
alone cannot be used to test guesses. Lookups are by that hash (an index), and the stored
hash is compared again in constant time.
"""

from __future__ import annotations

import hmac
import re
import secrets

KEY_PREFIX = "pbk_"
SESSION_PREFIX = "pbs_"
_BODY_LENGTH = 43  # token_urlsafe(32)
_FORMAT = re.compile(rf"(pbk_|pbs_)[A-Za-z0-9_-]{{{_BODY_LENGTH}}}")
DISPLAY_PREFIX_LENGTH = 12  # "pbk_" and 8 characters: enough to tell keys apart


def new_key() -> str:
    """A fresh API key: 32 random bytes, URL-safe, with the ``pbk_`` prefix."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def new_session_token() -> str:
    """A fresh session token: 32 random bytes with the ``pbs_`` prefix."""
    return SESSION_PREFIX + secrets.token_urlsafe(32)


def well_formed(value: str, prefix: str) -> bool:
    """True when ``value`` has the exact shape of a key or token with ``prefix``."""
    return value.startswith(prefix) and _FORMAT.fullmatch(value) is not None


def keyed_hash(pepper: bytes, value: str) -> str:
    """HMAC-SHA256 of ``value`` under ``pepper``, hex."""
    return hmac.digest(pepper, value.encode("utf-8"), "sha256").hex()


def same_hash(a: str, b: str) -> bool:
    """Constant-time equality of two hex hashes."""
    return hmac.compare_digest(a.encode("ascii"), b.encode("ascii"))


def display_parts(key: str) -> tuple[str, str]:
    """The public prefix and the last four characters of ``key``."""
    return key[:DISPLAY_PREFIX_LENGTH], key[-4:]
