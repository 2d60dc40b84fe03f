"""The live source: Polymarket's 5-minute "Up or Down" markets and their settlement prices.

- ``gamma``: which market is the current window (by slug), its token ids and rule.
- ``book``: best bid/ask per outcome token from order-book messages.
- ``clob``: the CLOB market WebSocket (books) and REST ``/books`` (fallback, cross-check).
- ``identity``: Gamma's market (condition, which token is UP) checked against the CLOB's own,
  and the socket's top against the book.
- ``rtds``: the real-time data socket (each market's Chainlink spot and TWAP reports).
- ``source``: the board row, with every input's origin and age.
"""
