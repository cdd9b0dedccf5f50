"""Check 5 of docs/advisor_mstar.md: half the pilot's slope (v3), the geometric mean of check 2's line and the
no-growth answer, on check 4's pilots and truth.

    .venv/bin/python -m studies.advisor_check5                     # prints the tables
    .venv/bin/python -m studies.advisor_check5 --out-md results/advisor_mstar/fresh_check4/check5.md \
        --out-json results/advisor_mstar/fresh_check4/check5.json

v3 at x: log m_hat(x) = (1/2) log m_band(n_max) + (1/2) l(x), l the least-squares line of log m_band on log n over
the pilot n (``crl.advise.mstar.predict_mstar(..., reach=0.5)``), with its delete-one-seed jackknife interval;
its control pairs the pilot n in reverse order. Each folder's committed prediction is verified against its store
first (:func:`crl.advise.mstar_score.load_prediction`); v3 is derived from the same store and scale. Judged: the
Bible's, Fashion pixels' and Fashion CNN's points of check 4 (their truth unread when check 5 was registered);
WordNet's are reported apart (read before). Targets per scale over the judged points: (1) within 2x at >= 80%,
an open-ended or censored prediction a miss (:func:`studies.advisor_check4.hit`); (2) the median |log ratio|
below both the no-growth answer's and check 2's line's; (3) coverage judged only where its interval score beats
the no-growth answer's at the same width; the control reported. Computes no cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from crl.advise.mstar import SCALES, Scale, predict_mstar
from crl.advise.mstar_check import CheckPoint
from crl.advise.mstar_score import Prediction, ScoreReport, Truth, load_prediction, load_truth, score_regime
from crl.advise.mstar_session import seed_errors
from crl.advise.pilot import PILOT_CLAIM
from crl.sweep import SweepStore
from studies.advisor_check4 import NS, REGIME, Targets, check4_arguments, closed, hit, targets_of
from studies.arguments import write_outputs

JUDGED = ("bible", "fashion", "cnn")
SEEN = ("wordnet",)
REACH = 0.5
HEADER = (
    "# Check 5 of docs/advisor_mstar.md, scored",
    "",
    "Written by `python -m studies.advisor_check5 --out-md results/advisor_mstar/fresh_check4/check5.md --out-json "
    "results/advisor_mstar/fresh_check4/check5.json` from check 4's committed folders (read-only); the method is "
    "studies/advisor_check5.py.",
    "",
)


@dataclass(frozen=True)
class Pair:
    """One point read two ways: v3's prediction and check 2's line's, against the same truth."""

    half: CheckPoint
    line: CheckPoint


def _line_point(prediction: Prediction, truth: Truth, n: int, data: str) -> CheckPoint:
    return CheckPoint(
        data,
        prediction.regime,
        prediction.n_full,
        n,
        prediction.pilot_ns,
        prediction.slope,
        prediction.at[n],
        truth.band(n, prediction.scale),
        prediction.no_growth,
        prediction.control[n],
    )


def pairs_of(folder: Path, truth: Truth, data: str) -> list[Pair]:
    """v3 and the line at every truth n of one committed prediction folder."""
    prediction = load_prediction(folder)
    with SweepStore(folder / "advise.sqlite") as store:
        errors = seed_errors(store.records(PILOT_CLAIM))

    def half(reverse: bool) -> dict[int, Any]:
        return predict_mstar(
            errors,
            prediction.n_full,
            ns=prediction.pilot_ns,
            reverse_growth=reverse,
            scale=prediction.scale,
            reach=REACH,
        ).at

    forward, control = half(False), half(True)
    found = []
    for n in sorted(prediction.at):
        if n not in truth.ns:
            continue
        line = _line_point(prediction, truth, n, data)
        found.append(Pair(replace(line, predicted=forward[n], control=control[n]), line))
    return found


def set_pairs(folder: Path, data: str, scale: Scale) -> list[Pair] | None:
    """Both predictions of ``data`` on ``scale`` against its truth (None: no truth grid yet)."""
    truth_folder = folder / data / "truth_sscrl"
    if not (truth_folder / "truth.json").is_file():
        return None
    truth = load_truth(truth_folder)
    return [pair for n in NS for pair in pairs_of(folder / data / f"{scale}_{n}", truth, data)]


def _row(pair: Pair) -> str:
    half, line = pair.half, pair.line
    return (
        f"| {half.data} | {half.n_full:,} -> {half.n:,} | {half.predicted.text()} | {line.predicted.text()} | "
        f"{half.no_growth.text()} | {half.truth.text()} | {_ratio(half)} | {_ratio(line)} | "
        f"{'yes' if hit(half) else 'no'} | {'yes' if half.covered else 'no'} | "
        f"{half.control.text()} |"
    )


def _ratio(point: CheckPoint) -> str:
    finite = closed(point.predicted) or point.predicted.censoring == ""
    return f"{point.predicted.value / point.truth.value:.2f}" if finite and point.truth.value > 0 else "-"


def _verdicts(found: Targets, line: ScoreReport) -> dict[str, Any]:
    report = found.report
    best_other = min(report.median_no_growth, line.median_log_ratio)
    return {
        "points": report.points,
        "within": found.hits,
        "within_met": found.hits_met,
        "median_log_ratio": report.median_log_ratio,
        "median_no_growth": report.median_no_growth,
        "median_line": line.median_log_ratio,
        "ratio_met": report.median_log_ratio < best_other,
        "covered": report.covered,
        "coverage_judged": report.coverage_judged,
        "interval_score": report.interval_score,
        "no_growth_interval_score": report.no_growth_score,
        "control_informative": report.informative,
        "control_within": report.control_within,
    }


def _verdict_line(label: str, v: dict[str, Any]) -> str:
    return (
        f"| {label} | {v['points']} | {v['within']}/{v['points']} {'met' if v['within_met'] else 'FAILED'} | "
        f"{v['median_log_ratio']:.3f} vs no-growth {v['median_no_growth']:.3f}, line {v['median_line']:.3f} "
        f"{'met' if v['ratio_met'] else 'FAILED'} | {v['covered']}/{v['points']} "
        f"{'judged' if v['coverage_judged'] else 'not judged'} ({v['interval_score']:.2f} vs "
        f"{v['no_growth_interval_score']:.2f}) | {v['control_within']}/{v['control_informative']} |"
    )


def group_verdicts(pairs: Sequence[Pair]) -> dict[str, Any] | None:
    """Check 5's targets over ``pairs`` (None when empty)."""
    found = targets_of([p.half for p in pairs])
    line = score_regime([p.line for p in pairs], REGIME)
    return None if found is None or line is None else _verdicts(found, line)


def report(by_set: dict[tuple[str, Scale], list[Pair] | None]) -> tuple[list[str], dict[str, Any]]:
    """Markdown lines and a JSON document: per scale, every point, each set's targets, the judged sets pooled."""
    lines = [
        "v3 = exp((log m_band(n_max) + log line(x)) / 2) from check 4's pilots (seeds 200-203) against its truth "
        "(seeds 300-303), SSCRL; 'within 2x' counts an open-ended or censored prediction as a miss. Judged: "
        f"{', '.join(JUDGED)}; seen before check 5: {', '.join(SEEN)}.",
    ]
    document: dict[str, Any] = {}
    for scale in SCALES:
        lines += [
            "",
            f"### Scale: {scale}",
            "",
            "| set | N -> n | v3 | line (check 2) | no-growth | truth | v3 ratio | line ratio | v3 within 2x | "
            "v3 covered | v3 control |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        sets = [*JUDGED, *SEEN]
        lines += [_row(pair) for data in sets for pair in by_set.get((data, scale)) or ()]
        lines += [
            "",
            "| group | points | (1) within 2x | (2) median \\|log ratio\\| | (3) coverage (interval scores) | "
            "control within 2x / informative |",
            "|---|---:|---|---|---|---|",
        ]
        verdicts: dict[str, Any] = {}
        for data in sets:
            found = group_verdicts(by_set.get((data, scale)) or ())
            if found is not None:
                verdicts[data] = found
                lines.append(_verdict_line(data, found))
        judged = [pair for data in JUDGED for pair in by_set.get((data, scale)) or ()]
        pooled = group_verdicts(judged)
        if pooled is not None:
            verdicts["judged"] = pooled
            lines.append(_verdict_line("**judged sets**", pooled))
        missing = [data for data in sets if by_set.get((data, scale)) is None]
        if missing:
            lines += ["", f"Not measured (truth grid not finished): {', '.join(missing)}."]
        document[scale] = {"targets": verdicts, "not_measured": missing}
    return lines, document


def main(argv: Sequence[str] | None = None) -> None:
    parser, args = check4_arguments("python -m studies.advisor_check5", __doc__.splitlines()[0], argv)
    try:
        by_set = {
            (data, scale): set_pairs(args.folder, data, scale)
            for scale in SCALES
            for data in (*JUDGED, *SEEN)
        }
    except ValueError as error:
        parser.error(str(error))
    lines, document = report(by_set)
    print("\n".join(lines))
    write_outputs(args.out_md, args.out_json, HEADER, lines, document)


if __name__ == "__main__":
    main()
