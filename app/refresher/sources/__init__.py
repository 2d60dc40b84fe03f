"""Where board rows come from. ``BOARD_SOURCE`` picks one; each yields rows for an instant."""

from __future__ import annotations

from app.board import timefmt
from app.config import Settings
from app.refresher.sources.base import Source

__all__ = ["Source", "create_source"]


def create_source(settings: Settings) -> Source:
    """The source ``BOARD_SOURCE`` names."""
    if settings.board_source == "simulated":
        from app.refresher.sources.simulated import SimulatedSource

        return SimulatedSource(
            settings.markets, seed=settings.simulation_seed, spans=settings.windows
        )
    if settings.board_source == "polymarket":
        from app.refresher.sources.polymarket.source import PolymarketSource, Upstreams
        from app.refresher.tape import Tape

        directory = settings.refresher_tape_dir
        tape = Tape(directory, clock=timefmt.now) if directory else None
        return PolymarketSource(
            Upstreams(
                gamma=settings.polymarket_gamma_url,
                clob=settings.polymarket_clob_url,
                clob_ws=settings.polymarket_clob_ws_url,
                rtds=settings.polymarket_rtds_url,
                site=settings.polymarket_site_url,
                binance=settings.binance_rest_url,
            ),
            settings.markets,
            clock=timefmt.now,  # CLOCK_OFFSET_MS's shift
            stale_after_ms=settings.stale_threshold_ms,
            tape=tape,
            spans=settings.windows,
            # Redis keeps the latched prices to beat for the next refresher (a restart).
            journal_url=settings.redis_url if settings.uses_redis else None,
        )
    raise ValueError(f"unknown board source {settings.board_source!r}")
