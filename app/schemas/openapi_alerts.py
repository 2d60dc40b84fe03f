"""The alerts' endpoints in the OpenAPI document (issue 51): ``/api/alerts`` and the paths under
it, each operation with its success, its request body where it takes one, and every error
answer (``openapi_errors.py``, one table per path; the methods of a path share it)."""

from __future__ import annotations

from typing import Any

from apispec import APISpec

from app.markets import Market, Span
from app.schemas import EXTENSION
from app.schemas.alerts import (
    AlertCreatedSchema,
    AlertInputSchema,
    AlertListSchema,
    AlertOneSchema,
    DeliveriesSchema,
)
from app.schemas.openapi_answers import (
    KEY_SCHEMES,
    _errors,
    answer,
    json_ok,
    ok_headers,
    ref,
)
from app.schemas.openapi_parameters import one_symbol, one_window

LIST, ONE, DELIVERIES = "/api/alerts", "/api/alerts/<alert_id>", "/api/alerts/<alert_id>/deliveries"
ALERT_ID = {
    "name": "alert_id",
    "in": "path",
    "required": True,
    "description": "The alert's id (`al_...`), as `POST /api/alerts` answered it.",
    "schema": {"type": "string", "maxLength": 32},
}
STATUS_BODY = {
    "type": "object",
    "properties": {"status": {"type": "string", "enum": ["paused", "active"]}},
    "required": ["status"],
    "additionalProperties": False,
}


def _operation(path: str, summary: str, responses: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """One operation of the alerts' paths: key-only, an extension, ``responses`` and every
    error answer of ``path``."""
    entry: dict[str, Any] = {"summary": summary, "responses": {**responses, **_errors(path)}}
    if "<alert_id>" in path:
        entry["parameters"] = [ALERT_ID]
    entry["security"] = list(KEY_SCHEMES)
    entry[EXTENSION] = True
    return entry | extra


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def alerts_paths(spec: APISpec, markets: tuple[Market, ...], windows: tuple[Span, ...]) -> None:
    """Add the alerts' paths and their records to ``spec`` (``AlertInput``'s ``symbol`` and
    ``window``: one served market and window, as ``app.alerts.requests`` takes them)."""
    for name, record in (
        ("AlertInput", AlertInputSchema),
        ("AlertCreated", AlertCreatedSchema),
        ("AlertOne", AlertOneSchema),
        ("AlertList", AlertListSchema),
        ("Deliveries", DeliveriesSchema),
    ):
        spec.components.schema(name, schema=record)
    wanted = spec.components.schemas["AlertInput"]["properties"]
    wanted["symbol"]["pattern"] = one_symbol(markets)
    wanted["window"]["pattern"] = one_window(windows)  # or null: the default window
    created = answer(
        "The alert, and its signing secret (`whsec_...`): shown this once, never again.",
        "application/json",
        ref("AlertCreated"),
        ok_headers(True),
    )
    spec.path(
        LIST,
        operations={
            "post": _operation(
                LIST,
                "Create an alert: call `url` (signed, Standard Webhooks) when the line is "
                "crossed on a market's board of one window kind.",
                {"201": created},
                **_body(ref("AlertInput")),
            ),
            "get": _operation(
                LIST,
                "The caller's alerts, oldest first.",
                {"200": json_ok("AlertList", "The alerts.", True)},
            ),
        },
    )
    one = json_ok("AlertOne", "The alert.", True)
    gone = {"description": "Deleted, with its deliveries.", "headers": ok_headers(True)}
    spec.path(
        ONE.replace("<alert_id>", "{alert_id}"),
        operations={
            "get": _operation(ONE, "One alert of the caller's.", {"200": one}),
            "patch": _operation(
                ONE, "Pause an alert, or make it active again.", {"200": one}, **_body(STATUS_BODY)
            ),
            "delete": _operation(ONE, "Delete an alert and its deliveries.", {"204": gone}),
        },
    )
    spec.path(
        DELIVERIES.replace("<alert_id>", "{alert_id}"),
        operations={
            "get": _operation(
                DELIVERIES,
                "The alert's last 50 calls, newest first.",
                {"200": json_ok("Deliveries", "The calls.", True)},
            )
        },
    )
