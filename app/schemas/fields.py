"""Strict JSON field types: marshmallow's defaults coerce ``"1"`` to 1 and ``"yes"`` to True.

A contract check must reject a string where the interface promises a number, so these
fields accept only the JSON type they name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
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
        number = float(value)
        # What Float's own conversion refuses by default (allow_nan False), in one step:
        # every published board's numbers pass here (``bench.board_build``).
        if not math.isfinite(number) and not self.allow_nan:
            raise ValidationError("Special numeric values (nan or infinity) are not permitted.")
        return number


class StrictInteger(fields.Integer):
    """A JSON integer (never a bool, a float or a string)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(strict=True, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError("Not an integer.")
        return super()._deserialize(value, attr, data, **kwargs)


class FlatMapping(fields.Dict):
    """A JSON object of strings to one scalar type or null, checked in one pass.

    Declared as marshmallow's ``Dict`` (``keys``/``values``: what OpenAPI shows), but its
    values are checked by ``accepts`` over the whole object at once: the refresher validates
    every board it publishes, and a ``Dict`` that deserialises each key and value through a
    field of its own is a quarter of that validation (``bench.board_build``)."""

    def __init__(self, accepts: Callable[[Any], bool], what: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._accepts = accepts
        self._what = what

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if not isinstance(value, dict):
            raise ValidationError("Not a valid mapping type.")
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(f"Key {key!r} is not a string.")
            if item is not None and not self._accepts(item):
                raise ValidationError(f"{key}: {item!r} is not {self._what}.")
        return value


def is_text(value: Any) -> bool:
    """A JSON string."""
    return isinstance(value, str)


def is_count(value: Any) -> bool:
    """A JSON integer at or above 0 (never a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
