"""marshmallow schemas for every response shape and for the board on the bus.

``dump()`` does not validate, so these schemas are used with ``validate``/``load`` on
purpose: in the refresher before publishing, in a worker receiving a board, and in tests
on every response body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from marshmallow import Schema

# Marks what Probboard adds to the interface, in the OpenAPI document and a field's metadata.
EXTENSION = "x-probboard-extension"


class ContractError(ValueError):
    """A document does not fit its schema; ``errors`` holds marshmallow's messages."""

    def __init__(self, what: str, errors: Mapping[str, Any]) -> None:
        super().__init__(f"{what} does not fit its schema: {dict(errors)}")
        self.errors = errors


def check(schema: Schema, document: Any, what: str) -> None:
    """Raise ``ContractError`` unless ``document`` fits ``schema``."""
    if not isinstance(document, Mapping):
        raise ContractError(what, {"_schema": ["not a JSON object"]})
    errors = schema.validate(document)
    if errors:
        raise ContractError(what, errors)
