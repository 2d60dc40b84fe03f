"""A window's doubts: inputs that disagree with their witnesses keep its row stale.

Each doubt has a kind (the price to beat, the market's identity, a socket top) and a reason,
shown in the row's ``suspect`` until the input agrees again (docs/reliability.md). A new
doubt is counted once as a ``disagrees`` suspect of the feed it came from.
"""

from __future__ import annotations

from app.refresher.sources.polymarket.book import Books
from app.refresher.sources.polymarket.discovery import LiveWindow
from app.refresher.sources.polymarket.gamma import WindowMarket
from app.refresher.sources.polymarket.identity import (
    IDENTITY,
    TOP_KINDS,
    Identities,
    Verdict,
    top_verdicts,
)
from app.refresher.sources.polymarket.suspects import Suspects


class Doubts:
    """Raises and clears the doubts of windows, counting each new one with its feed's
    suspects (``market``: Gamma's and the site's; ``rtds``; ``clob``: the books')."""

    def __init__(self, suspects: dict[str, Suspects], books: Books, identity: Identities) -> None:
        self._suspects = suspects
        self._books = books
        self._identity = identity

    def doubt(
        self, window: LiveWindow, kind: str, reason: str, feed: str = "market", counted: bool = True
    ) -> None:
        """``window``'s row is stale for ``reason`` until ``clear(window, kind)``; counted as a
        ``disagrees`` suspect of ``feed`` (logged at most once a minute) when new, unless not
        ``counted`` (an input not confirmed yet, which nothing contradicts)."""
        if window.doubts.get(kind) != reason:
            window.doubts[kind] = reason
            if counted:
                suspects = self._suspects.get(feed, self._books.suspects)
                suspects.note("disagrees", f"{window.coin.symbol} window {window.t0}: {reason}")

    @staticmethod
    def clear(window: LiveWindow, kind: str) -> None:
        """The input of ``kind`` agrees with its witness again."""
        window.doubts.pop(kind, None)

    def judge_identity(self, window: LiveWindow, market: WindowMarket | None) -> None:
        """Doubt the row while Gamma's market or a socket top is not confirmed by the CLOB
        (identity.py); clear each doubt once it is."""
        verdicts: dict[str, Verdict | None] = dict.fromkeys((IDENTITY, *TOP_KINDS.values()))
        if market is not None:
            verdicts[IDENTITY] = self._identity.verdict(market)
            verdicts.update(top_verdicts(self._books, market))
        for kind, verdict in verdicts.items():
            if verdict is None:
                self.clear(window, kind)
            else:
                self.doubt(window, kind, verdict.reason, verdict.feed, verdict.disagrees)
