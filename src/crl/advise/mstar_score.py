"""Check 2 of docs/advisor_mstar.md: committed ``crl advise --mstar`` predictions scored against a truth grid
(``crl advise --mstar-truth``) on data the predictor never saw (``crl advise-check``).

Each prediction folder holds the pilot's sweep store and its ``mstar.json``; the prediction is derived again from the
store (:func:`crl.advise.mstar.predict_mstar` at the pilot n the file names) and must equal the file, so the score
reads the committed prediction and not a later one. Per regime, at every truth n the prediction covers:

1. within a factor 2 at >= 80% of points, a censored prediction or truth a miss;
2. median |log(predicted / truth)| below that of the no-growth answer (m_band at the largest pilot n);
3. coverage of the 95% interval, judged only where its mean interval score on the log scale,
   IS = (u - l) + (2 / alpha) (l - x)+ + (2 / alpha) (x - u)+ (x = log truth, [l, u] the log interval, alpha 0.05),
   is below that of the no-growth answer given the same interval about its own value;

and the control: the growth-reversed prediction (:func:`predict_mstar` with ``reverse_growth``) must miss (1) at
every point whose pilot |b| > 0.25.

m_band is read on the scale each prediction records (``mstar.json``'s ``scale``: the error's plateau, check 2, or the
score's, check 3; a file without it is check 2's), the truth's on the same scale from the truth store; the truth
store must give its own ``truth.json`` back at the scale that file records.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

from crl._vocab import REGIME_LABELS, Regime
from crl.advise.mstar import LEVEL, Interval, Scale, SeedErrors, band_at, check_scale, predict_mstar
from crl.advise.mstar_check import INFORMATIVE_SLOPE, TARGET_SHARE, CheckPoint
from crl.advise.mstar_session import seed_errors
from crl.advise.pilot import PILOT_CLAIM
from crl.experiments.mstar.passage import table_sections
from crl.experiments.mstar.summary import Table
from crl.sweep import SweepStore

__all__ = [
    "ALPHA",
    "Prediction",
    "ScoreReport",
    "Truth",
    "interval_score",
    "load_prediction",
    "load_truth",
    "score_markdown",
    "score_points",
    "truth_markdown",
    "truth_table",
]

ALPHA = 1.0 - LEVEL
SCORES = {"ndcg_error": "ndcg@10", "recall_error": "recall@1", "knn_error": "knn_accuracy"}
"""The score whose complement each rate metric is: the m*(n) tables read the score, as the experiment's do."""
ARM = "in_sample"
T = TypeVar("T")
TOLERANCE = 1e-9
"""Relative agreement required between a stored prediction and the one derived again from its store."""


@dataclass(frozen=True)
class Prediction:
    """One committed prediction: its folder, regime, N, pilot n, slope, predictions and control, no-growth answer."""

    folder: Path
    regime: Regime
    n_full: int
    pilot_ns: tuple[int, ...]
    slope: Interval
    at: dict[int, Interval]
    control: dict[int, Interval]
    no_growth: Interval
    metric: str
    scale: Scale = "error"


def _interval(document: dict[str, Any]) -> Interval:
    """An :class:`Interval` from ``mstar.json`` (None: an end censoring leaves open)."""

    def number(value: float | None, default: float) -> float:
        return default if value is None else float(value)

    return Interval(
        number(document["value"], math.inf),
        number(document["low"], 0.0),
        number(document["high"], math.inf),
        document["censoring"],
    )


def _same(stored: Interval, derived: Interval) -> bool:
    """Equal censoring, and equal value and ends to :data:`TOLERANCE` (infinite ends equal)."""
    pairs = ((stored.value, derived.value), (stored.low, derived.low), (stored.high, derived.high))
    return stored.censoring == derived.censoring and all(
        a == b or math.isclose(a, b, rel_tol=TOLERANCE) for a, b in pairs
    )


def _regime(value: str, path: Path) -> Regime:
    if value not in REGIME_LABELS:
        raise ValueError(f"{path}: regime {value!r} is not one of {', '.join(REGIME_LABELS)}")
    return cast(Regime, value)


def load_prediction(folder: str | Path) -> Prediction:
    """The prediction of ``folder``'s ``mstar.json``, checked against the one derived again from its store.

    Raises:
        ValueError: naming the folder when a file is missing or the stored prediction differs from the store's.
    """
    path = Path(folder)
    document_path, store_path = path / "mstar.json", path / "advise.sqlite"
    if not document_path.is_file() or not store_path.is_file():
        raise ValueError(
            f"{path}: a prediction folder holds mstar.json and advise.sqlite (crl advise --mstar --out)"
        )
    document = json.loads(document_path.read_text(encoding="utf-8"))
    stored = document["prediction"]
    pilot_ns = tuple(int(p["n"]) for p in stored["pilots"])
    scale = _scale(document, document_path)
    with SweepStore(store_path) as store:
        errors = seed_errors(store.records(PILOT_CLAIM))
    n_full = int(document["n"])
    derived = _from_store(path, lambda: predict_mstar(errors, n_full, ns=pilot_ns, scale=scale))
    at = {int(n): _interval(value) for n, value in stored["at"].items()}
    for n, interval in at.items():
        if not _same(interval, derived.at[n]):
            raise ValueError(
                f"{document_path}: the stored prediction at n = {n} ({interval.text()}) differs from the one its "
                f"store gives ({derived.at[n].text()}); score the committed folder as it is"
            )
    control = _from_store(
        path, lambda: predict_mstar(errors, n_full, ns=pilot_ns, reverse_growth=True, scale=scale)
    ).at
    return Prediction(
        path,
        _regime(document["regime"], document_path),
        n_full,
        pilot_ns,
        derived.slope,
        at,
        control,
        derived.pilots[-1].m_band,
        str(document["metric"]),
        scale,
    )


def _scale(document: dict[str, Any], path: Path) -> Scale:
    """The tolerance's scale a file records (check 2's files record none: the error's).

    Raises:
        ValueError: naming the file's field when it is not a scale, or the score's with a metric that has none.
    """
    value, metric = str(document.get("scale", "error")), str(document["metric"])
    try:
        return check_scale(value, metric)
    except ValueError:
        raise ValueError(
            f"{path}: field 'scale' is {value!r} with metric {metric!r}; a file of crl advise records 'error', or "
            "'score' for a rate metric: score the folder its command wrote"
        ) from None


def _from_store(path: Path, derive: Callable[[], T]) -> T:
    """``derive()``, its error prefixed with the folder whose store it reads."""
    try:
        return derive()
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


def truth_table(truths: Sequence[Truth]) -> tuple[Table, str | None]:
    """The truth grids' cells at the n their ``truth.json`` lists (a store may hold part of a larger n still
    running) as the m*(n) experiment's table, (``in_sample``, regime, n) -> m -> seed -> score
    (1 - the held-out error), and the score's name (None for ``excess_risk``, which is no rate: no table).

    Raises:
        ValueError: naming the folders when their metrics differ, or two folders hold one regime.
    """
    table: Table = {}
    for truth in truths:
        if any(key[1] == truth.regime for key in table):
            raise ValueError(
                f"--truth {truth.folder}: a second truth folder of regime {truth.regime!r}; give one per regime"
            )
        for (n, m), seeds in truth.errors.items():
            if n not in truth.ns:
                continue
            by_m = table.setdefault((ARM, truth.regime, n), {})
            by_m[m] = {seed: 1.0 - error for seed, error in seeds.items()}
    metrics = sorted({truth.metric for truth in truths})
    if len(metrics) != 1:
        raise ValueError(f"--truth folders of metrics {metrics}: give folders of one metric")
    return table, SCORES.get(metrics[0])


def truth_markdown(truths: Sequence[Truth], data: str) -> str:
    """m_q at q = 1%, 2%, 5% per truth n and regime, the slopes of log m_q on log n (SSCRL - SCRL beside), and
    [A]'s shape, from the truth grids (the m*(n) experiment on ``data``; crl.experiments.mstar.passage)."""
    table, score = truth_table(truths)
    lines = [f"## m*(n) on {data}: m_q at fixed tolerances and [A]'s shape, from the truth grids", ""]
    if score is None:
        return "\n".join([*lines, "The metric is excess_risk, no rate of a score: no m_q table."]) + "\n"
    folders = ", ".join(str(truth.folder) for truth in truths)
    lines += [
        f"From {folders}: the score is 1 - the held-out error ({score}); intervals: "
        "delete-one-seed jackknife Student-t 95%; an end printed inf or -inf is one that censoring leaves open.",
    ]
    return "\n".join(lines + table_sections(table, score)) + "\n"


@dataclass(frozen=True)
class Truth:
    """One truth folder: its regime, metric, truth n and the seed errors of its store."""

    folder: Path
    regime: Regime
    metric: str
    ns: tuple[int, ...]
    errors: SeedErrors

    def band(self, n: int, scale: Scale) -> Interval:
        """m_band measured at truth n on ``scale``."""
        return band_at(self.errors, n, scale)


def load_truth(folder: str | Path) -> Truth:
    """A truth folder's ``truth.json`` (``crl advise --mstar-truth``) and store, checked against each other.

    Raises:
        ValueError: naming the folder when ``truth.json`` or the store is missing, or the store does not give the
            file's m_band back at the scale it records.
    """
    path = Path(folder) / "truth.json"
    store_path = Path(folder) / "advise.sqlite"
    if not path.is_file() or not store_path.is_file():
        raise ValueError(
            f"{folder}: a truth folder holds truth.json and advise.sqlite; run crl advise CONFIG --mstar-truth "
            f"N1,N2,... --out {folder}"
        )
    document = json.loads(path.read_text(encoding="utf-8"))
    with SweepStore(store_path) as store:
        errors = seed_errors(store.records(PILOT_CLAIM))
    truth = Truth(
        Path(folder),
        _regime(document["regime"], path),
        str(document["metric"]),
        tuple(map(int, document["truth"])),
        errors,
    )
    scale = _scale(document, path)
    for n, value in document["truth"].items():
        stored = _interval(value["m_band"])
        derived = _from_store(Path(folder), partial(truth.band, int(n), scale))
        if not _same(stored, derived):
            raise ValueError(
                f"{path}: m_band at n = {n} ({stored.text()}) differs from the one its store gives "
                f"({derived.text()}); score the truth folder as its command left it"
            )
    return truth


def score_points(predictions: Sequence[Prediction], truths: Sequence[Truth], data: str) -> list[CheckPoint]:
    """Every (prediction, truth n) pair of one regime's truth that the prediction covers, the truth's m_band on the
    prediction's scale.

    Raises:
        ValueError: naming the folders when the predictions' scales differ (one report reads one scale), or a
            prediction's metric is not a truth's.
    """
    scales = {prediction.scale for prediction in predictions}
    if len(scales) > 1:
        raise ValueError(
            "predictions of scales "
            + ", ".join(f"{p.folder} ({p.scale})" for p in predictions)
            + ": score each scale in its own crl advise-check"
        )
    for prediction, other in ((p, t) for p in predictions for t in truths):
        if other.metric != prediction.metric:
            raise ValueError(
                f"{prediction.folder} predicts m* of {prediction.metric}, but --truth {other.folder} measured "
                f"{other.metric}: give a truth grid of the same metric (crl advise --metric)"
            )
    by_regime = {truth.regime: truth for truth in truths}
    points = []
    for prediction in predictions:
        truth = by_regime.get(prediction.regime)
        if truth is None:
            continue
        for n, predicted in sorted(prediction.at.items()):
            if n not in truth.ns:
                continue
            points.append(
                CheckPoint(
                    data,
                    prediction.regime,
                    prediction.n_full,
                    n,
                    prediction.pilot_ns,
                    prediction.slope,
                    predicted,
                    truth.band(n, prediction.scale),
                    prediction.no_growth,
                    prediction.control[n],
                )
            )
    return points


def interval_score(low: float, high: float, truth: float, alpha: float = ALPHA) -> float:
    """The interval score of [low, high] for the value ``truth`` (all on the log scale):
    (high - low) + (2 / alpha) (low - truth)+ + (2 / alpha) (truth - high)+; infinite for an open interval."""
    if math.isinf(low) or math.isinf(high):
        return math.inf
    return (high - low) + (2.0 / alpha) * max(0.0, low - truth) + (2.0 / alpha) * max(0.0, truth - high)


def _log(value: float) -> float:
    return math.log(value) if value > 0 else -math.inf


def _scores(point: CheckPoint) -> tuple[float, float]:
    """(the prediction's interval score, the no-growth answer's with the same log interval about its own value)."""
    truth = _log(point.truth.value)
    centre, low, high = _log(point.predicted.value), _log(point.predicted.low), _log(point.predicted.high)
    flat = _log(point.no_growth.value)
    own = interval_score(low, high, truth)
    same_width = interval_score(flat - (centre - low), flat + (high - centre), truth)
    return own, same_width


@dataclass(frozen=True)
class ScoreReport:
    """The registered targets of one regime."""

    regime: Regime
    points: int
    within: int
    median_log_ratio: float
    median_no_growth: float
    covered: int
    interval_score: float
    no_growth_score: float
    informative: int
    control_within: int

    @property
    def within_met(self) -> bool:
        return self.within >= TARGET_SHARE * self.points

    @property
    def ratio_met(self) -> bool:
        return self.median_log_ratio < self.median_no_growth

    @property
    def coverage_judged(self) -> bool:
        return self.interval_score < self.no_growth_score


def score_regime(points: Sequence[CheckPoint], regime: Regime) -> ScoreReport | None:
    """The targets of ``regime``'s points (None when it has none)."""
    chosen = [p for p in points if p.regime == regime]
    if not chosen:
        return None
    scores = [_scores(p) for p in chosen]
    informative = [p for p in chosen if abs(p.slope.value) > INFORMATIVE_SLOPE]

    def mean(values: list[float]) -> float:
        return math.inf if any(math.isinf(v) for v in values) else statistics.fmean(values)

    return ScoreReport(
        regime,
        len(chosen),
        sum(p.within for p in chosen),
        statistics.median(abs(p.log_ratio) if _finite(p) else math.inf for p in chosen),
        statistics.median(abs(math.log(p.no_growth.value / p.truth.value)) for p in chosen),
        sum(p.covered for p in chosen),
        mean([own for own, _ in scores]),
        mean([flat for _, flat in scores]),
        len(informative),
        sum(p.control_within for p in informative),
    )


def _finite(point: CheckPoint) -> bool:
    return point.predicted.value > 0 and point.truth.value > 0 and math.isfinite(point.predicted.value)


def score_markdown(points: Sequence[CheckPoint], *, sources: str, scale: Scale = "error") -> str:
    """The points and the registered targets per regime as Markdown, m_band read on ``scale``."""
    plateau = "the held-out error" if scale == "error" else "the score (1 - the held-out error)"
    lines = [
        "## crl advise --mstar scored on unseen data",
        "",
        f"{sources}. m_band: log m_q averaged over q in [2.5%, 10%] of the plateau of {plateau}; "
        "intervals: delete-one-seed jackknife Student-t 95%; interval scores on the log scale (alpha 0.05).",
        "",
        "| regime | N -> n | pilot n | slope b | predicted | truth | ratio | within 2x | covered | IS | "
        "no-growth | its IS (same width) | control (slope -b) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        own, flat = _scores(p)
        ratio = f"{math.exp(p.log_ratio):.2f}" if _finite(p) else "-"
        lines.append(
            f"| {REGIME_LABELS[p.regime]} | {p.n_full:,} -> {p.n:,} | {', '.join(f'{n:,}' for n in p.pilot_ns)} | "
            f"{p.slope.text()} | {p.predicted.text()} | {p.truth.text()} | {ratio} | "
            f"{'yes' if p.within else 'no'} | {'yes' if p.covered else 'no'} | {own:.2f} | {p.no_growth.text()} | "
            f"{flat:.2f} | {p.control.text()} |"
        )
    lines.append("")
    for regime in ("shared", "independent"):
        report = score_regime(points, regime)
        if report is not None:
            lines += [_report_line(report), ""]
    return "\n".join(lines) + "\n"


def _report_line(r: ScoreReport) -> str:
    control = (
        f"the control is within 2x at {r.control_within} of the {r.informative} points where the pilot's |b| > "
        f"{INFORMATIVE_SLOPE} (it must miss them: {'it does' if r.control_within == 0 else 'it does NOT'})"
        if r.informative
        else f"the control is not informative (every pilot |b| <= {INFORMATIVE_SLOPE})"
    )
    coverage = (
        f"coverage {r.covered}/{r.points}, judged (mean interval score {r.interval_score:.2f} below the no-growth "
        f"answer's {r.no_growth_score:.2f} at the same width)"
        if r.coverage_judged
        else f"coverage {r.covered}/{r.points} NOT judged (mean interval score {r.interval_score:.2f} does not beat "
        f"the no-growth answer's {r.no_growth_score:.2f} at the same width)"
    )
    return (
        f"**{REGIME_LABELS[r.regime]}** ({r.points} points): (1) within 2x at {r.within}/{r.points} (target >= "
        f"{TARGET_SHARE:.0%}: {'met' if r.within_met else 'FAILED'}); (2) median |log ratio| "
        f"{r.median_log_ratio:.3f} against the no-growth answer's {r.median_no_growth:.3f} "
        f"({'met' if r.ratio_met else 'FAILED'}); (3) {coverage}; {control}."
    )
