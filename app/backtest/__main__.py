"""``python -m app.backtest TAPE... [--json] [--tick-ms N]``."""

from app.backtest.cli import backtest_command

backtest_command(prog_name="python -m app.backtest")
