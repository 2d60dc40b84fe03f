"""The ``Vary`` headers of the answers that depend on more than their URL."""

from __future__ import annotations

# The answer depends on the caller's plan: a shared cache must key on the credentials.
VARY = {"Vary": "Authorization, X-API-Key, Cookie"}
# The answer's media type is picked by Accept (the /windows export: JSON or CSV).
VARY_ACCEPT = {"Vary": "Accept"}
