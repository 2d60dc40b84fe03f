"""Binance's REST market data: the hourly markets' settlement candle (issue 49, point 2)."""
