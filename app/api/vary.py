"""The ``Vary`` header of the answers that depend on who asks (the board, the trail)."""

from __future__ import annotations

# The answer depends on the caller's plan: a shared cache must key on the credentials.
VARY = {"Vary": "Authorization, X-API-Key, Cookie"}
