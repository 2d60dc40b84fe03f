"""Reading tapes: files and folders of hourly JSONL (or gzipped JSONL) files, in ``t`` order."""

from __future__ import annotations

import gzip
import heapq
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

SUFFIXES = (".jsonl", ".jsonl.gz")


class TapeError(ValueError):
    """A tape that cannot be read; the message says where and why."""


def tape_files(paths: Iterable[str | Path]) -> list[Path]:
    """The tape files named by ``paths`` (files, or folders of ``*.jsonl[.gz]``), in order."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.name.endswith(SUFFIXES))
            if not inside:
                raise TapeError(f"{path}: no .jsonl or .jsonl.gz files in this folder")
            found.extend(inside)
        elif path.is_file():
            found.append(path)
        else:
            raise TapeError(f"{path}: no such file or folder")
    return found


def _open(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    previous = float("-inf")
    with _open(path) as handle:
        try:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                try:
                    line = json.loads(text)
                except ValueError as exc:
                    raise TapeError(f"{path}:{number}: not JSON ({exc})") from exc
                t = line.get("t") if isinstance(line, dict) else None
                if not isinstance(t, int | float) or isinstance(t, bool):
                    raise TapeError(f"{path}:{number}: no number 't'")
                if not isinstance(line.get("src"), str):
                    raise TapeError(f"{path}:{number}: no string 'src'")
                if t < previous:
                    raise TapeError(f"{path}:{number}: 't' goes back in time ({t} < {previous})")
                previous = t
                yield line
        except (OSError, EOFError, UnicodeDecodeError) as exc:
            raise TapeError(f"{path}: cannot be read ({exc})") from exc


def read_tapes(paths: Iterable[str | Path]) -> Iterator[dict[str, Any]]:
    """Every line of the tapes, merged in ``t`` order (each file is in ``t`` order)."""
    files = tape_files(paths)
    return heapq.merge(*(_lines(path) for path in files), key=lambda line: float(line["t"]))
