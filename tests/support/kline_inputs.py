"""Binance-style 1 s klines of a seeded Brownian path, written as Binance names its files,
and what the tests of the real-data converters read back from them (``harness.real_data``).

No real data: every input is generated here (IGOLz/polyedge-v2 has no license).
"""

from __future__ import annotations

import functools
import json
import statistics
import zipfile
from decimal import Decimal
from pathlib import Path
from typing import Any

from harness.fake_polymarket import BrownianPath
from harness.spans import WINDOW_S

DAY = "2026-03-12"
D0 = 1_773_273_600  # 2026-03-12 00:00 UTC
SECONDS = 4800  # 80 minutes of klines
# The tape starts 50 minutes into the data (the snapshot has history) and crosses 01:00 (two
# hourly files); the replay costs about 2.5 ms a tape second, so it holds 2 windows, not 12:
# every assertion is per window (its outcome, checkpoints and probabilities) or about the
# hour files and the frames' form. On this seeded path the first settles DOWN and the second
# UP by either rule (asserted), so a rule that always answers one way fails as surely.
START = D0 + 3000
WINDOWS = 2
END = START + WINDOWS * WINDOW_S + 10  # and the next one's price to beat (its T0 point
# arrives +1.4 s)


@functools.cache  # the same rows every time (a seeded path): built once, read many times
def kline_rows(seconds: int = SECONDS, micro: bool = True) -> tuple[str, ...]:
    """Binance-style 1 s kline rows of a Brownian path (closes to the cent)."""
    path = BrownianPath(7, 1.5e-4, 70_000, D0, seconds)
    rows = []
    previous = Decimal("70000.00")
    for i in range(seconds):
        close = path.value(D0 + i + 1).quantize(Decimal("0.01"))
        opened = (D0 + i) * (1_000_000 if micro else 1000)
        high, low = max(previous, close), min(previous, close)
        rows.append(
            f"{opened},{previous},{high},{low},{close},0.1,{opened + 999},7000,3,0.05,3500,0"
        )
        previous = close
    return tuple(rows)


def write_klines(folder: Path, zipped: bool = False) -> Path:
    """One (partial) day of klines, as Binance names it; zipped or not."""
    folder.mkdir(parents=True, exist_ok=True)
    text = "\n".join(kline_rows()) + "\n"
    name = f"BTCUSDT-1s-{DAY}.csv"
    if not zipped:
        (folder / name).write_text(text)
        return folder / name
    target = folder / name.replace(".csv", ".zip")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, text)
    return target


def closes_by_stamp() -> dict[int, float]:
    """Second -> price, read straight from the generated rows (the close of the kline that
    opens at s is the price at s + 1)."""
    found = {}
    for row in kline_rows():
        fields = row.split(",")
        found[int(fields[0]) // 1_000_000 + 1] = float(fields[4])
    return found


def frames(lines: list[dict[str, Any]], src: str) -> list[Any]:
    return [json.loads(x["frame"]) for x in lines if x["src"] == src and "frame" in x]


def computed_outcome(closes: dict[int, float], t0: int, lookback: int | None) -> str:
    def settle(t: int) -> float:
        if lookback is None:
            return closes[t]
        return statistics.fmean(closes[s] for s in range(t - lookback + 1, t + 1))

    return "up" if settle(t0 + WINDOW_S) >= settle(t0) else "down"


def frames_lines(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The RTDS price frames of a tape (updates and the snapshot)."""
    return [x for x in lines if x["src"] == "rtds" and '"payload"' in x.get("frame", "")]
