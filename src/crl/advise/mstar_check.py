"""Check 1 of docs/advisor_mstar.md: ``crl advise --mstar``'s predictor replayed on a committed m*(n) grid of
:mod:`crl.experiments.mstar` (``crl experiment mstar --advisor-check``).

The surfaces were seen before (their m_q tables are committed), so this is exploratory, reported apart from the
validation on unseen data. Per regime of the in-sample arm, with the advisor's error (1 - the stored score):

- for N = 8,000 the pilot n = 500, 1,000, 2,000 predict m_band at N and 2N; for N = 16,000 the pilot n = 1,000,
  2,000, 4,000 predict it at N (:data:`POINTS`);
- the truth is m_band measured on the grid at that n (its own seeds, jackknife interval);
- the no-growth answer is m_band at the largest pilot n; the negative control reverses the pilot's growth.

Targets (per regime): within a factor 2 at >= 80% of points (a censored prediction or truth is a miss); the
median |log(predicted / truth)| below the no-growth answer's; coverage of the 95% interval beside its width.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from crl._vocab import REGIME_LABELS, Regime
from crl.advise.mstar import Interval, band_at, predict_mstar
from crl.experiments.mstar.design import DataName, Grid
from crl.experiments.mstar.summary import metric_table
from crl.sweep import CellRecord

__all__ = ["ARM", "POINTS", "SCORE", "CheckPoint", "check_markdown", "check_points"]

ARM = "in_sample"
POINTS = ((8_000, 8_000), (8_000, 16_000), (16_000, 16_000))
"""(N, the n predicted at)."""
SCORE: dict[DataName, str] = {"fashion": "recall@1", "wordnet": "ndcg@10"}
"""The stored score whose complement is the advisor's error (recall_error, ndcg_error)."""
WITHIN = 2.0
TARGET_SHARE = 0.8
INFORMATIVE_SLOPE = 0.25
"""The control can miss by more than a factor 2 at 4x beyond the pilot only where the pilot's |slope| exceeds
this (4^(2 |b|) > 2)."""


@dataclass(frozen=True)
class CheckPoint:
    """One predicted point: the prediction, the truth, the no-growth answer and the control's prediction."""

    data: str
    regime: Regime
    n_full: int
    n: int
    pilot_ns: tuple[int, ...]
    slope: Interval
    predicted: Interval
    truth: Interval
    no_growth: Interval
    control: Interval

    @property
    def log_ratio(self) -> float:
        """log(predicted / truth)."""
        return math.log(self.predicted.value / self.truth.value)

    @property
    def within(self) -> bool:
        """Within a factor 2, neither side censored."""
        return _uncensored(self.predicted, self.truth) and abs(self.log_ratio) <= math.log(WITHIN)

    @property
    def control_within(self) -> bool:
        """The control's prediction within a factor 2 of the truth, neither side censored."""
        return _uncensored(self.control, self.truth) and abs(
            math.log(self.control.value / self.truth.value)
        ) <= math.log(WITHIN)

    @property
    def covered(self) -> bool:
        """The truth inside the prediction's 95% interval."""
        return self.predicted.low <= self.truth.value <= self.predicted.high


def _uncensored(*intervals: Interval) -> bool:
    return all(interval.censoring == "" for interval in intervals)


def _errors(by_m: dict[int, dict[int, float]]) -> dict[int, dict[int, float]]:
    """m -> seed -> 1 - score."""
    return {m: {seed: 1.0 - value for seed, value in seeds.items()} for m, seeds in by_m.items()}


def check_points(records: Sequence[CellRecord], data: DataName, grid: Grid) -> list[CheckPoint]:
    """Every registered point of both regimes that the grid's in-sample arm covers (module docstring)."""
    table, _ = metric_table(records, data, grid, SCORE[data])
    found = []
    for regime in ("shared", "independent"):
        errors = {
            (n, m): seeds
            for (arm, key_regime, n), by_m in table.items()
            if arm == ARM and key_regime == regime
            for m, seeds in _errors(by_m).items()
        }
        measured_n = {n for n, _ in errors}
        for n_full, n in POINTS:
            pilot_ns = (n_full // 16, n_full // 8, n_full // 4)
            if not {*pilot_ns, n} <= measured_n:
                continue
            prediction = predict_mstar(errors, n_full, ns=pilot_ns)
            control = predict_mstar(errors, n_full, ns=pilot_ns, reverse_growth=True)
            found.append(
                CheckPoint(
                    data,
                    regime,
                    n_full,
                    n,
                    pilot_ns,
                    prediction.slope,
                    prediction.at[n],
                    band_at(errors, n),
                    prediction.pilots[-1].m_band,
                    control.at[n],
                )
            )
    return found


def check_markdown(points: Sequence[CheckPoint], *, source: str) -> str:
    """The points and the registered targets per regime as Markdown."""
    lines = [
        "## crl advise --mstar replayed on a committed m*(n) grid (exploratory: surfaces seen before)",
        "",
        f"From {source}; registered in docs/advisor_mstar.md (check 1). m_band: log m_q averaged over q in "
        "[2.5%, 10%] of the plateau of the advisor's error (1 - the stored score); intervals: delete-one-seed "
        "jackknife Student-t 95%.",
        "",
        "| data | regime | N | pilot n | slope b | predicted at n | truth | ratio | within 2x | covered | "
        "no-growth | control (slope -b) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        lines.append(
            f"| {p.data} | {REGIME_LABELS[p.regime]} | {p.n_full:,} -> {p.n:,} | "
            f"{', '.join(f'{n:,}' for n in p.pilot_ns)} | {p.slope.text()} | {p.predicted.text()} | "
            f"{p.truth.text()} | {math.exp(p.log_ratio):.2f} | {'yes' if p.within else 'no'} | "
            f"{'yes' if p.covered else 'no'} | {p.no_growth.text()} | {p.control.text()} |"
        )
    lines += ["", *_target_lines(points)]
    return "\n".join(lines) + "\n"


def _target_lines(points: Sequence[CheckPoint]) -> list[str]:
    """The three targets and the control, per regime."""
    lines = []
    for regime in ("shared", "independent"):
        chosen = [p for p in points if p.regime == regime]
        if not chosen:
            continue
        within = sum(p.within for p in chosen)
        median = statistics.median(abs(p.log_ratio) for p in chosen)
        flat = statistics.median(abs(math.log(p.no_growth.value / p.truth.value)) for p in chosen)
        covered = sum(p.covered for p in chosen)
        width = statistics.median(
            p.predicted.high / p.predicted.low if p.predicted.low > 0 else math.inf for p in chosen
        )
        informative = [p for p in chosen if abs(p.slope.value) > INFORMATIVE_SLOPE]
        control = (
            f"the control is within 2x at {sum(p.control_within for p in informative)} of the "
            f"{len(informative)} points where the pilot's |b| > {INFORMATIVE_SLOPE} (it must miss them: "
            f"{'it does' if not any(p.control_within for p in informative) else 'it does NOT'})"
            if informative
            else f"the control is not informative (every pilot |b| <= {INFORMATIVE_SLOPE})"
        )
        lines += [
            f"**{REGIME_LABELS[regime]}** ({len(chosen)} points): within 2x at {within}/{len(chosen)} "
            f"(target >= {TARGET_SHARE:.0%}: {'met' if within >= TARGET_SHARE * len(chosen) else 'FAILED'}); "
            f"median |log ratio| {median:.3f} against the no-growth answer's {flat:.3f} "
            f"({'met' if median < flat else 'FAILED'}); the truth inside the 95% interval at "
            f"{covered}/{len(chosen)}, median interval width (high/low) {width:.2g}; {control}.",
            "",
        ]
    return lines
