"""Check 6 of docs/advisor_direction_unseen.md: the frozen direction answer of ``crl advise`` on GCIDE and CJK.

    .venv/bin/python -m studies.advisor_direction_unseen                # prints the tables
    .venv/bin/python -m studies.advisor_direction_unseen --out-md results/advisor_direction/check.md \
        --out-json results/advisor_direction/check.json

Reads the truth folders of ``crl advise --mstar-truth`` (read-only, through
:func:`crl.advise.mstar_score.load_truth`; no cell trained): GCIDE's check-2 grids at n = 8,000-32,000 with the
n = 2,000 and 4,000 cells of ``results/advisor_direction/gcide_*_small``, and CJK's check-2 grids at n = 500-16,000,
all at seeds 100-103. At each point (N, M), M a power of two in [4, N/2], whose seven cells all hold the four runs:

- the answer, as ``crl advise --check`` gives it: D_hat and the interval D_hat +- q scale
  (:func:`crl.advise.local.local_estimate`, q = :data:`crl.advise.answer.Q`), the recommendation
  (:func:`crl.advise.answer.recommendation_of`), z = |D_hat| / scale and p_right = Phi(C z);
- the stated probability that m is better, p_m: p_right when the answer leans to m, 1 - p_right when it leans to n,
  1/2 where it says "neither";
- the measured D = mean err(2N, M) - mean err(N, 2M) and its Welch 95% interval
  (:func:`crl.advise.local.measured_difference`); decisive when it excludes 0.

Per data set and regime, on the decisive points: (1) the Brier score mean (p_m - 1[D > 0])^2 below both constant
answers' (always m, always n), judged from 10 decisive points; (2) the direction right at >= 80% of them (from 15)
and above the better constant; (3) coverage at >= 80% of all points; the flipped answer (1 - p_m) must fail (1),
else (1) is not informative there. Beside: the climatological and constant-p Brier scores, a paired bootstrap
interval of Brier(stated) - Brier(better constant), the reliability bins, and what happened after "neither".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crl._vocab import Regime
from crl.advise.answer import Q, recommendation_of
from crl.advise.local import local_estimate, measured_difference, pilot_points, truth_points
from crl.advise.mstar_score import load_truth
from crl.advise.reliability import p_right, strength
from studies.advisor_reliability import Point, bin_lines, brier, p_m, reliability
from studies.arguments import json_object, report_main

ROOT = Path(__file__).resolve().parents[1]
SEEDS = (100, 101, 102, 103)
SMALLEST_M = 4
MIN_BRIER_POINTS = 10
MIN_DIRECTION_POINTS = 15
TARGET = 0.8
BOOTSTRAP_DRAWS = 10_000
RELIABILITY = "docs/advisor_reliability.json"
HEADER = (
    "# Check 6 of docs/advisor_direction_unseen.md, scored",
    "",
    "Written by `python -m studies.advisor_direction_unseen --out-md results/advisor_direction/check.md --out-json "
    "results/advisor_direction/check.json` from the committed truth folders (read-only); the method is "
    "studies/advisor_direction_unseen.py. The predictor (q 6.81, C 6.08) was fixed before these data sets existed; "
    "the grids' curves in m had been read (docs/advisor_mstar.md), their D had not.",
    "",
)


@dataclass(frozen=True)
class Group:
    """One data set and regime: its truth folders (relative to the root) and the user's N of its points."""

    data: str
    regime: Regime
    folders: tuple[str, ...]
    ns: tuple[int, ...]

    @property
    def name(self) -> str:
        """``data regime`` in [A]'s words."""
        return f"{self.data} {'SSCRL' if self.regime == 'shared' else 'SCRL'}"


GROUPS = (
    Group(
        "gcide",
        "shared",
        ("results/advisor_mstar/gcide_check2/truth_sscrl", "results/advisor_direction/gcide_sscrl_small"),
        (8000, 16000),
    ),
    Group(
        "gcide",
        "independent",
        ("results/advisor_mstar/gcide_check2/truth_scrl", "results/advisor_direction/gcide_scrl_small"),
        (8000, 16000),
    ),
    Group("cjk", "shared", ("results/advisor_mstar/cjk_check2/truth_sscrl",), (2000, 4000, 8000)),
    Group("cjk", "independent", ("results/advisor_mstar/cjk_check2/truth_scrl",), (2000, 4000, 8000)),
)

Errors = dict[tuple[int, int], list[float]]


def merged_errors(folders: Sequence[Path], seeds: Sequence[int] = SEEDS) -> Errors:
    """(n, m) -> the error of each of ``seeds`` (in order), over the truth folders' stores; a cell lacking one of
    the seeds is left out.

    Raises:
        ValueError: naming the folders when their regimes differ or two of them hold one cell.
    """
    truths = [load_truth(folder) for folder in folders]
    if len({truth.regime for truth in truths}) > 1:
        raise ValueError(f"folders {[str(f) for f in folders]} hold more than one regime; give one regime's")
    errors: Errors = {}
    for truth in truths:
        for cell, by_seed in truth.errors.items():
            if cell in errors:
                raise ValueError(
                    f"{truth.folder}: the cell (n, m) = {cell} is in a second folder; keep it once"
                )
            if all(seed in by_seed for seed in seeds):
                errors[cell] = [by_seed[seed] for seed in seeds]
    return errors


def point_ms(n: int) -> tuple[int, ...]:
    """The points' M at the user's N: every power of two from 4 to N/2."""
    return tuple(2**k for k in range(2, int(math.log2(n // 2)) + 1) if 2**k <= n // 2)


@dataclass(frozen=True)
class Row:
    """One point: the answer, its stated p_m, the measured D, and after "neither" whether both doublings raised
    the error at (N, M)."""

    n: int
    m: int
    d_hat: float
    low: float
    high: float
    recommendation: str
    z: float
    p_right: float
    measured: float
    measured_low: float
    measured_high: float
    both_raised: bool

    @property
    def decisive(self) -> bool:
        """The measured D's Welch 95% interval excludes 0."""
        return self.measured_low > 0 or self.measured_high < 0

    @property
    def covered(self) -> bool:
        """The measured D lies in the answer's interval."""
        return self.low <= self.measured <= self.high

    @property
    def p_m(self) -> float:
        """The stated probability that m is better: 1/2 after "neither" (no direction stated), else the leaning's
        (:func:`studies.advisor_reliability.p_m`: p_right when D_hat > 0, else 1 - p_right)."""
        return 0.5 if self.recommendation == "neither" else p_m(self.as_point(""), self.p_right)

    def as_point(self, group: str) -> Point:
        """The row as :class:`studies.advisor_reliability.Point` (right: sign(D_hat) = sign(D))."""
        return Point(group, self.n, self.m, self.z, self.d_hat > 0, self.measured, self.decisive)


def row_at(errors: Errors, n: int, m: int) -> Row | None:
    """The point (N, M), or None when one of its seven cells or the cell (N, M) lacks runs."""
    needed = (*pilot_points(n, m), *truth_points(n, m), (n, m))
    if any(cell not in errors for cell in needed):
        return None
    estimate = local_estimate(errors, n, m)
    low, high = estimate.interval(Q)
    z = strength(estimate)
    truth = measured_difference(errors, n, m)
    base = float(np.mean(errors[(n, m)]))
    more_data, more_negatives = (float(np.mean(errors[cell])) for cell in truth_points(n, m))
    return Row(
        n,
        m,
        estimate.d_hat,
        low,
        high,
        recommendation_of(estimate),
        z,
        p_right(z),
        truth.value,
        truth.low,
        truth.high,
        more_data >= base and more_negatives >= base,
    )


def group_rows(group: Group, root: Path = ROOT) -> tuple[list[Row], list[tuple[int, int]]]:
    """The group's rows and the (N, M) not measured (a cell without its four runs)."""
    errors = merged_errors([root / folder for folder in group.folders])
    rows, missing = [], []
    for n in group.ns:
        for m in point_ms(n):
            row = row_at(errors, n, m)
            if row is None:
                missing.append((n, m))
            else:
                rows.append(row)
    return rows, missing


def bootstrap_interval(
    differences: Sequence[float], draws: int = BOOTSTRAP_DRAWS, seed: int = 0
) -> tuple[float, float]:
    """The percentile 95% interval of the mean of ``differences`` over ``draws`` resamples (numpy seed ``seed``)."""
    values = np.asarray(differences, dtype=float)
    picks = np.random.default_rng(seed).integers(0, values.size, size=(draws, values.size))
    means = values[picks].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


@dataclass(frozen=True)
class Score:
    """One group's targets on its decisive points (module docstring)."""

    points: int
    not_measured: int
    decisive: int
    right: int
    always_m_right: int
    covered: int
    neither: int
    neither_both_raised: int
    brier_stated: float
    brier_always_m: float
    brier_always_n: float
    brier_flipped: float
    brier_climatological: float
    brier_constant_p: float
    brier_leaning: float
    difference_interval: tuple[float, float]

    @property
    def brier_judged(self) -> bool:
        """Target 1 is judged from :data:`MIN_BRIER_POINTS` decisive points."""
        return self.decisive >= MIN_BRIER_POINTS

    @property
    def brier_met(self) -> bool:
        """Brier(stated) below both constants'."""
        return self.brier_stated < min(self.brier_always_m, self.brier_always_n)

    @property
    def control_fails(self) -> bool:
        """The flipped answer is not below both constants: the control fails target 1, as it must."""
        return not self.brier_flipped < min(self.brier_always_m, self.brier_always_n)

    @property
    def constant_perfect(self) -> bool:
        """One constant answer is right at every decisive point: its Brier score is 0, and nothing is below it."""
        return self.decisive > 0 and min(self.brier_always_m, self.brier_always_n) == 0.0

    @property
    def direction_judged(self) -> bool:
        """Target 2 is judged from :data:`MIN_DIRECTION_POINTS` decisive points."""
        return self.decisive >= MIN_DIRECTION_POINTS

    @property
    def better_constant(self) -> int:
        """The better constant's right count on the decisive points."""
        return max(self.always_m_right, self.decisive - self.always_m_right)

    @property
    def direction_met(self) -> bool:
        """Right at >= 80% of the decisive points and strictly above the better constant."""
        return self.right >= TARGET * self.decisive and self.right > self.better_constant

    @property
    def coverage_met(self) -> bool:
        """The measured D inside the interval at >= 80% of the points."""
        return self.covered >= TARGET * self.points


def _brier(points: Sequence[Point], p_of_m: Sequence[float]) -> float:
    """:func:`studies.advisor_reliability.brier`, NaN on no points."""
    return brier(points, p_of_m) if points else math.nan


def score_group(rows: Sequence[Row], not_measured: int, share_m: float, share_right: float) -> Score:
    """The group's :class:`Score`; ``share_m`` and ``share_right`` are the calibration's climatological share of m
    and its share right (the constant-p answer)."""
    decisive = [row for row in rows if row.decisive]
    points = [row.as_point("") for row in decisive]
    stated = [row.p_m for row in decisive]
    m_better = [float(point.m_better) for point in points]
    always_m = _brier(points, [1.0] * len(points))
    always_n = _brier(points, [0.0] * len(points))
    best = 1.0 if always_m <= always_n else 0.0
    neither = [row for row in rows if row.recommendation == "neither"]
    differences = [(p - y) ** 2 - (best - y) ** 2 for p, y in zip(stated, m_better, strict=True)]
    return Score(
        points=len(rows),
        not_measured=not_measured,
        decisive=len(decisive),
        right=sum(point.right for point in points),
        always_m_right=int(sum(m_better)),
        covered=sum(row.covered for row in rows),
        neither=len(neither),
        neither_both_raised=sum(row.both_raised for row in neither),
        brier_stated=_brier(points, stated),
        brier_always_m=always_m,
        brier_always_n=always_n,
        brier_flipped=_brier(points, [1.0 - p for p in stated]),
        brier_climatological=_brier(points, [share_m] * len(points)),
        brier_constant_p=_brier(points, [p_m(point, share_right) for point in points]),
        brier_leaning=_brier(
            points, [p_m(point, row.p_right) for point, row in zip(points, decisive, strict=True)]
        ),
        difference_interval=bootstrap_interval(differences) if differences else (math.nan, math.nan),
    )


def calibration_shares(root: Path = ROOT) -> tuple[float, float]:
    """(share of m, share right) among the calibration's decisive points, from docs/advisor_reliability.json."""
    document = json_object(
        root / RELIABILITY, "python -m studies.advisor_reliability --out-json " + RELIABILITY
    )
    fitted = document["fitted_on"]
    return float(fitted["share_m"]), float(fitted["right"]) / float(fitted["points"])


def _verdict(judged: bool, met: bool) -> str:
    if not judged:
        return "inconclusive"
    return "met" if met else "**FAILED**"


def _brier_verdict(score: Score) -> str:
    if not score.brier_judged:
        return "inconclusive"
    if not score.control_fails:
        return "not informative (the flipped answer passes too)"
    verdict = _verdict(True, score.brier_met)
    if not score.brier_met and score.constant_perfect:
        return f"{verdict} (a constant is right at every decisive point: its Brier is 0)"
    return verdict


def group_lines(group: Group, rows: Sequence[Row], score: Score) -> list[str]:
    """A group's summary line is in :func:`report`; here its per-point table."""
    lines = [
        f"### {group.name}: {score.points} points ({score.not_measured} not measured)",
        "",
        "| N | M | D_hat | interval | answer | p_right | p_m | measured D [Welch 95%] | decisive | right | covered |",
        "|---:|---:|---:|---|---|---:|---:|---|---|---|---|",
    ]
    for row in rows:
        right = "yes" if (row.d_hat > 0) == (row.measured > 0) else "no"
        lines.append(
            f"| {row.n:,} | {row.m:,} | {row.d_hat:+.4f} | [{row.low:+.4f}, {row.high:+.4f}] | {row.recommendation} "
            f"| {row.p_right:.3f} | {row.p_m:.3f} | {row.measured:+.4f} [{row.measured_low:+.4f}, "
            f"{row.measured_high:+.4f}] | {'yes' if row.decisive else 'no'} | {right if row.decisive else '-'} | "
            f"{'yes' if row.covered else 'no'} |"
        )
    return [*lines, ""]


def report(root: Path = ROOT) -> tuple[list[str], dict[str, Any]]:
    """The Markdown lines and the JSON document of the four groups."""
    share_m, share_right = calibration_shares(root)
    summary = [
        "## Targets per data set and regime (decisive points)",
        "",
        "| group | points | decisive | (1) Brier: stated vs always m, always n | flipped (control) | (1) verdict | "
        "stated - better constant [bootstrap 95%] | (2) right vs better constant | (2) verdict | (3) covered | "
        "(3) verdict |",
        "|---|---:|---:|---|---:|---|---|---|---|---|---|",
    ]
    beside = [
        "## Beside (descriptive)",
        "",
        "| group | climatological (share of m 0.216) | direction at constant p 0.973 | leaning's p at 'neither' | "
        "'neither' answers | both doublings raised the error at (N, M) after 'neither' |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    details: list[str] = []
    all_points: list[Point] = []
    all_stated: list[float] = []
    document: dict[str, Any] = {"q": Q, "seeds": list(SEEDS), "groups": {}}
    for group in GROUPS:
        rows, missing = group_rows(group, root)
        score = score_group(rows, len(missing), share_m, share_right)
        low, high = score.difference_interval
        summary.append(
            f"| {group.name} | {score.points} | {score.decisive} | {score.brier_stated:.4g} vs "
            f"{score.brier_always_m:.4g}, {score.brier_always_n:.4g} | {score.brier_flipped:.4g} | "
            f"{_brier_verdict(score)} | {score.brier_stated - min(score.brier_always_m, score.brier_always_n):+.4g} "
            f"[{low:+.4g}, {high:+.4g}] | {score.right}/{score.decisive} vs {score.better_constant} | "
            f"{_verdict(score.direction_judged, score.direction_met)} | {score.covered}/{score.points} | "
            f"{_verdict(score.points > 0, score.coverage_met)} |"
        )
        beside.append(
            f"| {group.name} | {score.brier_climatological:.4f} | {score.brier_constant_p:.4f} | "
            f"{score.brier_leaning:.4f} | {score.neither} | {score.neither_both_raised}/{score.neither} |"
        )
        details += group_lines(group, rows, score)
        decisive_rows = [row for row in rows if row.decisive]
        all_points += [row.as_point(group.name) for row in decisive_rows]
        all_stated += [max(row.p_m, 1 - row.p_m) for row in decisive_rows]
        document["groups"][group.name] = {
            "folders": list(group.folders),
            "not_measured": [list(point) for point in missing],
            "score": {
                **asdict(score),
                "brier_met": score.brier_met,
                "control_fails": score.control_fails,
                "direction_met": score.direction_met,
                "coverage_met": score.coverage_met,
            },
            "rows": [
                {**asdict(row), "p_m": row.p_m, "decisive": row.decisive, "covered": row.covered}
                for row in rows
            ],
        }
    reliability_lines = [
        "## Reliability, the four groups' decisive points pooled (stated chance of the answer's direction; 1/2 after "
        "'neither')",
        "",
        *bin_lines(reliability(all_points, all_stated)),
        "",
    ]
    return [*summary, "", *beside, "", *reliability_lines, *details], document


def main(argv: Sequence[str] | None = None) -> None:
    """Print the tables; write them where asked."""
    report_main("python -m studies.advisor_direction_unseen", __doc__.split("\n")[0], HEADER, report, argv)


if __name__ == "__main__":
    main()
