"""The board's track record: checkpoints, outcomes and scores.

Shared by the backtest (``app.backtest``: boards replayed from tapes) and the live record
(``recorder``: the refresher's own boards, stored in the SQL store and served by
``GET /api/probboard/calibration``):

- ``checkpoints``: a window's P(up) and market mid at fixed times left, from boards;
- ``outcomes``: how a window settled (the market's resolution, else the settlement feed);
- ``scores`` and ``summary``: Brier score, log loss and reliability, per time left.
"""
