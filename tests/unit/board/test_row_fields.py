"""The row named once (issue 38): ``ROW_FIELDS`` in ``app/board/row.py`` defines the published
row, and everything else that names its fields is checked against it here: the dataclasses,
the marshmallow schemas (so the OpenAPI document), the interface's BoardItem table, the
rendered answer and the page's script."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from app.board.render import BoardRenderer
from app.board.row import (
    CONTRACT_FIELDS,
    EXTENSION_FIELDS,
    LIVE_FIELDS,
    OMITTED_AT_DEFAULT,
    ROW_FIELDS,
    SERVE_TIME_FIELDS,
    BoardRow,
    LiveDetails,
)
from app.board.snapshot import dumps, parse_snapshot
from app.config import load_settings
from app.schemas import EXTENSION
from app.schemas.board import BoardItemSchema, PublishedItemSchema
from tests.unit.api.test_openapi import INTERFACE, tables
from tests.unit.board.test_row_pinned import TS_MS, live_row, plain_row

NAMES = [f.name for f in ROW_FIELDS]
ALWAYS = [n for n in NAMES if n not in OMITTED_AT_DEFAULT]  # a 5-minute row's (no "window")
PAGE = Path(__file__).parents[3] / "app" / "static" / "board.js"
# What the page's computed row keys (``row[side + "_bid"]``) may be built from.
PAGE_VARIABLES = {"side": ("up", "down")}
UNPUBLISHED = {"live", "model_p_up"}  # BoardRow's: the details themselves, the track record's


def test_the_table_names_every_attribute_of_the_row_once() -> None:
    """Each attribute of BoardRow and LiveDetails is published under one name, no other."""
    row_attributes = [f.name for f in dataclasses.fields(BoardRow) if f.name not in UNPUBLISHED]
    live_attributes = [f.name for f in dataclasses.fields(LiveDetails)]
    assert sorted(f.attribute for f in ROW_FIELDS if not f.live) == sorted(row_attributes)
    assert sorted(f.attribute for f in ROW_FIELDS if f.live) == sorted(live_attributes)
    assert len(set(NAMES)) == len(NAMES)
    assert not set(NAMES) & set(SERVE_TIME_FIELDS)
    # The contract's fields come first: the board's bytes begin as the interface's item.
    assert NAMES[: len(CONTRACT_FIELDS)] == list(CONTRACT_FIELDS)
    assert list(CONTRACT_FIELDS) + list(EXTENSION_FIELDS) == NAMES
    assert set(LIVE_FIELDS) <= set(EXTENSION_FIELDS)


def test_the_contract_fields_are_the_interfaces_board_item() -> None:
    """The interface's BoardItem: the row's contract fields, then the serve-time ones."""
    listed = [row["Field"] for row in tables(INTERFACE.read_text())["BoardItem"]]
    assert listed == list(CONTRACT_FIELDS) + list(SERVE_TIME_FIELDS)


@pytest.mark.parametrize("schema", [BoardItemSchema(), PublishedItemSchema()])
def test_the_item_schemas_fields_are_the_rows_in_its_order(schema: BoardItemSchema) -> None:
    """Exactly the row's fields and the serve-time ones (the published row's schema: the same
    fields, ``ts`` required), in the row's order."""
    declared = list(schema.declared_fields)
    assert [n for n in declared if n not in SERVE_TIME_FIELDS] == NAMES
    assert [n for n in declared if n in SERVE_TIME_FIELDS] == list(SERVE_TIME_FIELDS)


def test_the_extensions_are_marked_in_the_item_schema() -> None:
    """The OpenAPI document marks what the interface does not name (from BoardItemSchema)."""
    fields = BoardItemSchema().declared_fields
    assert [n for n, f in fields.items() if f.metadata.get(EXTENSION)] == list(EXTENSION_FIELDS)


def test_a_published_row_with_a_serve_time_field_is_refused() -> None:
    for name in SERVE_TIME_FIELDS:
        errors = PublishedItemSchema().validate({**plain_row().as_json(), name: None})
        assert name in str(errors), name


def test_as_json_publishes_the_table() -> None:
    assert list(live_row().as_json()) == ALWAYS
    assert list(plain_row().as_json()) == [n for n in ALWAYS if n not in LIVE_FIELDS]
    # A 15-minute row says so, last; a 5-minute one is the contract's row byte for byte.
    row = dataclasses.replace(live_row(), window="15m")
    assert list(row.as_json()) == NAMES and row.as_json()["window"] == "15m"
    assert row.live is not None
    published = row.as_json()
    for field in ROW_FIELDS:
        held = getattr(row.live if field.live else row, field.attribute)
        assert published[field.name] == (list(held) if field.copy == "list" else held)


def test_the_renderer_appends_the_serve_time_fields_to_the_published_ones() -> None:
    board = {"seq": 1, "ts": TS_MS, "source": "polymarket",
             "items": [live_row().as_json(), plain_row().as_json()]}  # fmt: skip
    body = BoardRenderer(load_settings({})).render(parse_snapshot(dumps(board)), "user", TS_MS)
    live, plain = json.loads(body)["items"]
    assert list(live) == ALWAYS + list(SERVE_TIME_FIELDS)
    assert list(plain) == [n for n in ALWAYS if n not in LIVE_FIELDS] + list(SERVE_TIME_FIELDS)


def _page_reads() -> set[str]:
    """The row fields the page's script reads: ``row.name`` and ``row[...]`` (a row is
    always called ``row`` there), a computed key expanded over ``PAGE_VARIABLES``."""
    # Whole-line comments out: they may name fields the code does not read.
    script = re.sub(r"(?m)^\s*//.*$", "", PAGE.read_text())
    assert not re.search(r"\}\s*=\s*row\b", script), "a row destructured: name its fields"
    names = set(re.findall(r"\brow\.([A-Za-z_]\w*)", script))
    for expression in re.findall(r"\brow\[([^\]]+)\]", script):
        parts = [part.strip() for part in expression.split("+")]
        variables = [p for p in parts if not p.startswith('"')]
        assert len(variables) <= 1 and set(variables) <= set(PAGE_VARIABLES), expression
        values = PAGE_VARIABLES[variables[0]] if variables else ("",)
        for value in values:
            names.add("".join(value if p in variables else p.strip('"') for p in parts))
    return names


def test_every_row_field_the_page_reads_is_published_or_served() -> None:
    reads = _page_reads()
    # The page reads these today: a parse that found none of them would check nothing.
    assert {"p_up_pct", "up_token_id", "down_ask", "windowStart", "suspect"} <= reads
    unknown = reads - set(NAMES) - set(SERVE_TIME_FIELDS)
    assert not unknown, f"board.js reads row fields the row does not publish: {unknown}"
