"""The deliveries' rows as an alerts program writes them: one id per firing whichever program
makes it, and each row written once (issue 51; docs/alerts.md, "Where it runs").

Every host of a deploy runs an alerts program, and each evaluates the same boards. A firing's
id (its webhook-id) is made from the alert and the board, so every program makes the same
one; the row is inserted only where no program did first, and only the program that
inserted it queues the call.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from app.alerts.models import Alert, Delivery
from app.board.snapshot import Snapshot

# The columns a firing's row is written with (each record has every one).
_COLUMNS = ("id", "alert_id", "at", "expires_at", "status", "attempts", "error", "updated_at")
# One short statement with one array per column: the same rows as a VALUES list of 8,000
# parameters, whose text the driver would parse at every board change (a third of the
# program's time on a change firing 1,000 alerts). Only the rows of alerts that still exist:
# a deletion reaches the runner at its next full read, and one firing of a deleted alert
# would otherwise break the foreign key and lose the whole change's rows.
_INSERT_POSTGRESQL = text(
    "INSERT INTO alert_deliveries"
    " (id, alert_id, at, expires_at, status, attempts, error, updated_at)"
    " SELECT f.* FROM unnest(CAST(:id AS text[]), CAST(:alert_id AS text[]),"
    " CAST(:at AS timestamp[]), CAST(:expires_at AS timestamp[]), CAST(:status AS text[]),"
    " CAST(:attempts AS integer[]), CAST(:error AS text[]), CAST(:updated_at AS timestamp[]))"
    " AS f(id, alert_id, at, expires_at, status, attempts, error, updated_at)"
    " WHERE EXISTS (SELECT 1 FROM alerts WHERE alerts.id = f.alert_id)"
    " ON CONFLICT (id) DO NOTHING RETURNING id"
)


def delivery_id_of(alert_id: str, snapshot: Snapshot) -> str:
    """The webhook-id of ``alert_id``'s firing on ``snapshot``: the same in every alerts
    program that evaluates that board, so a crossing is called once. The board's time
    beside its seq: a seq starts again with the bus (a new Redis, a restarted embedded
    service), the time does not."""
    digest = hashlib.sha256(f"{alert_id}:{snapshot.seq}:{snapshot.ts_ms}".encode()).digest()
    return "msg_" + base64.urlsafe_b64encode(digest[:18]).decode()


def record_new(conn: Connection, records: list[dict[str, Any]]) -> set[str]:
    """Insert the deliveries ``records`` (each with every column of ``_COLUMNS``) of alerts
    that still exist and that no other program recorded first (the same ids); the ids this
    call inserted."""
    if conn.dialect.name == "postgresql":
        columns = {name: [record[name] for record in records] for name in _COLUMNS}
        return set(conn.execute(_INSERT_POSTGRESQL, columns).scalars())
    # SQLite (the embedded shape: one process writes) checks them first.
    wanted = {record["alert_id"] for record in records}
    alive = set(conn.execute(select(Alert.id).where(Alert.id.in_(wanted))).scalars())
    records = [record for record in records if record["alert_id"] in alive]
    if not records:
        return set()
    statement = sqlite_insert(Delivery).on_conflict_do_nothing(index_elements=["id"])
    return set(conn.execute(statement.returning(Delivery.id), records).scalars())
