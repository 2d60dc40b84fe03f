"""Replay docs/reliability.md's "Mutations the tests catch": each change, alone, must fail.

For each mutation (a file, one exact line of it, the line that replaces it, the tests it must
fail): the line is replaced, each named test is run on its own (``pytest -q -p no:cacheprovider
-x <nodeid>``), and the file is written back as it was, in a ``finally`` (an error or Ctrl-C
included). One line a mutation: ``caught`` when every named test failed, ``MISSED`` with the
tests that passed otherwise.

First the named tests run once unmutated: they must pass, or a failure under a mutation
would say nothing. Exit 0 when every mutation is caught, 1 when one is missed, 2 when the
table no longer fits the code (an original line not found exactly once), the tests fail
unmutated, or pytest ends otherwise than pass or fail (a collection error, say).

Not part of ``make test``: it runs about 25 pytest processes (some two minutes). Run it after
changing one of these constants or the tests that guard them:
``.venv/bin/python scripts/check_mutations.py``.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POLYMARKET = "app/refresher/sources/polymarket"
PLAUSIBILITY = "tests/unit/refresher/sources/polymarket/test_plausibility.py"
POLYMARKET_TESTS = "tests/unit/refresher/sources/polymarket/test_polymarket.py"
UNIT = "tests/unit/refresher/sources/polymarket"
SMOOTHING = f"{UNIT}/test_smoothing.py"
TEST_TIMEOUT_S = 300  # one pytest process: setup.cfg's own per-test limit


@dataclass(frozen=True)
class Mutation:
    """One change to make alone: ``original`` (a whole line of ``path``) becomes ``replacement``,
    and each of ``tests`` (pytest node ids) must then fail."""

    path: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    title: str = ""  # what the change is, when its lines say it badly

    def label(self) -> str:
        """The change as ``file: old -> new`` (the lines stripped of comments and indent)."""
        if self.title:
            return f"{Path(self.path).name}: {self.title}"
        old, new = (line.split("#")[0].strip() for line in (self.original, self.replacement))
        return f"{Path(self.path).name}: {old} -> {new}"


def _constant(
    path: str, name: str, old: str, news: tuple[str, ...], tests: tuple[str, ...], tail: str = ""
) -> list[Mutation]:
    """``name = old<tail>`` in ``path`` changed to each of ``news`` in turn."""
    return [
        Mutation(f"{POLYMARKET}/{path}", f"{name} = {old}{tail}", f"{name} = {new}{tail}", tests)
        for new in news
    ]


def _plausibility(*names: str) -> tuple[str, ...]:
    return tuple(f"{PLAUSIBILITY}::{name}" for name in names)


_BTC = '        Market("BTC", "btc/usd", "btc-up-or-down-5m", {}, 95_000.0, 0.50, "btcusdt", 0.10),'

MUTATIONS: tuple[Mutation, ...] = (
    *_constant(
        "rtds.py",
        "MAX_SKEW_MS",
        "2_000",
        ("300_000",),
        _plausibility("test_a_point_up_to_2_s_ahead_of_our_clock_is_taken_and_later_ones_dropped"),
    ),
    *_constant(
        "price_series.py",
        "RELEARN_S",
        "30.0",
        ("12.0",),
        _plausibility("test_a_new_level_held_for_30_s_is_believed_and_not_sooner"),
    ),
    *_constant(
        "price_series.py",
        "RELEARN_POINTS",
        "10",
        ("4", "20"),
        _plausibility("test_a_new_level_needs_10_points_as_well_as_30_s"),
    ),
    *_constant(
        "points.py",
        "MAX_POINTS",
        "20_000",
        ("100_000",),
        # Not the flood fault test: since a history frame is merged as each second's first and
        # last point, its frames stay far under the cap (docs/reliability.md).
        _plausibility("test_a_flood_of_points_is_capped_at_20_000"),
    ),
    *_constant(
        "price_series.py",
        "JUMP_BASE",
        "0.01",
        ("0.02",),
        _plausibility(
            "test_a_move_is_believed_within_1_percent_plus_0_2_percent_per_root_second",
            "test_a_stray_value_is_suspect_and_never_the_price",
        ),
    ),
    *_constant(
        "price_series.py",
        "JUMP_PER_ROOT_S",
        "0.002",
        ("0.004",),
        _plausibility(
            "test_a_move_is_believed_within_1_percent_plus_0_2_percent_per_root_second",
            "test_the_live_btc_spot_is_judged_by_the_same_120_bp_a_second",
        ),
    ),
    Mutation(
        "app/markets.py",
        _BTC.format("0.01"),
        _BTC.format("0.02"),
        _plausibility("test_the_live_btc_spot_is_judged_by_the_same_120_bp_a_second"),
        "BTC's jump_base (the live feed's own) 0.01 -> 0.02",
    ),
    *_constant(
        "points.py",
        "MAX_NORMAL_LAG_MS",
        "2_000",
        ("10_000",),
        _plausibility(
            "test_a_price_point_stamped_long_ago_is_old_news",
            "test_a_feed_steadily_9_s_late_is_as_old_as_its_information",
        ),
    ),
    *_constant(
        "points.py",
        "LAG_SAMPLES",
        "31",
        ("1", "29", "33", "101"),
        _plausibility("test_the_normal_lag_is_the_median_of_the_last_31_points"),
    ),
    *_constant(
        "price_series.py",
        "CONFIRM_POINTS",
        "2",
        ("3",),
        _plausibility("test_an_empty_series_waits_for_two_points_that_agree"),
        "  # a series with nothing believed yet: this many points that agree",
    ),
    *_constant(
        "rtds.py",
        "EXACT_TOLERANCE",
        "0.01",
        ("0.05", "0.005"),
        _plausibility("test_an_exact_value_is_the_price_only_within_1_percent_of_its_value"),
        "  # full_accuracy_value may differ from value by rounding, not by 1 %",
    ),
    *_constant(
        "price_series.py",
        "SPOT_HISTORY_S",
        "4 * 3600",
        ("1 * 3600",),
        _plausibility("test_four_hours_of_the_spot_at_1_hz_are_all_kept"),
        "  # hours of spot: the volatility's horizon scale is measured on it",
    ),
    *_constant(
        "price_to_beat_witness.py",
        "BASE",
        "0.001",
        ("0.002",),
        _plausibility("test_a_price_to_beat_from_outside_the_stream_must_sit_by_the_spot"),
    ),
    *_constant(
        "points.py",
        "MAX_GAP_MS",
        "3000",
        ("10000", "2000"),
        _plausibility("test_the_spot_at_t0_is_latched_only_without_a_hole_over_3_s_around_it"),
        "  # consecutive Chainlink points (about 1 Hz) further apart: a hole",
    ),
    *_constant(
        "rest_books.py",
        "BOOK_FRESH_S",
        "2.0",
        ("10.0", "1.0"),
        (f"{POLYMARKET_TESTS}::test_rest_reads_the_books_of_a_quote_unconfirmed_for_over_2_s",),
        "  # a quote not confirmed for this long is re-read over REST",
    ),
    # Issue 48, point 7: three changes that passed every test before.
    *_constant(
        "witness.py",
        "BOUND_SPREADS",
        "8.0",
        ("80.0", "7.0"),
        tuple(
            f"{UNIT}/test_witness.py::test_the_bound_is_8_robust_sds_of_ratios_whose_spread_is_known[{side}]"
            for side in ("above", "below")
        ),
    ),
    Mutation(
        f"{POLYMARKET}/price_to_beat_witness.py",
        "    if distance_s > ONE_SIDED_MAX_S:",
        "    if distance_s >= ONE_SIDED_MAX_S:",
        (
            f"{UNIT}/test_price_to_beat_witness.py::"
            "test_the_one_sided_limit_holds_at_exactly_30_s_and_not_a_millisecond_beyond",
        ),
        "the one-sided limit > -> >= (a point exactly 30 s from T0)",
    ),
    Mutation(
        f"{POLYMARKET}/doubts.py",
        "            if verdict is None:",
        "            if verdict is None or not verdict.disagrees:",
        (
            f"{UNIT}/test_row_assembly.py::"
            "test_a_pending_identity_doubt_makes_the_fresh_row_stale_with_its_reason",
        ),
        "a doubt not yet confirmed cleared (the row fresh while its identity check is pending)",
    ),
    # Issue 48: the defences added with it, each with the test that sees it go.
    *_constant(
        "witness.py",
        "TRAIL_MS",
        "2_500",
        ("0",),
        tuple(
            f"{UNIT}/test_witness.py::test_a_spot_trailing_a_fast_exchange_move_agrees_for_the_trail_only[{way}]"
            for way in ("up", "down")
        ),
    ),
    Mutation(
        f"{POLYMARKET}/price_series.py",
        "            return (exact, exact_why) if exact is not Verdict.NONE"
        ' else (Verdict.AGREES, "")',
        '            return Verdict.AGREES, ""',
        (
            f"{UNIT}/test_witness.py::"
            "test_a_trailing_spot_is_believed_unless_the_reports_disagree[inside-the-move]",
        ),
        "the trail believed whatever the TWAP reports say",
    ),
    Mutation(
        f"{POLYMARKET}/twap_witness.py",
        "            if all(bases):",
        "            if False:",
        (
            f"{UNIT}/test_witness.py::"
            "test_the_reports_shift_is_learnt_and_a_wrong_point_refused_once_its_report_comes[3]",
        ),
        "the TWAP reports' shift never learnt (always 0)",
    ),
    Mutation(
        f"{POLYMARKET}/identity.py",
        "        if check.state == UNRECORDED"
        " and all(found == condition for found in seen.values()):",
        "        if check.state in (FAILED, UNRECORDED)"
        " and all(found == condition for found in seen.values()):",
        (
            f"{UNIT}/test_polymarket_identity.py::"
            "test_a_failed_lookup_fails_closed_and_is_asked_again",
        ),
        "a failed CLOB market lookup left to the books again (not failing closed)",
    ),
    Mutation(
        f"{POLYMARKET}/witness.py",
        "        fitted = self._smoothing.fitted",
        "        fitted = None",
        (
            f"{SMOOTHING}::test_a_slow_smoothing_learnt_keeps_a_big_move_believed_past_the"
            "_fixed_trail[learnt]",
            f"{SMOOTHING}::test_through_a_fast_move_the_honest_spot_trails_and_a_frozen_or_lying"
            "_one_does_not[up-quick]",
        ),
        "the learnt smoothing never used (the fixed trail always judges)",
    ),
    Mutation(
        f"{POLYMARKET}/smoothing.py",
        "    return Smoothing(direct / (direct + rest), decay)",
        "    return Smoothing(direct, decay)",
        (
            f"{SMOOTHING}::test_noise_on_the_exchange_shrinks_the_weights_alike_and_their_sum"
            "_restores_them[quick]",
        ),
        "the smoothing's weights not scaled to sum to one",
    ),
    Mutation(
        f"{POLYMARKET}/smoothing.py",
        "        if best is None or residual < best[0]:",
        "        if best is None or residual > best[0]:",
        (f"{SMOOTHING}::test_an_exact_smoothing_is_found[slow]",),
        "the decay that explains the spot worst chosen",
    ),
    *_constant(
        "smoothing.py",
        "MIN_FIT",
        "0.2",
        ("-1.0",),
        (f"{SMOOTHING}::test_none_before_min_rows_nor_without_a_link_nor_on_a_flat_exchange",),
    ),
)


class TableError(Exception):
    """The table no longer fits the code or the tests (exit 2)."""


def pytest(*nodeids: str) -> int:
    """pytest's exit status for ``nodeids`` (0 all passed, 1 some failed), its output hidden."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *nodeids]
    done = subprocess.run(  # noqa: S603 (this interpreter, node ids from the table above)
        command, cwd=ROOT, capture_output=True, timeout=TEST_TIMEOUT_S, check=False
    )
    if done.returncode not in (0, 1):
        raise TableError(f"pytest {' '.join(nodeids)} ended with status {done.returncode}")
    return done.returncode


def mutated(text: str, mutation: Mutation) -> str:
    """``text`` with ``mutation.original`` (a whole line, exactly once) replaced."""
    lines = text.split("\n")
    where = [i for i, line in enumerate(lines) if line == mutation.original]
    if len(where) != 1:
        raise TableError(
            f"{mutation.path}: {mutation.original!r} found {len(where)} times, not once"
        )
    lines[where[0]] = mutation.replacement
    return "\n".join(lines)


def survivors(mutation: Mutation) -> list[str]:
    """The tests of ``mutation`` that still pass with it made; the file restored after."""
    path = ROOT / mutation.path
    original = path.read_bytes()
    try:
        path.write_bytes(mutated(original.decode("utf-8"), mutation).encode("utf-8"))
        return [test for test in mutation.tests if pytest(test) == 0]
    finally:
        path.write_bytes(original)


def main() -> int:
    everything = sorted({test for mutation in MUTATIONS for test in mutation.tests})
    try:
        if pytest(*everything) != 0:
            raise TableError("the named tests fail without any mutation: fix that first")
        missed = 0
        for mutation in MUTATIONS:
            passed = survivors(mutation)
            missed += bool(passed)
            verdict = f"MISSED (passed: {', '.join(passed)})" if passed else "caught"
            print(f"{verdict:8} {mutation.label()}", flush=True)
    except TableError as error:
        print(f"check_mutations: {error}", file=sys.stderr)
        return 2
    print(f"{len(MUTATIONS) - missed} of {len(MUTATIONS)} mutations caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
