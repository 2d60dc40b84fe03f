"""Reading credentials off a request: an API key under either scheme, or a session cookie.

Header problems are answered here, before any lookup: two different keys, or an
``Authorization`` header that is not ``Bearer <key>``, get a 401 with their own code.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Request

from app.errors import ApiError

SESSION_COOKIE = "probboard_session"
_KEY_ENVIRON = "HTTP_X_API_KEY"
_AUTHORIZATION_ENVIRON = "HTTP_AUTHORIZATION"
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="probboard"'}


def unauthorized(code: str, message: str) -> ApiError:
    """A 401 ErrorResponse with a bearer challenge."""
    return ApiError(401, code, message, headers=_CHALLENGE)


def invalid_key() -> ApiError:
    """The one answer for unknown, revoked, expired keys and disabled owners alike."""
    return unauthorized("invalid_key", "The API key is not valid.")


def missing_key() -> ApiError:
    """No key was sent where one is required."""
    return unauthorized(
        "missing_credentials",
        "An API key is required: send 'X-API-Key: <key>' or 'Authorization: Bearer <key>'.",
    )


@dataclass(frozen=True)
class Presented:
    """What the caller sent: a key (either scheme) and/or a session token."""

    api_key: str | None
    session_token: str | None


def _bearer(value: str) -> str:
    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or any(c.isspace() for c in token):
        raise unauthorized(
            "malformed_authorization", "The Authorization header must be 'Bearer <API key>'."
        )
    return token


def read_credentials(request: Request) -> Presented:
    """The credentials on ``request``; raises a 401 ApiError for contradictory headers.

    Read straight from the WSGI environ (one lookup per header, where werkzeug's header
    view walks every header on each ``getlist``): a repeated header reaches WSGI as one
    value joined by commas, which keys never contain.
    """
    environ = request.environ
    sent_key: str | None = environ.get(_KEY_ENVIRON)
    authorization: str | None = environ.get(_AUTHORIZATION_ENVIRON)
    keys: set[str] = set()
    if sent_key is not None:
        keys = {part.strip() for part in sent_key.split(",") if part.strip()}
        if not keys:
            keys.add("")  # sent but empty: answered as an invalid key, not as no key
    if authorization is not None:
        keys.add(_bearer(authorization))
    if len(keys) > 1:
        raise unauthorized(
            "conflicting_credentials", "X-API-Key and Authorization carry different keys; send one."
        )
    key = keys.pop() if keys else None
    token = (request.cookies.get(SESSION_COOKIE) or None) if "HTTP_COOKIE" in environ else None
    return Presented(api_key=key, session_token=token)


def presents_key(request: Request) -> bool:
    """True when the request carries an API key header of either scheme (cheap check)."""
    environ = request.environ
    return _KEY_ENVIRON in environ or _AUTHORIZATION_ENVIRON in environ
