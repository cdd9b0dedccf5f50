"""Check 4 of docs/advisor_mstar.md: the m* predictor at fresh seeds on the four sets seen before, scored per set and
over all of them, on both tolerance scales.

    .venv/bin/python -m studies.advisor_check4                     # prints the tables
    .venv/bin/python -m studies.advisor_check4 --out-md results/advisor_mstar/fresh_check4/check.md \
        --out-json results/advisor_mstar/fresh_check4/check.json

Each set's folder ``results/advisor_mstar/fresh_check4/<set>/`` holds the predictions of ``crl advise --mstar``
(``error_8000``, ``error_16000`` on the error's scale, ``score_8000``, ``score_16000`` on the score's, pilots at
seeds 200-203) and the truth grid of ``crl advise --mstar-truth 8000,16000`` (``truth_sscrl``, seeds 300-303).
Every prediction is derived again from its store and must equal its ``mstar.json``
(:func:`crl.advise.mstar_score.load_prediction`); the truth's m_band is read at each prediction's scale. The
targets are check 2's (:func:`crl.advise.mstar_score.score_regime`) with check 4's stricter target (1): within 2x
at >= 80% of points, where a prediction whose 95% interval has an open end counts as a miss as a censored one does
(:func:`hit`; check 2 counted such a prediction by its value), the median |log ratio| below the no-growth
answer's, coverage judged only where the interval score beats the no-growth answer's at the same width, the
growth-reversed control missing where the pilot's |b| > 0.25. A set whose truth grid has not finished is listed
as not measured; it is not replaced. Computes no cell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crl._vocab import Regime
from crl.advise.mstar import SCALES, Interval, Scale
from crl.advise.mstar_check import TARGET_SHARE, CheckPoint
from crl.advise.mstar_score import ScoreReport, load_prediction, load_truth, score_points, score_regime
from studies.arguments import OneLineParser, write_outputs

ROOT = Path(__file__).resolve().parents[1]
FOLDER = Path("results/advisor_mstar/fresh_check4")
SETS = ("wordnet", "bible", "fashion", "cnn")
NS = (8000, 16000)
REGIME: Regime = "shared"
HEADER = (
    "# Check 4 of docs/advisor_mstar.md, scored",
    "",
    "Written by `python -m studies.advisor_check4 --out-md results/advisor_mstar/fresh_check4/check.md --out-json "
    "results/advisor_mstar/fresh_check4/check.json` from the committed prediction and truth folders (read-only); "
    "the method is studies/advisor_check4.py. The surfaces were seen before: reported apart.",
    "",
)


@dataclass(frozen=True)
class SetScore:
    """One set's points on one scale (None: its truth grid is not there)."""

    data: str
    scale: Scale
    points: tuple[CheckPoint, ...] | None


def set_score(folder: Path, data: str, scale: Scale) -> SetScore:
    """The points of ``data``'s two predictions on ``scale`` against its truth grid."""
    truth_folder = folder / data / "truth_sscrl"
    if not (truth_folder / "truth.json").is_file():
        return SetScore(data, scale, None)
    predictions = [load_prediction(folder / data / f"{scale}_{n}") for n in NS]
    return SetScore(data, scale, tuple(score_points(predictions, [load_truth(truth_folder)], data)))


def closed(interval: Interval) -> bool:
    """Both ends of the 95% interval finite and the low end above 0 (the log scale closed on both sides)."""
    return interval.low > 0 and math.isfinite(interval.high)


def hit(point: CheckPoint) -> bool:
    """Check 4's target (1) at one point: within 2x, neither side censored, the prediction's interval closed."""
    return point.within and closed(point.predicted)


@dataclass(frozen=True)
class Targets:
    """Check 2's targets of a group of points (:class:`ScoreReport`) and check 4's target (1), :func:`hit`."""

    report: ScoreReport
    hits: int

    @property
    def hits_met(self) -> bool:
        return self.hits >= TARGET_SHARE * self.report.points


def targets_of(points: Sequence[CheckPoint]) -> Targets | None:
    """The targets of ``points`` (None when there are none)."""
    found = score_regime(points, REGIME)
    return None if found is None else Targets(found, sum(hit(p) for p in points))


def _ratio(point: CheckPoint) -> str:
    finite = point.predicted.value > 0 and math.isfinite(point.predicted.value) and point.truth.value > 0
    return f"{math.exp(point.log_ratio):.2f}" if finite else "-"


def _point_row(point: CheckPoint) -> str:
    return (
        f"| {point.data} | {point.n_full:,} -> {point.n:,} | {', '.join(f'{n:,}' for n in point.pilot_ns)} | "
        f"{point.slope.text()} | {point.predicted.text()} | {point.truth.text()} | {_ratio(point)} | "
        f"{'yes' if hit(point) else 'no'} | {'yes' if point.covered else 'no'} | {point.no_growth.text()} | "
        f"{point.control.text()} |"
    )


def _target_row(label: str, found: Targets) -> str:
    report = found.report
    within = "met" if found.hits_met else "FAILED"
    ratio = "met" if report.ratio_met else "FAILED"
    coverage = "judged" if report.coverage_judged else "not judged"
    misses = "misses" if report.control_within == 0 else "does NOT miss"
    control = (
        f"{report.control_within}/{report.informative} within 2x ({misses})"
        if report.informative
        else "not informative"
    )
    return (
        f"| {label} | {report.points} | {found.hits}/{report.points} {within} | {report.median_log_ratio:.3f} vs "
        f"{report.median_no_growth:.3f} {ratio} | {report.covered}/{report.points} {coverage} "
        f"({report.interval_score:.2f} vs {report.no_growth_score:.2f}) | {control} |"
    )


def report(scores: Sequence[SetScore]) -> tuple[list[str], dict[str, Any]]:
    """Markdown lines and a JSON document: per scale, every point, each set's targets and the pooled targets."""
    lines = [
        "Pilots at seeds 200-203, truth at 300-303, SSCRL (a fixed pool); 'within 2x' counts a prediction whose "
        "interval has an open end as a miss (check 4's registration); m_band: log m_q averaged over q in "
        "[2.5%, 10%] of the plateau on each prediction's scale; intervals: delete-one-seed jackknife Student-t 95%. "
        f"Targets per set and over all points: within 2x at >= {TARGET_SHARE:.0%}, median |log ratio| below the "
        "no-growth answer's, coverage judged only where its interval score beats the no-growth answer's at the same "
        "width, the growth-reversed control missing where |b| > 0.25.",
    ]
    document: dict[str, Any] = {}
    for scale in SCALES:
        chosen = [s for s in scores if s.scale == scale]
        measured = [s for s in chosen if s.points is not None]
        missing = [s.data for s in chosen if s.points is None]
        lines += [
            "",
            f"### Scale: {scale}",
            "",
            "| set | N -> n | pilot n | slope b | predicted | truth | ratio | within 2x | covered | no-growth | "
            "control (slope -b) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [_point_row(p) for s in measured for p in s.points or ()]
        lines += [
            "",
            "| set | points | (1) within 2x | (2) median \\|log ratio\\| vs no-growth | (3) coverage (interval "
            "scores) | control |",
            "|---|---:|---|---|---|---|",
        ]
        targets: dict[str, Any] = {}
        for s in measured:
            found = targets_of(s.points or ())
            if found is not None:
                lines.append(_target_row(s.data, found))
                targets[s.data] = _target_json(found)
        pooled = targets_of([p for s in measured for p in s.points or ()])
        if pooled is not None:
            lines.append(_target_row("**all sets**", pooled))
            targets["all"] = _target_json(pooled)
        if missing:
            lines += ["", f"Not measured (truth grid not finished): {', '.join(missing)}."]
        document[scale] = {"targets": targets, "not_measured": missing}
    return lines, document


def _target_json(targets: Targets) -> dict[str, Any]:
    found = targets.report
    return {
        "points": found.points,
        "within": targets.hits,
        "within_met": targets.hits_met,
        "within_by_value": found.within,
        "median_log_ratio": found.median_log_ratio,
        "median_no_growth": found.median_no_growth,
        "ratio_met": found.ratio_met,
        "covered": found.covered,
        "coverage_judged": found.coverage_judged,
        "control_informative": found.informative,
        "control_within": found.control_within,
    }


def check4_arguments(prog: str, description: str, argv: Sequence[str] | None) -> tuple[OneLineParser, Any]:
    """The parser and the arguments shared by the studies that read check 4's folder: ``--folder`` (checked to be
    a folder), ``--out-md`` and ``--out-json``."""
    parser = OneLineParser(prog=prog, description=description)
    parser.add_argument("--folder", type=Path, default=ROOT / FOLDER, help="check 4's results folder")
    parser.add_argument("--out-md", type=Path, help="write the tables here")
    parser.add_argument("--out-json", type=Path, help="write the targets here")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"--folder {args.folder} is not a folder; give check 4's results folder ({FOLDER})")
    return parser, args


def main(argv: Sequence[str] | None = None) -> None:
    parser, args = check4_arguments("python -m studies.advisor_check4", __doc__.splitlines()[0], argv)
    try:
        scores = [set_score(args.folder, data, scale) for scale in SCALES for data in SETS]
    except ValueError as error:
        parser.error(str(error))
    lines, document = report(scores)
    print("\n".join(lines))
    write_outputs(args.out_md, args.out_json, HEADER, lines, document)


if __name__ == "__main__":
    main()
