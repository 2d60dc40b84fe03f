"""Binance 1-second klines (``SYMBOL-1s-YYYY-MM-DD.csv`` or the same zipped), read as the
price in force at each whole second.

A kline row is ``open_time, open, high, low, close, ...``; ``open_time`` is in microseconds
in Binance's files since 2025 (milliseconds before): both are read. The close of the kline
that opens at second ``s`` is the last trade before ``s + 1``, so it is the price at the
instant ``s + 1`` and is stamped ``s + 1`` here: no point ever carries a trade from after its
own timestamp. The close of the day's last kline is therefore the price at the next
midnight, which settles the day's last window.
"""

from __future__ import annotations

import contextlib
import io
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import IO

NAME = re.compile(r"^(?P<symbol>[A-Z0-9]+)-1s-(?P<day>\d{4}-\d{2}-\d{2})\.(?P<ext>zip|csv)$")
DAY_S = 86_400


class KlineError(ValueError):
    """A kline file that cannot be read; the message names it."""


@dataclass(frozen=True)
class KlineFile:
    """One day of one symbol's klines: ``BTCUSDT-1s-2026-03-12.zip`` or ``.csv``."""

    symbol: str  # as Binance writes it: BTCUSDT
    day: date
    path: Path


def day_start(day: date) -> int:
    """Unix seconds of ``day``'s 00:00 UTC."""
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())


def parse_name(path: Path) -> KlineFile | None:
    """The file's symbol and day from its name, or None for any other file."""
    match = NAME.match(path.name)
    if match is None:
        return None
    return KlineFile(match["symbol"], date.fromisoformat(match["day"]), path)


def find(paths: Iterable[Path], symbol: str) -> dict[date, KlineFile]:
    """``symbol``'s kline files under ``paths`` (files, or folders searched recursively), by
    day. When a day is there both zipped and unzipped the CSV is read (no decompression)."""
    found: dict[date, KlineFile] = {}
    for root in paths:
        candidates = [root] if root.is_file() else sorted(root.rglob(f"{symbol}-1s-*"))
        for path in candidates:
            kline = parse_name(path)
            if kline is None or kline.symbol != symbol or not path.is_file():
                continue
            known = found.get(kline.day)
            if known is None or (known.path.suffix == ".zip" and path.suffix == ".csv"):
                found[kline.day] = kline
    return dict(sorted(found.items()))


@contextlib.contextmanager
def _open(path: Path) -> Iterator[IO[str]]:
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as archive:
            members = [n for n in archive.namelist() if n.endswith(".csv")]
            if len(members) != 1:
                raise KlineError(f"{path}: expected one .csv inside, found {len(members)}")
            with archive.open(members[0]) as raw:
                yield io.TextIOWrapper(raw, encoding="utf-8")
    else:
        with path.open(encoding="utf-8") as handle:
            yield handle


def read_closes(path: Path) -> dict[int, str]:
    """Second (Unix, the instant the close is the price of) -> close as written."""
    closes: dict[int, str] = {}
    try:
        with _open(path) as handle:
            for number, text in enumerate(handle, start=1):
                fields = text.split(",", 5)
                if len(fields) < 5 or not fields[0].isdigit():
                    continue  # a header line, or an empty one
                opened = int(fields[0])
                # Microseconds (16 digits) in the files since 2025, milliseconds before.
                second = opened // 1_000_000 if opened >= 10**14 else opened // 1000
                close = fields[4].strip()
                try:
                    if float(close) <= 0:
                        raise ValueError(close)
                except ValueError as exc:
                    raise KlineError(f"{path}:{number}: close {close!r} is not a price") from exc
                closes[second + 1] = close
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise KlineError(f"{path}: cannot be read ({exc})") from exc
    return closes


@dataclass
class Ticks:
    """The price in force at whole seconds (the klines' closes), from several days' files."""

    closes: dict[int, str] = field(default_factory=dict)

    @classmethod
    def load(cls, paths: Iterable[Path]) -> Ticks:
        """Read every file (days may come in any order)."""
        ticks = cls()
        for path in paths:
            ticks.closes.update(read_closes(path))
        return ticks

    @property
    def first(self) -> int | None:
        """The earliest second with a price."""
        return min(self.closes) if self.closes else None

    @property
    def last(self) -> int | None:
        """The latest second with a price."""
        return max(self.closes) if self.closes else None

    def span(self, a: int, b: int) -> list[tuple[int, str]]:
        """(second, close) for every second in [a, b] that has one, in time order."""
        closes = self.closes
        return [(s, closes[s]) for s in range(a, b + 1) if s in closes]


@dataclass
class Seconds:
    """One symbol's 1-second klines as the hourly bench reads them: per second, the first
    trade's price (``opens``, the kline's open) and the price at its end (``closes``, stamped
    with the second they open at, unlike ``read_closes``)."""

    opens: dict[int, float] = field(default_factory=dict)
    closes: dict[int, float] = field(default_factory=dict)

    @classmethod
    def load(cls, paths: Iterable[Path]) -> Seconds:
        """Read every file (days may come in any order)."""
        seconds = cls()
        for path in paths:
            try:
                with _open(path) as handle:
                    for text in handle:
                        fields = text.split(",", 5)
                        if len(fields) < 5 or not fields[0].isdigit():
                            continue
                        opened = int(fields[0])
                        second = opened // 1_000_000 if opened >= 10**14 else opened // 1000
                        seconds.opens[second] = float(fields[1])
                        seconds.closes[second] = float(fields[4])
            except (OSError, zipfile.BadZipFile, UnicodeDecodeError, ValueError) as exc:
                raise KlineError(f"{path}: cannot be read ({exc})") from exc
        return seconds

    def candle(self, start: int, length: int) -> tuple[float, float] | None:
        """(open, close) of the candle of ``length`` seconds opening at ``start``, as Binance
        builds it from its trades: the first second's open and the last second's close that
        have trades in it; None when the candle has none."""
        inside = [s for s in range(start, start + length) if s in self.opens]
        if not inside:
            return None
        return self.opens[inside[0]], self.closes[inside[-1]]

    def minute_closes(self) -> list[tuple[int, float]]:
        """(minute start, close of the minute's last second with a trade), in time order: the
        1-minute klines' closes."""
        last: dict[int, int] = {}
        for second in self.closes:
            minute = second - second % 60
            if second > last.get(minute, -1):
                last[minute] = second
        return [(minute, self.closes[last[minute]]) for minute in sorted(last)]
