"""The names and numbers every stand-in shares: settlement rules, RTDS topics and filters,
the markets' identifiers (token and condition ids, slugs, Chainlink streams), times as Gamma
writes them, prices as the CLOB writes them, ``full_accuracy_value`` as RTDS writes it.

Nothing here listens or sends: the servers are in the other modules of the package. The
window's length is its kind's (``app.markets.SPANS``).
"""

from __future__ import annotations

import hashlib
import json
import time
from datetime import UTC, datetime
from decimal import Decimal

from app.markets import MARKETS

SPOT = "spot"
TWAP = "twap"
SPOT_TOPIC = "crypto_prices_chainlink"
TWAP_TOPIC = "crypto_prices_twap_sixty"  # the 60-second TWAP, today's settlement
TWAP30_TOPIC = "crypto_prices_twap_thirty"
SPOT_HISTORY_TOPIC = "crypto_prices"  # the spot's history snapshot arrives under this name
RTDS_TOPICS = (SPOT_TOPIC, TWAP_TOPIC, TWAP30_TOPIC)  # the Chainlink topics the fake serves
# The exchanges' prices (Binance's): ``filters`` is the pairs, comma-separated, lower case;
# ``payload.symbol`` the pair. The same name as the spot's history, told apart by the symbol.
EXCHANGE_TOPIC = "crypto_prices"
EXCHANGE_BASIS = Decimal("0.9997")  # exchange / Chainlink: BTC's basis of about -$30 (a choice)
TOPICS = {SPOT: SPOT_TOPIC, TWAP: TWAP_TOPIC}
TWAP_TOPICS = {60: TWAP_TOPIC, 30: TWAP30_TOPIC}  # lookback seconds -> topic
WINDOW_S_OF_TOPIC = {topic: lookback for lookback, topic in TWAP_TOPICS.items()}
SPOT_FILTERS = '{"symbol":"btc/usd"}'  # compact, as documented: the server matches the string
SPOT_RESOLUTION_SOURCE = "https://data.chain.link/streams/btc-usd"
TWAP_RESOLUTION_SOURCE = "https://data.chain.link/streams/btc-usd-twap-60s-streams"
SCALE = 10**18
SLUG_PREFIX = "btc-updown-5m-"  # BTC's; every market's is ``MARKETS[symbol].slug_prefix``
DEFAULT_SYMBOL = "BTC"  # the market every fake serves unless told another
DEFAULT_CHAINLINK = "btc/usd"  # its Chainlink stream on RTDS
COIN_NAMES = {"BTC": "Bitcoin", "ETH": "Ethereum", "SOL": "Solana", "XRP": "XRP"}


def filters_of(chainlink: str) -> str:
    """The compact filter string of a Chainlink stream: ``{"symbol":"eth/usd"}``."""
    return json.dumps({"symbol": chainlink}, separators=(",", ":"))


CHAINLINK_SYMBOLS = tuple(market.chainlink for market in MARKETS.values())
CHAINLINK_OF_PAIR = {market.exchange: market.chainlink for market in MARKETS.values()}
PAIR_OF_CHAINLINK = {chainlink: pair for pair, chainlink in CHAINLINK_OF_PAIR.items()}
SERVED_FILTERS = {filters_of(chainlink): chainlink for chainlink in CHAINLINK_SYMBOLS}
assert SERVED_FILTERS[SPOT_FILTERS] == DEFAULT_CHAINLINK


def _symbol_key(symbol: str, key: str) -> str:
    # BTC's ids are derived as they always were (tests and tapes hold them); another
    # market's name goes into the digest so two markets of one window never share an id.
    return key if symbol == DEFAULT_SYMBOL else f"{symbol}:{key}"


def token_id(window_start: int, label: str, symbol: str = DEFAULT_SYMBOL) -> str:
    """A 77-digit decimal token id, stable for (market, window, label)."""
    key = _symbol_key(symbol, f"{window_start}:{label}")
    digest = int(hashlib.sha256(key.encode()).hexdigest(), 16)
    return str(10**76 + digest % (9 * 10**76))


def condition_id(window_start: int, symbol: str = DEFAULT_SYMBOL, tag: str = "") -> str:
    """``0x`` + 64 hex digits, stable per market and window (``tag``: another window
    length's, ``:15m``)."""
    key = _symbol_key(symbol, f"condition:{window_start}{tag}")
    return "0x" + hashlib.sha256(key.encode()).hexdigest()


def chainlink_of(symbol: str) -> str:
    """The RTDS stream of a market (``ETH`` -> ``eth/usd``); ``ValueError`` when unknown."""
    try:
        return MARKETS[symbol].chainlink
    except KeyError:
        raise ValueError(f"unknown symbol {symbol!r} (known: {', '.join(MARKETS)})") from None


def resolution_source(symbol: str, rule: str, lookback: int = 60, binance: bool = False) -> str:
    """A market's ``resolutionSource``: its Chainlink stream, the TWAP one for ``TWAP``; with
    ``binance`` (an hourly market) the Binance pair's page."""
    chainlink_of(symbol)  # an unknown market is a mistake in the test
    if binance:
        return f"https://www.binance.com/en/trade/{symbol}_USDT"
    coin = symbol.lower()
    if rule == TWAP:
        return TWAP_RESOLUTION_SOURCE.replace("btc-", f"{coin}-").replace("60s", f"{lookback}s")
    return SPOT_RESOLUTION_SOURCE.replace("btc-", f"{coin}-")


def iso(t: float) -> str:
    """ISO-8601 UTC as Gamma writes it."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_iso(text: str) -> int:
    """Unix seconds of an ISO-8601 UTC time (``Z`` or ``+00:00``, with or without ms)."""
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def scaled(value: Decimal | str | float) -> str:
    """``full_accuracy_value``: the price times 1e18 as a decimal string."""
    return str(int(Decimal(str(value)) * SCALE))


def exact(value: Decimal | str | float) -> float:
    """What a correct reader of ``full_accuracy_value`` gets for ``value``."""
    return float(Decimal(scaled(value)) / Decimal(SCALE))


def plain(value: Decimal | str | float) -> str:
    """``full_accuracy_value`` in the announced successor format: a plain decimal string.

    The same 18-decimal truncation as ``scaled``, so both formats carry the same number.
    """
    # scaleb is exact, where a division would round to the context's precision.
    exact_value = Decimal(scaled(value)).scaleb(-18)
    return format(exact_value.normalize(), "f")


def price_text(price: Decimal | str | float) -> str:
    """A price as the CLOB writes it: ``"0.53"``, ``"0.5"``, never ``"0.53000001"``."""
    # Through str() so a float is read as its shortest repr, not its binary expansion.
    return format(Decimal(str(price)).normalize(), "f")


def now_ms() -> int:
    """Epoch milliseconds on the real wall clock (a fake's own, its world's: ``now_ms()``)."""
    return int(time.time() * 1000)


def twap_topic(lookback: int) -> str:
    """The RTDS topic of a TWAP lookback (60 or 30 seconds)."""
    try:
        return TWAP_TOPICS[lookback]
    except KeyError:
        raise ValueError(f"no TWAP topic for a {lookback} s lookback") from None
