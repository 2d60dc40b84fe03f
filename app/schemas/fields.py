"""Strict JSON field types: marshmallow's defaults coerce ``"1"`` to 1 and ``"yes"`` to True.

A contract check must reject a string where the interface promises a number, so these
fields accept only the JSON type they name.
"""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields


class StrictBoolean(fields.Boolean):
    """A JSON boolean, nothing else."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if not isinstance(value, bool):
            raise ValidationError("Not a boolean.")
        return value


class StrictNumber(fields.Float):
    """A JSON number (int or float, never a bool or a string)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationError("Not a number.")
        return super()._deserialize(value, attr, data, **kwargs)


class StrictInteger(fields.Integer):
    """A JSON integer (never a bool, a float or a string)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(strict=True, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError("Not an integer.")
        return super()._deserialize(value, attr, data, **kwargs)
