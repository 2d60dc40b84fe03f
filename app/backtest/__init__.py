"""Backtests: replay tapes through the live source on tape time, and score what it said.

``tapes`` reads the recorded lines, ``replay`` feeds them to the same parsers, source and
model on a virtual clock, ``outcomes`` finds how each window settled, ``scores`` computes
Brier scores, log losses and reliability, ``report`` puts them together, ``cli`` is
``python -m app.backtest`` (and ``flask --app wsgi backtest``, registered by ``app.commands``).
"""
