"""An alert's signing secret (issue 51, point 3): made at random, shown once, stored encrypted.

The secret is the Standard Webhooks kind: ``whsec_`` and the base64 of 24 random bytes. It
signs every call, so the service must read it back: it is stored encrypted with Fernet
(AES-128-CBC and HMAC-SHA256, from the ``cryptography`` package) under a key derived from the
service's pepper (``API_KEY_PEPPER``) by HKDF, for this use alone. A database copy without
the pepper holds no secret. Changing the pepper makes every stored secret unreadable: its
alerts are paused ("secret unreadable") and must be made again.
"""

from __future__ import annotations

import base64
import secrets

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

SECRET_BYTES = 24
PREFIX = "whsec_"
_INFO = b"probboard alerts: webhook secrets"


class SecretUnreadableError(Exception):
    """A stored secret that this service's pepper cannot read (another pepper's, or junk)."""


def new_secret() -> str:
    """A fresh signing secret, ``whsec_...``."""
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


class SecretBox:
    """Encrypts and reads back signing secrets under a key derived from ``pepper``."""

    def __init__(self, pepper: bytes) -> None:
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(pepper)
        self._fernet = Fernet(base64.urlsafe_b64encode(key))

    def seal(self, secret: str) -> str:
        """The stored form of ``secret``."""
        return self._fernet.encrypt(secret.encode()).decode()

    def open(self, sealed: str) -> str:
        """The secret back; ``SecretUnreadableError`` when it was not sealed under this pepper."""
        try:
            return self._fernet.decrypt(sealed.encode()).decode()
        except (InvalidToken, ValueError) as exc:
            raise SecretUnreadableError(
                "the stored secret cannot be read with this pepper"
            ) from exc
