"""Reading credentials off a request: an API key under either scheme, or a session cookie.

Header problems are answered here, before any lookup: two different keys, or an
``Authorization`` header that is not ``Bearer <key>``, get a 401 with their own code.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Request

from app.errors import ApiError

SESSION_COOKIE = "probboard_session"
API_KEY_HEADER = "X-API-Key"
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
    """The credentials on ``request``; raises a 401 ApiError for contradictory headers."""
    headers = request.headers
    # A repeated header reaches WSGI joined by commas; keys never contain one.
    keys = {
        part.strip()
        for value in headers.getlist(API_KEY_HEADER)
        for part in value.split(",")
        if part.strip()
    }
    if API_KEY_HEADER in headers and not keys:
        keys.add("")  # sent but empty: answered as an invalid key, not as no key
    authorizations = headers.getlist("Authorization")
    if len(authorizations) > 1:
        raise unauthorized("malformed_authorization", "Send one Authorization header.")
    if authorizations:
        keys.add(_bearer(authorizations[0]))
    if len(keys) > 1:
        raise unauthorized(
            "conflicting_credentials", "X-API-Key and Authorization carry different keys; send one."
        )
    key = keys.pop() if keys else None
    token = request.cookies.get(SESSION_COOKIE) or None
    return Presented(api_key=key, session_token=token)


def presents_key(request: Request) -> bool:
    """True when the request carries an API key header of either scheme (cheap check)."""
    return API_KEY_HEADER in request.headers or "Authorization" in request.headers
