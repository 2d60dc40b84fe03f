"""The live source: Polymarket's BTC 5-minute "Up or Down" markets and the settlement price.

- ``gamma``: which market is the current window (by slug), its token ids and rule.
- ``book``: best bid/ask per outcome token from order-book messages.
- ``clob``: the CLOB market WebSocket (books) and REST ``/books`` (fallback, cross-check).
- ``rtds``: the real-time data socket (Chainlink BTC/USD spot or 60 s TWAP).
- ``source``: the board row, with every input's origin and age.
"""
