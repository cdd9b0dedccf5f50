"""How often the advisor's direction is right, as a probability of its strength z, with a reliability table
(docs/advisor_reliability.md).

    .venv/bin/python -m studies.advisor_reliability                 # prints the tables, writes the two files below
    .venv/bin/python -m studies.advisor_reliability --out-md docs/advisor_reliability.md \
        --out-json docs/advisor_reliability.json

Reads only committed JSON (read-only), computes no cell: the 48 calibration points of
docs/advisor_calibration.json (D_hat, its scale, the measured D with its Welch 95% interval) and the 117 validation
points of ``results/advisor_validation/{fashion,wordnet,cnn,bible}/score.json`` (the same per point, scale =
sqrt(se_a^2 + se_b^2 + drift^2)). A point is decisive when the measured D's interval excludes 0; only there is the
direction right or wrong (right: sign(D_hat) = sign(D)).

The fit: c of p_right(z) = Phi(c z), z = |D_hat| / scale (:mod:`crl.advise.reliability`), by Firth-penalised
maximum likelihood on the calibration's decisive points (:func:`fit_c`); the module's :data:`C` is that fit
rounded. Leave one grid out: c fitted on two calibration grids, stated on the third. The validation is scored
as exploratory (its points were scored before, docs/advisor.md section 7): a reliability table (bins of stated p:
count, mean stated p, share right, Wilson 95% interval), and the Brier score of the stated probability that m is
better (p_right when D_hat > 0, 1 - p_right otherwise) against the constants: always m (1), always n (0), the
climatological share of m among the calibration's decisive points, and the direction at a constant p_right (the
calibration's share right), and the interval's own normal reading Phi(1.645 z / q) (q read as a 90% normal
interval).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from scipy import optimize, special

from crl.advise.answer import Q
from crl.advise.reliability import C, p_right
from crl.metrics.class_report import wilson_interval
from studies.arguments import write_outputs

ROOT = Path(__file__).resolve().parents[1]
CALIBRATION = "docs/advisor_calibration.json"
GRIDS = ("fashion pixels", "wordnet minilm", "fashion cnn")
VALIDATION = ("fashion", "wordnet", "cnn", "bible")
BINS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 1.0)
"""Edges of the bins of stated p: [0.5, 0.6), ..., [0.9, 0.99), [0.99, 1]."""
NORMAL_90 = 1.6448536269514722
"""The standard normal's 95% quantile: an interval D_hat +- q scale read as a 90% normal interval has sd q scale /
1.645."""
HEADER = (
    "# How often the advisor's direction is right: p_right(z) = Phi(c z), calibrated on the committed grids",
    "",
    "Written by `python -m studies.advisor_reliability --out-md docs/advisor_reliability.md --out-json "
    "docs/advisor_reliability.json` from docs/advisor_calibration.json and results/advisor_validation/{fashion,"
    "wordnet,cnn,bible}/score.json (read-only). z = \\|D_hat\\| / scale; a point is decisive when the measured "
    "D's Welch 95% interval excludes 0, and right when sign(D_hat) = sign(D). The method: "
    "studies/advisor_reliability.py and src/crl/advise/reliability.py. The validation's points were scored before "
    "(docs/advisor.md section 7): its tables are exploratory.",
    "",
)


@dataclass(frozen=True)
class Point:
    """One point: where it comes from, its strength z, whether D_hat > 0, and the measured D and its decision."""

    group: str
    n: int
    m: int
    z: float
    leans_m: bool
    measured: float
    decisive: bool

    @property
    def right(self) -> bool:
        """sign(D_hat) = sign(D)."""
        return self.leans_m == (self.measured > 0)

    @property
    def m_better(self) -> bool:
        """The measured D > 0: doubling m was better."""
        return self.measured > 0


def _point(group: str, row: dict[str, float], scale: float) -> Point:
    return Point(
        group,
        int(row["n"]),
        int(row["m"]),
        abs(row["d_hat"]) / scale,
        row["d_hat"] > 0,
        row["measured"],
        row["measured_low"] > 0 or row["measured_high"] < 0,
    )


def calibration_points(root: Path = ROOT) -> list[Point]:
    """The 48 calibration points, grouped by grid (docs/advisor_calibration.json's held-out rows)."""
    rows = json.loads((root / CALIBRATION).read_text(encoding="utf-8"))["rows"]
    return [_point(grid, cell, cell["scale"]) for grid in GRIDS for cell in rows[grid]["cells"]]


def validation_points(root: Path = ROOT) -> list[Point]:
    """The 117 validation points, grouped by data set, scale = sqrt(se_a^2 + se_b^2 + drift^2)."""
    found = []
    for data in VALIDATION:
        path = root / "results" / "advisor_validation" / data / "score.json"
        for row in json.loads(path.read_text(encoding="utf-8"))["rows"]:
            found.append(_point(data, row, math.hypot(row["se_a"], row["se_b"], row["drift"])))
    return found


LOG_C_BOUND = 6.0
"""c is searched over log c in [-6, 6]."""


def fit_c(z: Sequence[float], right: Sequence[bool], *, firth: bool = True) -> float:
    """c maximising log L(c) + log I(c) / 2 (Firth; ``firth=False``: log L(c) alone), L(c) = prod Phi(c z_i)^{r_i}
    (1 - Phi(c z_i))^{1 - r_i}, I(c) = sum z_i^2 phi(c z_i)^2 / (Phi(c z_i) (1 - Phi(c z_i))), searched over
    log c in [-:data:`LOG_C_BOUND`, :data:`LOG_C_BOUND`].

    Raises:
        ValueError: without points or with a z <= 0.
    """
    zs, ys = np.asarray(z, dtype=float), np.asarray(right, dtype=float)
    if zs.size == 0 or not np.all(zs > 0):
        raise ValueError(f"{zs.size} points with min z {zs.min(initial=0.0)}: need >= 1 point, every z > 0")

    def penalised(log_c: float) -> float:
        t = math.exp(log_c) * zs
        up, down = special.log_ndtr(t), special.log_ndtr(-t)
        log_info = special.logsumexp(2 * np.log(zs) - t**2 - math.log(2 * math.pi) - up - down)
        return -(float(np.sum(ys * up + (1 - ys) * down)) + (0.5 * float(log_info) if firth else 0.0))

    bounds = (-LOG_C_BOUND, LOG_C_BOUND)
    found = optimize.minimize_scalar(penalised, bounds=bounds, method="bounded", options={"xatol": 1e-9})
    return math.exp(float(found.x))


def held_out(points: Sequence[Point], *, firth: bool = True) -> list[tuple[Point, float, float]]:
    """Leave one grid out: each decisive point with the c fitted on the other grids' decisive points and its p_right
    at that c."""
    found = []
    for grid in GRIDS:
        train = [p for p in points if p.group != grid]
        c = fit_c([p.z for p in train], [p.right for p in train], firth=firth)
        found += [(p, c, p_right(p.z, c)) for p in points if p.group == grid]
    return found


def log_loss(points: Sequence[Point], stated: Sequence[float]) -> float:
    """mean -log(p_right if right else 1 - p_right), the probability floored at 1e-300."""
    return float(
        np.mean(
            [-math.log(max(p if pt.right else 1.0 - p, 1e-300)) for pt, p in zip(points, stated, strict=True)]
        )
    )


def decisive(points: Sequence[Point]) -> list[Point]:
    """The points whose measured D's interval excludes 0."""
    return [p for p in points if p.decisive]


def p_m(point: Point, p: float) -> float:
    """The stated probability that m is better: p when D_hat > 0, else 1 - p."""
    return p if point.leans_m else 1.0 - p


def brier(points: Sequence[Point], p_of_m: Sequence[float]) -> float:
    """mean (p_m - 1[D > 0])^2."""
    return float(np.mean([(p - float(pt.m_better)) ** 2 for pt, p in zip(points, p_of_m, strict=True)]))


@dataclass(frozen=True)
class Briers:
    """The Brier scores of the stated p and the constants on one set of decisive points."""

    points: int
    right: int
    mean_p: float
    stated: float
    always_m: float
    always_n: float
    climatological: float
    constant_p: float
    interval_normal: float


def briers(points: Sequence[Point], c: float, share_m: float, share_right: float) -> Briers:
    """:class:`Briers` at c, the climatological share of m ``share_m`` and the constant p_right ``share_right``."""
    stated = [p_right(p.z, c) for p in points]
    interval = [p_right(p.z, NORMAL_90 / Q) for p in points]
    return Briers(
        len(points),
        sum(p.right for p in points),
        float(np.mean(stated)),
        brier(points, [p_m(pt, s) for pt, s in zip(points, stated, strict=True)]),
        brier(points, [1.0] * len(points)),
        brier(points, [0.0] * len(points)),
        brier(points, [share_m] * len(points)),
        brier(points, [p_m(pt, share_right) for pt in points]),
        brier(points, [p_m(pt, s) for pt, s in zip(points, interval, strict=True)]),
    )


@dataclass(frozen=True)
class Bin:
    """One bin of stated p: its points, their mean stated p, the share right and its Wilson 95% interval."""

    low: float
    high: float
    count: int
    mean_p: float
    right: int
    wilson_low: float
    wilson_high: float


def reliability(points: Sequence[Point], stated: Sequence[float]) -> list[Bin]:
    """The points binned by stated p (:data:`BINS`, the last bin closed)."""
    bins = []
    for low, high in itertools.pairwise(BINS):
        last = high == BINS[-1]
        inside = [
            (pt, p) for pt, p in zip(points, stated, strict=True) if low <= p < high or (last and p == high)
        ]
        if not inside:
            bins.append(Bin(low, high, 0, math.nan, 0, math.nan, math.nan))
            continue
        right = torch.tensor([pt.right for pt, _ in inside])
        interval = wilson_interval(right)
        mean = float(np.mean([p for _, p in inside]))
        bins.append(Bin(low, high, len(inside), mean, int(right.sum()), interval.low, interval.high))
    return bins


def _share(count: int, total: int) -> str:
    return f"{count}/{total} = {100 * count / total:.0f}%" if total else "-"


def bin_lines(bins: Sequence[Bin]) -> list[str]:
    lines = [
        "| stated p | points | mean stated p | right | Wilson 95% |",
        "|---|---:|---:|---:|---:|",
    ]
    for b in bins:
        close = "]" if b.high == BINS[-1] else ")"
        if b.count == 0:
            lines.append(f"| [{b.low:.2f}, {b.high:.2f}{close} | 0 | - | - | - |")
            continue
        lines.append(
            f"| [{b.low:.2f}, {b.high:.2f}{close} | {b.count} | {b.mean_p:.4f} | {_share(b.right, b.count)} | "
            f"{b.wilson_low:.2f}-{b.wilson_high:.2f} |"
        )
    return lines


BRIER_COLUMNS = (
    "decisive | right | mean stated p | Brier: stated p | always m | always n | climatological | direction at "
    "constant p | Phi(1.645 z / q) |"
)
"""The Brier tables' columns after the first (the points' name)."""


def _brier_line(name: str, b: Briers) -> str:
    return (
        f"| {name} | {b.points} | {_share(b.right, b.points)} | {b.mean_p:.3f} | {b.stated:.4f} | "
        f"{b.always_m:.4f} | {b.always_n:.4f} | {b.climatological:.4f} | {b.constant_p:.4f} | "
        f"{b.interval_normal:.4f} |"
    )


def report(calibration: Sequence[Point], validation: Sequence[Point]) -> tuple[list[str], dict[str, object]]:
    """The Markdown lines and the JSON document: the fit, leave one grid out, the validation (exploratory)."""
    fitted = decisive(calibration)
    c = fit_c([p.z for p in fitted], [p.right for p in fitted])
    share_m = sum(p.m_better for p in fitted) / len(fitted)
    share_right = sum(p.right for p in fitted) / len(fitted)
    document: dict[str, object] = {
        "c_fit": c,
        "c": C,
        "fitted_on": {"points": len(fitted), "right": sum(p.right for p in fitted), "share_m": share_m},
    }
    lines = [
        "## The fit (calibration grids, decisive points)",
        "",
        f"c = {c:.4f} (stored as C = {C}) on {len(fitted)} decisive points of {len(calibration)}, "
        f"{_share(sum(p.right for p in fitted), len(fitted))} right; share of m among them "
        f"{share_m:.3f} (the climatological constant); the direction at a constant p is p = {share_right:.3f}.",
        "",
        "| z | " + " | ".join(f"{z:g}" for z in (0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, Q)) + " |",
        "|---|" + "---:|" * 8,
        "| p_right = Phi(C z) | "
        + " | ".join(f"{p_right(z):.3f}" for z in (0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, Q))
        + " |",
        "| Phi(1.645 z / q) | "
        + " | ".join(f"{p_right(z, NORMAL_90 / Q):.3f}" for z in (0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, Q))
        + " |",
        "",
        "In sample (the fitted points at C):",
        "",
        *bin_lines(reliability(fitted, [p_right(p.z) for p in fitted])),
        "",
        "## Leave one calibration grid out",
        "",
        "c fitted on the other two grids' decisive points; the constants (climatological share of m, constant p) "
        "from the same two grids.",
        "",
        f"| held-out grid | c from the other grids | {BRIER_COLUMNS}",
        "|---|" + "---:|" * 10,
    ]
    held_rows: dict[str, object] = {}
    pooled: list[tuple[Point, float]] = []
    for grid in GRIDS:
        train = [p for p in fitted if p.group != grid]
        test = [p for p in fitted if p.group == grid]
        c_grid = fit_c([p.z for p in train], [p.right for p in train])
        scores = briers(
            test,
            c_grid,
            sum(p.m_better for p in train) / len(train),
            sum(p.right for p in train) / len(train),
        )
        lines.append(_brier_line(f"{grid} | {c_grid:.2f}", scores))
        held_rows[grid] = {"c": c_grid, **vars(scores)}
        pooled += [(p, p_right(p.z, c_grid)) for p in test]
    pooled_bins = reliability([p for p, _ in pooled], [s for _, s in pooled])
    lines += ["", "The three held-out grids pooled, each at its own c:", "", *bin_lines(pooled_bins), ""]
    penalty = _penalty_lines(fitted)
    lines += penalty[0]
    document["leave_one_grid_out"] = {
        "rows": held_rows,
        "bins": [vars(b) for b in pooled_bins],
        "fits": penalty[1],
    }

    tested = decisive(validation)
    stated = [p_right(p.z) for p in tested]
    bins = reliability(tested, stated)
    lines += [
        "## Validation (117 points, exploratory), at C",
        "",
        *bin_lines(bins),
        "",
        "Brier score of the stated probability that m is better; constants from the calibration's decisive points.",
        "",
        f"| data set (points) | {BRIER_COLUMNS}",
        "|---|" + "---:|" * 9,
    ]
    valid_rows: dict[str, object] = {}
    for data in (*VALIDATION, "all"):
        group, size = (
            (tested, len(validation))
            if data == "all"
            else ([p for p in tested if p.group == data], sum(p.group == data for p in validation))
        )
        lines.append(_brier_line(f"{data} ({size})", briers(group, C, share_m, share_right)))
        valid_rows[data] = vars(briers(group, C, share_m, share_right))
    wrong = sorted((p for p in tested if not p.right), key=lambda p: (p.group, p.m))
    lines += [
        "",
        "The wrong directions: "
        + "; ".join(f"{p.group} M = {p.m:,} (z {p.z:.2f}, p {p_right(p.z):.4f})" for p in wrong)
        + ".",
        "",
    ]
    document["validation"] = {
        "bins": [vars(b) for b in bins],
        "rows": valid_rows,
        "points": [{**vars(p), "decisive": p.decisive, "p_right": p_right(p.z)} for p in validation],
    }
    return lines, document


def _penalty_lines(fitted: Sequence[Point]) -> tuple[list[str], dict[str, object]]:
    """Leave one grid out, pooled over the three held-out grids: the plain fit, the Firth fit and a constant p (the
    other grids' share right), each by its Brier score and log loss of p_right."""
    lines = [
        "Why the penalty: leave one grid out, pooled over the 37 held-out decisive points (c of each held-out grid "
        "in grid order). Without the CNN grid every fitted point is right: the plain likelihood then rises without "
        "end and its search stops where it is flat, and the constant p is 1, whose log loss at the CNN grid's wrong "
        "point is floored at -log 1e-300.",
        "",
        "| fit | c per held-out grid | Brier of p_right | log loss |",
        "|---|---|---:|---:|",
    ]
    rows: dict[str, object] = {}
    for name, firth in (("plain maximum likelihood", False), ("Firth-penalised (the advisor's)", True)):
        found = held_out(fitted, firth=firth)
        points, stated = [p for p, _, _ in found], [s for _, _, s in found]
        cs = list(dict.fromkeys(c for _, c, _ in found))
        score = float(np.mean([(s - float(p.right)) ** 2 for p, s in zip(points, stated, strict=True)]))
        loss = log_loss(points, stated)
        lines.append(f"| {name} | {', '.join(f'{c:.2f}' for c in cs)} | {score:.4f} | {loss:.3f} |")
        rows[name] = {"c": cs, "brier": score, "log_loss": loss}
    constant: list[tuple[Point, float]] = []
    for grid in GRIDS:
        train = [p for p in fitted if p.group != grid]
        constant += [(p, sum(t.right for t in train) / len(train)) for p in fitted if p.group == grid]
    score = float(np.mean([(s - float(p.right)) ** 2 for p, s in constant]))
    loss = log_loss([p for p, _ in constant], [s for _, s in constant])
    lines += [f"| constant p (the other grids' share right) | - | {score:.4f} | {loss:.3f} |", ""]
    rows["constant"] = {"brier": score, "log_loss": loss}
    return lines, rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-md", type=Path, default=None, help="Write the Markdown tables here.")
    parser.add_argument("--out-json", type=Path, default=None, help="Write every point and score here.")
    args = parser.parse_args(argv)
    lines, document = report(calibration_points(), validation_points())
    print("\n".join(lines))
    write_outputs(args.out_md, args.out_json, HEADER, lines, document)


if __name__ == "__main__":
    main()
