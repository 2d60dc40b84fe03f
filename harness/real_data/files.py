"""Finding the public data in a folder, and writing tapes as hourly files."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import IO, Any

from app.refresher.tape import hour_name
from harness.real_data import klines

OFFICIAL_NAME = "polymarket_btc_5m_enriched.csv"
PUBLISHED_MARKET = "BTC"  # the market of the official outcomes and of the Cronos books


@dataclass
class Inputs:
    """What was found: kline files by day, the official outcomes' CSV, the book parquets."""

    klines: dict[date, klines.KlineFile] = field(default_factory=dict)
    official: Path | None = None
    parquet: list[Path] = field(default_factory=list)


def discover(paths: Iterable[Path], symbol: str = "BTCUSDT") -> Inputs:
    """Search ``paths`` (files, or folders recursively) for ``SYMBOL-1s-*.zip|csv``, the
    official outcomes' CSV (``polymarket_btc_5m_enriched.csv``) and ``market_data/*.parquet``
    (a parquet file given by name counts wherever it is). The outcomes and the books are
    ``PUBLISHED_MARKET``'s: for another market's klines only the klines are found."""
    paths = list(paths)
    found = Inputs(klines=klines.find(paths, symbol))
    if symbol != f"{PUBLISHED_MARKET}USDT":
        return found
    for root in paths:
        if root.is_file():
            if root.name == OFFICIAL_NAME:
                found.official = found.official or root
            elif root.suffix == ".parquet":
                found.parquet.append(root)
            continue
        officials = sorted(root.rglob(OFFICIAL_NAME))
        found.official = found.official or (officials[0] if officials else None)
        found.parquet += sorted(
            p for p in root.rglob("*.parquet") if p.parent.name == "market_data"
        )
    found.parquet = sorted(set(found.parquet))
    return found


def write_hourly(lines: Iterable[dict[str, Any]], directory: Path) -> int:
    """Write lines (in ``t`` order) to ``directory`` as ``YYYY-MM-DDTHH.jsonl`` files
    (``docs/tapes.md``), replacing files of the same names; how many lines were written."""
    directory.mkdir(parents=True, exist_ok=True)
    handle: IO[str] | None = None
    count = 0
    hour = None  # the hour (since the epoch) of the open file: each hour named once
    try:
        for item in lines:
            t = float(item["t"])
            if t // 3600 != hour:  # a new hour (gmtime's: whole seconds, floored): its file
                hour = t // 3600
                if handle is not None:
                    handle.close()
                handle = (directory / hour_name(t)).open("w", encoding="utf-8")
            assert handle is not None
            handle.write(json.dumps(item, separators=(",", ":")) + "\n")
            count += 1
    finally:
        if handle is not None:
            handle.close()
    return count
