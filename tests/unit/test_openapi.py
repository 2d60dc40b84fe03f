"""The OpenAPI document: a valid OpenAPI 3.1 document, and the interface's tables, read from
``../shared/interface.md`` (or the copy in ``docs/`` on a clone without it), hold in it."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from flask.testing import FlaskClient
from openapi_spec_validator import validate

from harness.processes import ROOT

SHARED = ROOT.parent / "shared" / "interface.md"
COPY = ROOT / "docs" / "interface.md"
INTERFACE = SHARED if SHARED.exists() else COPY
EXTENSION = "x-probboard-extension"


def tables(text: str) -> dict[str, list[dict[str, str]]]:
    """Every markdown table, keyed by the heading above it (or its header row's first cell)."""
    found: dict[str, list[dict[str, str]]] = {}
    heading = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.startswith("|") and i + 1 < len(lines) and set(lines[i + 1]) <= set("|-: "):
            header = [cell.strip() for cell in line.strip("|").split("|")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                cells = [cell.strip() for cell in lines[i].strip("|").split("|")]
                rows.append(dict(zip(header, cells, strict=True)))
                i += 1
            found[heading if header[0] == "Field" else header[0]] = rows
            continue
        i += 1
    return found


@pytest.fixture(scope="module")
def interface() -> dict[str, list[dict[str, str]]]:
    """The interface's tables."""
    return tables(INTERFACE.read_text())


@pytest.fixture
def document(client: FlaskClient) -> dict[str, Any]:
    """``GET /api/openapi.json`` as served."""
    response = client.get("/api/openapi.json")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    loaded: dict[str, Any] = json.loads(response.data)
    return loaded


def test_the_copy_in_docs_is_the_shared_interface() -> None:
    if not SHARED.exists():
        pytest.skip("no ../shared/interface.md beside this clone (CI): the copy stands in")
    assert COPY.read_text() == SHARED.read_text(), "docs/interface.md is out of date"


def test_the_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    validate(document)
    assert document["openapi"] == "3.1.0"
    assert document["info"]["version"] == "1.0.0"  # the interface's version


def _resolve(document: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        node = document["components"]["schemas"][name]
    return node


def _types(prop: dict[str, Any]) -> set[str]:
    kind = prop.get("type", "object" if "$ref" in prop else None)
    return set(kind) if isinstance(kind, list) else {kind} if kind else set()


def _check_type(document: dict[str, Any], where: str, prop: dict[str, Any], text: str) -> None:
    nullable = text.endswith(" or null")
    base = text.removesuffix(" or null")
    base = re.sub(r" \(.*\)$", "", base)  # "string (date-time)"
    types = _types(prop)
    assert ("null" in types) == nullable, (where, text, prop)
    if base.startswith("array of "):
        assert "array" in types, (where, text, prop)
        item_text = base.removeprefix("array of ")
        items = prop["items"]
        if item_text in document["components"]["schemas"]:
            assert items.get("$ref", "").endswith("/" + item_text), (where, items)
        else:
            assert item_text in _types(items), (where, items)
        return
    if base == "object":
        assert "object" in types, (where, text, prop)
        return
    wanted = {"number": {"number", "integer"}}.get(base, {base})
    assert types & wanted, (where, text, prop)


RECORDS = (
    "HealthResponse",
    "KeyVerificationResponse",
    "BoardResponse",
    "BoardItem",
    "ErrorResponse",
)


@pytest.mark.parametrize("record", RECORDS)
def test_every_field_of_every_record_is_in_the_document(
    document: dict[str, Any], interface: dict[str, list[dict[str, str]]], record: str
) -> None:
    schema = document["components"]["schemas"][record]
    required = set(schema.get("required", []))
    rows = interface[record]
    assert rows, record
    for row in rows:
        field = row["Field"]
        assert field in schema["properties"], (record, field)
        assert (field in required) == (row["Required"] == "yes"), (record, field)
        _check_type(document, f"{record}.{field}", schema["properties"][field], row["Type"])
    if record == "BoardItem":  # "Additional properties beyond those listed are allowed."
        assert schema.get("additionalProperties", True) is not False


def _security(operation: dict[str, Any]) -> list[str]:
    return sorted(name for requirement in operation["security"] for name in requirement or {""})


def test_every_endpoint_with_its_auth_success_and_errors(
    document: dict[str, Any], interface: dict[str, list[dict[str, str]]]
) -> None:
    schemes = document["components"]["securitySchemes"]
    assert schemes["ApiKeyHeader"] == {"type": "apiKey", "in": "header", "name": "X-API-Key"}
    assert schemes["BearerAuth"] == {"type": "http", "scheme": "bearer"}
    rows = interface["Method"]
    assert len(rows) == 4
    for row in rows:
        operation = document["paths"][row["Path"].strip("`")][row["Method"].lower()]
        assert EXTENSION not in operation, row["Path"]
        auth = row["Auth"]
        if auth == "none":
            assert operation["security"] == [], row
        elif auth.startswith("optional"):
            assert _security(operation) == ["", "ApiKeyHeader", "BearerAuth", "SessionCookie"]
        else:
            assert "either scheme" in auth, auth
            assert _security(operation) == ["ApiKeyHeader", "BearerAuth"], row
        status, _, rest = row["Success response"].partition(" ")
        answer = operation["responses"][status]
        if "text/event-stream" in rest:
            assert list(answer["content"]) == ["text/event-stream"]
        else:
            record = rest.split(" ")[0]
            ref = answer["content"]["application/json"]["schema"]["$ref"]
            assert ref.endswith("/" + record), (row, ref)
        for listed in re.findall(r"(\d{3}) ErrorResponse", row["Error responses"]):
            error = operation["responses"][listed]
            ref = error["content"]["application/json"]["schema"]["$ref"]
            assert ref.endswith("/ErrorResponse"), (row, listed)
            if listed == "429":
                assert "Retry-After" in error["headers"], row


def test_every_error_of_the_errors_table_is_documented(
    document: dict[str, Any], interface: dict[str, list[dict[str, str]]]
) -> None:
    rows = interface["Status"]
    assert rows
    for row in rows:
        operation = document["paths"][row["Endpoint"].strip("`")]["get"]
        assert row["Status"] in operation["responses"], row


def test_additions_are_marked_as_extensions(document: dict[str, Any]) -> None:
    interface_paths = {"/api/health", "/api/keys/verify", "/api/probboard/latest"}
    interface_paths.add("/api/probboard/stream")
    for path, operations in document["paths"].items():
        for operation in operations.values():
            assert (EXTENSION in operation) == (path not in interface_paths), path
