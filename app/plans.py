"""Plans: the entitlements a caller can be served under, their labels and refresh intervals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.config import Settings

GUEST = "guest"
USER = "user"
VIP_PRO = "vip_pro"
ADMIN = "admin"

ALL_PLANS = (GUEST, USER, VIP_PRO, ADMIN)
ACCOUNT_PLANS = (USER, VIP_PRO, ADMIN)  # what an account can hold (guests have none)
STREAM_PLANS = (VIP_PRO, ADMIN)  # entitled to the stream, and so to API keys
KEY_PLANS = STREAM_PLANS
LABELS = {GUEST: "Guest", USER: "User", VIP_PRO: "VIP Pro", ADMIN: "Admin"}


@dataclass(frozen=True)
class Plan:
    """A plan as served: its name, display label and recommended refresh interval."""

    name: str
    label: str
    refresh_ms: int


def plan_table(settings: Settings) -> dict[str, Plan]:
    """Every plan with its refresh interval; ``admin`` sees what ``vip_pro`` sees."""
    refresh = {
        GUEST: settings.refresh_ms_guest,
        USER: settings.refresh_ms_user,
        VIP_PRO: settings.refresh_ms_vip_pro,
        ADMIN: settings.refresh_ms_vip_pro,
    }
    return {name: Plan(name, LABELS[name], refresh[name]) for name in ALL_PLANS}
