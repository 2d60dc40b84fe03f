"""The OpenAPI document: a valid OpenAPI 3.1 document, and the interface's tables, read from
``../shared/interface.md`` (or the copy in ``docs/`` on a clone without it), hold in it."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from openapi_spec_validator import validate
from werkzeug.test import TestResponse

from app.alerts.requests import new_alert
from app.config import load_settings
from app.errors import ApiError
from app.markets import parse_symbols
from app.schemas.openapi import build_spec
from app.web import create_app
from harness.processes import ROOT
from tests.conftest import BASE_CONFIG

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


# -- what Probboard adds: every route, parameter, error code and header ---------------------

APP = ROOT / "app"
INTERFACE_ITEM_FIELDS = {
    "symbol", "slot", "p_up_pct", "p_down_pct", "up_bid", "up_ask", "down_bid", "down_ask",
    "up_token_id", "down_token_id", "rem_secs", "dataAgeMs", "isStale", "latencyLevel",
}  # fmt: skip
IGNORED_METHODS = {"HEAD", "OPTIONS"}  # answered for every GET route by Flask


def test_every_route_of_the_app_is_documented_and_no_other(
    app: Flask, document: dict[str, Any]
) -> None:
    routes: dict[str, set[str]] = {}
    for rule in app.url_map.iter_rules():
        if rule.endpoint != "static":
            methods = set(rule.methods or ()) - IGNORED_METHODS
            routes.setdefault(rule.rule, set()).update(m.lower() for m in methods)
    # OpenAPI writes a path parameter {name}, Flask's rule <name>.
    documented = {
        re.sub(r"\{(\w+)\}", r"<\1>", path): set(operations) - {"parameters"}
        for path, operations in document["paths"].items()
    }
    assert documented == routes


def _parameters(document: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    found: dict[tuple[str, str], set[str]] = {}
    for path, operations in document["paths"].items():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                found.setdefault((parameter["in"], parameter["name"]), set()).add(path)
    return found


def _routes_of(module: Path) -> list[str]:
    return re.findall(r'@bp\.get\(\s*"([^"]+)"', module.read_text())


def _source_of_view(module: Path) -> str:
    """``module``'s text and that of the ``app.api`` modules it imports (its parameter
    readers, e.g. ``windows_query.py``)."""
    text = module.read_text()
    for name in re.findall(r"^from app\.api\.(\w+) import", text, re.M):
        if name not in ("symbols", "params", "window_param"):  # shared: found by their calls
            text += (APP / "api" / f"{name}.py").read_text()
    return text


def test_every_parameter_a_view_reads_is_documented_and_no_other(
    document: dict[str, Any],
) -> None:
    """Read off the views' source: the ``symbol`` and ``period`` parsers, the single-valued
    parameters (``query_value``) and the headers they take."""
    read: dict[tuple[str, str], set[str]] = {}
    for module in sorted((APP / "api").glob("*.py")):
        assert "request.args" not in module.read_text() or module.name in (
            "symbols.py", "periods.py", "params.py",
        ), module.name  # fmt: skip
        text = _source_of_view(module)
        for path in _routes_of(module):
            if re.search(r"requested_(symbols|market)\(", text):
                read.setdefault(("query", "symbol"), set()).add(path)
            if "requested_period(" in text:
                read.setdefault(("query", "period"), set()).add(path)
            if "requested_window(" in text:
                read.setdefault(("query", "window"), set()).add(path)
            for name in re.findall(r'query_value\(request, "(\w+)"', text):
                read.setdefault(("query", name), set()).add(path)
            for header in re.findall(r'request\.headers\.get\("([^"]+)"\)', text):
                read.setdefault(("header", header), set()).add(path)
        # Path parameters: the routes' own <name>s, of every method.
        for path in re.findall(r'@bp\.\w+\(\s*"([^"]+)"', module.read_text()):
            for name in re.findall(r"<(\w+)>", path):
                read.setdefault(("path", name), set()).add(re.sub(r"<(\w+)>", r"{\1}", path))
    assert read[("query", "symbol")] == {
        "/api/probboard/latest", "/api/probboard/stream", "/api/probboard/calibration",
        "/api/probboard/windows",
        "/api/probboard/trail",
    }  # fmt: skip
    assert read[("query", "period")] == {"/api/probboard/calibration"}
    assert read[("query", "window")] == {
        "/api/probboard/latest", "/api/probboard/stream", "/api/probboard/calibration",
        "/api/probboard/windows", "/api/probboard/trail",
    }  # fmt: skip
    for name in ("from", "to", "limit", "cursor", "format"):
        assert read[("query", name)] == {"/api/probboard/windows"}, name
    assert read[("header", "Last-Event-ID")] == {"/api/probboard/stream"}
    assert _parameters(document) == read


@pytest.fixture
def two(tmp_path: Path) -> Flask:
    """An app serving BTC and ETH (XRP is known, not served), guests held to 2 a minute."""
    config = {"SYMBOLS": "BTC,ETH", "GUEST_RATE_LIMIT": "2 per minute"}
    return create_app({**BASE_CONFIG, "DATABASE_URL": f"sqlite:///{tmp_path / 'a.db'}", **config})


SYMBOL_VALUES = [
    "btc", "ETH", "eTh,BTC", "eth,eth", "btc,eth,btc",  # served
    "", ",", "btc,", ",eth", "btc,,eth", "xrp", "doge", " btc", "btc ", "b tc", "btc;eth",
    "btc\n", "\nbtc", "\u017fol", "BTC\u0000", "btceth", "bt", "btcc",
]  # fmt: skip


@pytest.mark.parametrize(
    "path", ["/api/probboard/latest", "/api/probboard/calibration", "/api/probboard/windows"]
)
def test_the_symbol_pattern_is_exactly_what_the_service_accepts(two: Flask, path: str) -> None:
    """The document promises 200 for what its pattern matches and 400 for anything else:
    the fuzzer holds the service to both."""
    document = json.loads(two.test_client().get("/api/openapi.json").data)
    parameters = document["paths"][path]["get"]["parameters"]
    [parameter] = [p for p in parameters if p["name"] == "symbol"]
    pattern = re.compile(parameter["schema"]["pattern"])
    client = two.test_client()
    for i, value in enumerate(SYMBOL_VALUES):
        # Each from an address of its own: the guest limit (2 a minute) never answers first.
        address = {"REMOTE_ADDR": f"10.0.0.{i + 1}"}
        response = client.get(path, query_string={"symbol": value}, environ_base=address)
        body = json.loads(response.data)
        # JSON Schema patterns are ECMA-262: "$" never matches before a final newline.
        matches = pattern.search(value) is not None and "\n" not in value
        if matches:
            assert response.status_code != 400, (value, body)
        else:
            assert (response.status_code, body["code"]) == (400, "invalid_symbol"), value


ALERT_VALUES = [
    ("symbol", v) for v in ("btc", "Sol", "", "xrp", " btc", "btc\n", "\u017fol", "btc,sol")
] + [("window", v) for v in ("5m", "15M", "", "1h", "5m ", "5", "5m\n")]  # fmt: skip


@pytest.mark.parametrize(("field", "value"), ALERT_VALUES)
def test_the_alert_body_patterns_are_exactly_what_the_service_accepts(
    field: str, value: str
) -> None:
    """``POST /api/alerts``'s ``symbol`` and ``window``: a value the document's pattern matches
    is taken, anything else is a 400 naming the field (the fuzzer sends both)."""
    settings = load_settings({"SYMBOLS": "BTC,SOL", "WINDOWS": "5m,15m"})
    schemas = build_spec(settings.markets, settings.windows)["components"]["schemas"]
    pattern = re.compile(schemas["AlertInput"]["properties"][field]["pattern"])
    body = {"url": "https://93.184.216.34/hook", "symbol": "btc", "condition": "stale"}
    try:
        new_alert(json.dumps(body | {field: value}).encode(), settings)
    except ApiError as refused:
        assert (refused.status, refused.code) == (400, f"invalid_{field}"), refused.message
        taken = False
    else:
        taken = True
    assert taken == (pattern.search(value) is not None and "\n" not in value), (field, value)


def _raised_codes() -> set[tuple[int, str]]:
    """Every (status, code) the package's source raises."""
    found: set[tuple[int, str]] = set()
    for module in APP.rglob("*.py"):
        text = module.read_text()
        for status, code in re.findall(r'ApiError\(\s*(\d{3}),\s*"(\w+)"', text):
            found.add((int(status), code))
        found.update((401, code) for code in re.findall(r'unauthorized\(\s*"(\w+)"', text))
        for call in re.findall(r"too_many_requests\((.*?)\)\n", text, re.S):
            named = re.search(r'code="(\w+)"', call)
            found.add((429, named.group(1) if named else "rate_limited"))
    return found


def _documented_codes(document: dict[str, Any]) -> dict[str, set[tuple[int, str]]]:
    found: dict[str, set[tuple[int, str]]] = {}
    for path, operations in document["paths"].items():
        for status, answer in operations["get"]["responses"].items():
            if status.startswith("2"):
                continue
            schema = answer["content"]["application/json"]["schema"]
            assert schema["$ref"].endswith("/ErrorResponse"), (path, status)
            codes = schema["properties"]["code"]["enum"]
            found.setdefault(path, set()).update((int(status), code) for code in codes)
    return found


def test_every_error_code_the_package_raises_is_documented_and_no_other(
    document: dict[str, Any],
) -> None:
    from app.errors import HTTP_CODES

    raised = _raised_codes()
    assert (400, "invalid_symbol") in raised and (429, "too_many_streams") in raised
    documented = set().union(*_documented_codes(document).values())
    assert raised <= documented, raised - documented
    # The others are what werkzeug and gunicorn answer on their own (app/errors.py).
    assert documented - raised <= set(HTTP_CODES.items()), documented - raised - raised


def _conforms(document: dict[str, Any], path: str, response: TestResponse) -> dict[str, Any]:
    """``response`` is documented for ``path``: its status, code and required headers."""
    answer = document["paths"][path]["get"]["responses"][str(response.status_code)]
    headers = answer["headers"]
    for name, ref in headers.items():
        header = document["components"]["headers"][ref["$ref"].rsplit("/", 1)[-1]]
        if header["required"]:
            assert name in response.headers, (path, response.status_code, name)
    body: dict[str, Any] = json.loads(response.data) if response.is_json else {}
    if response.status_code >= 400:
        enum = answer["content"]["application/json"]["schema"]["properties"]["code"]["enum"]
        assert body["code"] in enum, (path, response.status_code, body)
    return body


BAD_BEARER = {"Authorization": "Basic abc"}
TWO_KEYS = {"X-API-Key": "pbk_" + "A" * 43, "Authorization": "Bearer pbk_" + "B" * 43}
SOME_KEY = {"X-API-Key": "pbk_" + "C" * 43}  # cannot be checked: no accounts tables here
PROVOKED: list[tuple[str, str, dict[str, str], tuple[int, str]]] = [
    ("/api/probboard/latest", "symbol=doge", {}, (400, "invalid_symbol")),
    ("/api/probboard/latest", "window=1h", {}, (400, "invalid_window")),
    ("/api/probboard/latest", "", BAD_BEARER, (401, "malformed_authorization")),
    ("/api/probboard/latest", "", TWO_KEYS, (401, "conflicting_credentials")),
    ("/api/probboard/latest", "", SOME_KEY, (503, "auth_unavailable")),
    ("/api/keys/verify", "", {}, (401, "missing_credentials")),
    ("/api/keys/verify", "", BAD_BEARER, (401, "malformed_authorization")),
    ("/api/keys/verify", "", SOME_KEY, (503, "auth_unavailable")),
    ("/api/probboard/stream", "", {}, (401, "missing_credentials")),
    ("/api/probboard/stream", "", TWO_KEYS, (401, "conflicting_credentials")),
    ("/api/probboard/stream", "", SOME_KEY, (503, "auth_unavailable")),
    ("/api/probboard/calibration", "symbol=eth,btc", {}, (400, "invalid_symbol")),
    ("/api/probboard/calibration", "period=1y", {}, (400, "invalid_period")),
    ("/api/probboard/calibration", "window=15m", {}, (400, "invalid_window")),  # not served
    ("/api/probboard/calibration", "", {}, (503, "calibration_unavailable")),
    ("/api/probboard/windows", "symbol=doge", {}, (400, "invalid_symbol")),
    ("/api/probboard/windows", "window=1h", {}, (400, "invalid_window")),
    ("/api/probboard/windows", "from=yesterday", {}, (400, "invalid_time")),
    ("/api/probboard/windows", "limit=1001", {}, (400, "invalid_limit")),
    ("/api/probboard/windows", "cursor=abc", {}, (400, "invalid_cursor")),
    ("/api/probboard/windows", "format=xml", {}, (400, "invalid_format")),
    ("/api/probboard/windows", "", {}, (503, "record_unavailable")),  # not migrated here
]


@pytest.mark.parametrize(("path", "query", "headers", "expected"), PROVOKED)
def test_each_error_an_endpoint_answers_is_documented_for_it(
    two: Flask, path: str, query: str, headers: dict[str, str], expected: tuple[int, str]
) -> None:
    client = two.test_client()
    document = json.loads(client.get("/api/openapi.json").data)
    response = client.get(path, query_string=query, headers=headers)
    body = _conforms(document, path, response)
    assert (response.status_code, body["code"]) == expected


def test_405_and_the_metrics_refusal_are_documented(two: Flask) -> None:
    client = two.test_client()
    document = json.loads(client.get("/api/openapi.json").data)
    for path in document["paths"]:
        # PUT: a method no endpoint takes (the alerts take POST, PATCH and DELETE).
        response = client.put(path.replace("{alert_id}", "al_x"))
        assert response.status_code == 405, path
        _conforms(document, path, response)
    response = client.get("/metrics", environ_base={"REMOTE_ADDR": "192.0.2.7"})
    assert _conforms(document, "/metrics", response)["code"] == "metrics_forbidden"


def test_a_guest_read_and_its_429_carry_the_documented_headers(two: Flask) -> None:
    client = two.test_client()
    document = json.loads(client.get("/api/openapi.json").data)
    latest = "/api/probboard/latest"
    ok = client.get(latest, query_string="symbol=btc")
    _conforms(document, latest, ok)
    answers = document["paths"][latest]["get"]["responses"]
    for name in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"):
        assert name in ok.headers and name in answers["200"]["headers"], name
        assert name in answers["429"]["headers"], name
    client.get(latest)
    refused = client.get(latest)
    assert refused.status_code == 429
    assert _conforms(document, latest, refused)["code"] == "rate_limited"
    assert "X-RateLimit-Reset" in refused.headers


def test_the_windows_export_is_documented_as_json_and_csv(document: dict[str, Any]) -> None:
    operation = document["paths"]["/api/probboard/windows"]["get"]
    assert operation[EXTENSION] is True and operation["security"] == []
    ok = operation["responses"]["200"]
    assert set(ok["content"]) == {"application/json", "text/csv"}
    assert ok["content"]["application/json"]["schema"]["$ref"].endswith("/WindowsResponse")
    assert {"X-Next-Cursor", "X-RateLimit-Limit"} <= set(ok["headers"])
    assert "X-RateLimit-Reset" in operation["responses"]["429"]["headers"]
    window = document["components"]["schemas"]["ExportedWindow"]["properties"]
    assert {"lookbackS", "outcomeSource", "checkpoints"} <= set(window)
    [limit] = [p for p in operation["parameters"] if p["name"] == "limit"]
    assert (limit["schema"]["minimum"], limit["schema"]["maximum"]) == (1, 1000)


def test_every_answer_documents_the_request_id(document: dict[str, Any]) -> None:
    for path, operations in document["paths"].items():
        for status, answer in operations["get"]["responses"].items():
            assert "X-Request-ID" in answer["headers"], (path, status)


def test_the_stream_documents_last_event_id(document: dict[str, Any]) -> None:
    parameters = document["paths"]["/api/probboard/stream"]["get"]["parameters"]
    assert {"name": "Last-Event-ID", "in": "header"}.items() <= parameters[-1].items()


def test_the_items_extension_fields_are_documented_and_marked(document: dict[str, Any]) -> None:
    from app.board.row import LiveDetails
    from app.refresher.sources.simulated import SimulatedSource

    [simulated] = SimulatedSource(parse_symbols("BTC"), seed=1).rows(1_800_000_100.0)
    # A 15-minute live row: the one that carries every field (a 5-minute one has no window).
    live = LiveDetails(None, None, None, {}, {})
    row = dataclasses.replace(simulated, live=live, window="15m")
    properties = document["components"]["schemas"]["BoardItem"]["properties"]
    extensions = {name for name, prop in properties.items() if prop.get(EXTENSION)}
    assert extensions == set(row.as_json()) - INTERFACE_ITEM_FIELDS
    assert "newestInputMs" in document["components"]["schemas"]["BoardResponse"]["properties"]


def test_the_health_source_is_a_marked_extension(document: dict[str, Any]) -> None:
    schema = document["components"]["schemas"]["HealthResponse"]
    source = schema["properties"]["source"]
    assert source.get(EXTENSION) is True and source["enum"] == ["simulated", "polymarket"]
    assert "source" not in schema.get("required", [])
