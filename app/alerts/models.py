"""The alerts' tables, in the accounts database (issue 51, point 1).

An alert belongs to an account. Its signing secret must sign every call, so it cannot be
hashed: it is stored encrypted (``app.alerts.secrets``), never in the clear, and shown once
when the alert is created. A delivery is one call of one alert for one firing: its id is the
call's ``webhook-id`` (the receiver's idempotency key, the same on every retry).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Float, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.accounts.models import Base, utcnow
from app.alert_kinds import ACTIVE, DELIVERED, EXPIRED, FAILED, PAUSED, PENDING

__all__ = ["ACTIVE", "DELIVERED", "EXPIRED", "FAILED", "PAUSED", "PENDING", "Alert", "Delivery"]


class Alert(Base):
    """A line on one market's board of one window kind, and where to call when crossed."""

    __tablename__ = "alerts"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id"), nullable=False, index=True)
    url: Mapped[str] = mapped_column(String(2048), nullable=False)
    symbol: Mapped[str] = mapped_column(String(8), nullable=False)
    window: Mapped[str] = mapped_column(String(8), nullable=False)
    condition: Mapped[str] = mapped_column(String(16), nullable=False)
    level: Mapped[float | None] = mapped_column(Float, nullable=True)
    side: Mapped[str | None] = mapped_column(String(8), nullable=True)
    format: Mapped[str] = mapped_column(String(8), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False, default=ACTIVE)
    paused_reason: Mapped[str | None] = mapped_column(String(200), nullable=True)
    secret_encrypted: Mapped[str] = mapped_column(String(256), nullable=False)
    failures: Mapped[int] = mapped_column(Integer, nullable=False, default=0)  # in a row
    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime, nullable=False, default=utcnow, onupdate=utcnow
    )


class Delivery(Base):
    """One call of an alert: its outcome so far."""

    __tablename__ = "alert_deliveries"
    __table_args__ = (Index("ix_alert_deliveries_alert_at", "alert_id", "at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # msg_...: the webhook-id
    alert_id: Mapped[str] = mapped_column(
        ForeignKey("alerts.id", ondelete="CASCADE"), nullable=False
    )
    at: Mapped[datetime] = mapped_column(DateTime, nullable=False, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False, default=PENDING)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    http_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    latency_ms: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(String(200), nullable=True)  # ours, never theirs
    # Its last change (an attempt recorded, or queued again), or when its next attempt is
    # due after a retry's wait: the sweep of lost deliveries counts from it.
    updated_at: Mapped[datetime] = mapped_column(DateTime, nullable=False, default=utcnow)
