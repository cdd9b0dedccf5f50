"""C1's and C2's parts and controls for the one power method (:mod:`crl.claims.power`).

C1 and C2 are violation counts (docs/theory.md section 7): each point (a score's ``L(s) - L*``, ``E* - E(s)``, a
family's ``E(c) - E(c_L)``, a calibration point's ``E* - E`` against ``sqrt(2x/tau)``) is a Monte-Carlo estimate
with its own standard error, and a part FAILs when some point exceeds its bound by more than k se + 1e-12 (k the
Bonferroni multiple at the part's level over the points, :func:`crl.stats.bound_violations`). The rules have no
INCONCLUSIVE outcome, so **P(decide) is 1 by construction**; P(FAIL) and P(control PASS) are the figures.

**Units: fixed batches of each cell's draws.** The points are different scores, not replicates of one quantity:
a normal law across them (a random score's value drawn from the spread of all the others') describes no run of
the claim, and its tail (which is all a count reads) would be an artefact. The claim's noise is the Monte-Carlo
error inside each cell, and the cells are independent (each has its own seed). So a unit is one of
:data:`BATCHES` fixed batches of every cell's draws, and a design of S units reads each point as the mean of S
batch means with the se of that mean (the rule's own normal interval, resampled on batch means instead of
draws). The cells keep only their mean and se, not batch means: each point's batch rows are written as
:data:`BATCHES` rows whose mean is the point's estimate and whose covariance is ``BATCHES se^2`` (independent
across points: the cells have their own seeds, and a cell's two quantities come from independent draws), so
:func:`crl.claims.power.normal_designs` draws exactly the normal law the rule assumes, and the rule on the rows
themselves reproduces the claim's estimates, se, count and verdict exactly (no batch tolerance). Points whose
estimate lies more than :data:`CARRY_Z` se inside their bound enter every design as measured: no design at the
measured noise moves them across (at most ``BATCHES - 1`` points carry noise; the nearest ones). Exact points
(se = 0: the finite models' enumerations) carry no noise; they are still counted and judged in every design.

**Truth transform.** Each part's statistic is the measured set's worst point (the same point in every design),
the one nearest to being shown in violation: the largest ``e - k se``, e its excess over the bound, among the
Monte-Carlo points where there are any (an exact point FAILs any violation beyond 1e-12 with certainty, so it
would make the figure say nothing about the estimated ones); its interval is the rule's own ``e +- (k se +
1e-12)``, and the part FAILs exactly when some point's interval lies above its bound. ``shift`` moves that point's
true excess over its bound (one score violating: the least favourable alternative to "for every s"), every other
point at its measured value with its noise. delta is the rule's own tolerance at that point, ``k se + 1e-12``, so
where that tolerance does not itself move with the noise (C1's points) P(FAIL) at 2 delta is near Phi(k) by
construction, and delta (the table's "P(FAIL) at", halved) is the smallest violation the count resolves. C2's
tolerance does move: at a score at s* (``L - L*`` = 0 within its se) the bound sqrt(2x/tau) and its one-sided se
change steeply with x's noise, and P(FAIL) there falls below the gate (docs/power_v4/c2_full.md).

Seed sets: a single run splits into the halves of its cells numbered by ``index`` (C1's random scores per model;
C2's random and discrete series), each half a set of independent cells; the cells without an index (one cell per
point, each with its own seed) are dealt alternately to the halves, series by series in the order of their
parameters (:attr:`crl.claims.power.EngineEntry.series`): C2's rotation, rank-swap, adversarial, trained, ERM and
tau-sweep points split between the halves. C1's part (b) and its control are one cell per arm per run: both go to
the first half, so they have figures on one seed set of a run (two runs at one fidelity, passed as two sources,
give them two). Identity parts: none (the finite models' exact points are counted inside parts (a1), (a2) and
C2's part beside the Monte-Carlo points, not as parts of their own).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from crl.claims import c01_fisher as c1
from crl.claims import c02_calibration as c2
from crl.claims.budget import part_level
from crl.claims.context import Fidelity
from crl.claims.power import ControlSpec, EngineEntry, FloatArray, Judge, PartSpec, SeedSetSpecs
from crl.claims.verdict import Statistic, Verdict, verdict_no_violations
from crl.stats import ViolationCount
from crl.sweep import CellRecord

BATCHES = 100
"""Fixed batches per cell (the units of the normal law; a design's S counts batches of n_anchors / BATCHES draws)."""
CARRY_Z = 12.0
"""A point more than this many se inside its bound enters every design as measured (module docstring)."""
ROUNDING = c1.ROUNDING
"""The rules' tolerance for exactly computed quantities (C1's and C2's are the same 1e-12)."""

Arrays = dict[str, FloatArray]
"""quantity -> one value per point."""


@dataclass(frozen=True)
class Points:
    """The measured points of one count: per quantity, every point's estimate and se, and which (quantity, point)
    columns carry batch noise into the designs."""

    means: Arrays
    se: Arrays
    carried: list[tuple[str, int]]

    def values(self) -> FloatArray:
        """(BATCHES, carried) batch rows with each column's estimate as mean and ``BATCHES se^2`` as covariance."""
        if not self.carried:
            return np.zeros((BATCHES, 0))
        basis = np.random.default_rng(0).standard_normal((BATCHES, len(self.carried)))
        basis -= basis.mean(axis=0)
        orthonormal, _ = np.linalg.qr(basis)
        scale = math.sqrt(BATCHES * (BATCHES - 1))
        mean = np.array([self.means[q][i] for q, i in self.carried])
        se = np.array([self.se[q][i] for q, i in self.carried])
        return np.asarray(mean[None, :] + scale * se[None, :] * orthonormal, dtype=np.float64)

    def read(self, design: FloatArray) -> tuple[Arrays, Arrays]:
        """Every point's estimate and se on a design of S batch rows: the carried columns' means and se of the
        mean (sd / sqrt(S)), the other points as measured."""
        means = {q: v.copy() for q, v in self.means.items()}
        se = {q: v.copy() for q, v in self.se.items()}
        if self.carried:
            centre = design.mean(axis=0)
            spread = design.std(axis=0, ddof=1) / math.sqrt(design.shape[0])
            for column, (q, i) in enumerate(self.carried):
                means[q][i], se[q][i] = centre[column], spread[column]
        return means, se


Excess = Callable[[Arrays, Arrays], tuple[FloatArray, FloatArray]]
"""(estimates, se) -> every point's excess over its bound and the se the rule gives it (-inf: not judged)."""


def carried_points(means: Arrays, se: Arrays, excess: Excess) -> Points:
    """The points with their noisy columns: those within :data:`CARRY_Z` se of their bound, nearest first, up to
    ``BATCHES - 1`` columns."""
    over, spread = excess(means, se)
    z = np.full(over.shape, -np.inf)
    noisy = (spread > 0.0) & np.isfinite(over)
    z[noisy] = over[noisy] / spread[noisy]
    carried: list[tuple[str, int]] = []
    for i in np.argsort(-z, kind="stable"):
        if z[i] < -CARRY_Z:
            break
        columns = [(q, int(i)) for q in means if se[q][i] > 0.0]
        if len(carried) + len(columns) > BATCHES - 1:
            break
        carried += columns
    return Points(means, se, carried)


def bonferroni(points: int, level: float) -> float:
    """The rules' multiple k over ``points`` points at ``level`` (:func:`crl.stats.bound_violations`)."""
    return float(scipy_stats.norm.isf((1.0 - level) / points))


@dataclass(frozen=True)
class CountPart:
    """One violation count read by the power method: the claim's rule, each point's excess over its bound, and
    how the truth of one point moves (its excess over the bound rises by ``shift``)."""

    name: str
    level: float
    rule: Callable[[Arrays, Arrays], ViolationCount]
    excess: Excess
    move: Callable[[Arrays, int, float], Arrays]

    def worst(self, means: Arrays, se: Arrays) -> int:
        """The point nearest to being shown in violation: the largest ``e - k se`` (among the Monte-Carlo points
        where there are any)."""
        over, spread = self.excess(means, se)
        k = bonferroni(int(np.sum(np.isfinite(over))), self.level)
        nearness = over - k * spread
        if np.any(spread > 0.0):
            nearness = np.where(spread > 0.0, nearness, -np.inf)
        return int(np.argmax(nearness))

    def judge(self, points: Points, worst: int) -> Judge:
        """The part's judge on designs of ``points``: the claim's count with the true excess of the point
        ``worst`` (the measured set's worst, the same point in every design) moved by ``shift``; its statistic is
        that point's excess with the rule's own interval."""

        def judge(design: FloatArray, shift: float) -> tuple[Verdict, Statistic | None]:
            means, se = points.read(design)
            over, spread = self.excess(means, se)
            count = self.rule(self.move(means, worst, shift), se)
            value, margin = float(over[worst] + shift), float(count.k * spread[worst] + ROUNDING)
            detail = (
                f"point {worst}: excess over its bound +- (k se + 1e-12), k = {count.k:.3f}; "
                f"{count.count_beyond_mc_error} of {count.n} points beyond k se"
            )
            statistic = Statistic(self.name, value, value - margin, value + margin, self.level, detail)
            return verdict_no_violations(count), statistic

        return judge

    def spec(self, means: Arrays, se: Arrays) -> PartSpec:
        """The part's :class:`PartSpec`: bound 0 on the worst point's excess, delta the rule's tolerance there."""
        points = carried_points(means, se, self.excess)
        values = points.values()
        judge = self.judge(points, self.worst(means, se))
        _, observed = judge(values, 0.0)
        assert observed is not None
        return PartSpec(self.name, 0.0, observed.ci_high - observed.value, True, values, judge)

    def control(self, means: Arrays, se: Arrays) -> ControlSpec:
        """The count as a control: its verdict on designs of the measured points."""
        points = carried_points(means, se, self.excess)

        def judge(design: FloatArray) -> Verdict:
            found, spread = points.read(design)
            return verdict_no_violations(self.rule(found, spread))

        return ControlSpec(self.name, self.level, points.values(), judge)


def _moved(means: Arrays, quantity: str, point: int, shift: float) -> Arrays:
    """``means`` with ``quantity`` of ``point`` moved by ``shift``."""
    out = {q: v.copy() for q, v in means.items()}
    out[quantity][point] += shift
    return out


class C1Parts:
    """C1's parts and control on one seed set (:mod:`crl.claims.c01_fisher`'s rule functions).

    - (a1) ``L(s) - L* >= 0`` over the random scores: the truth lowers the worst score's ``L(s) - L*`` by shift;
    - (a2) ``E* - E(s) >= 0``: the truth lowers the worst score's ``E* - E(s)`` by shift;
    - (b) ``E(c) - E(c_L) <= 0`` over the family (when the set holds its claim cell): the truth raises the worst
      c's ``E(c) - E(c_L)`` by shift; c_L, the measured argmin of L, is held (the cell keeps no paired se between
      two c other than c_L, so a design cannot re-pick it), and the 8 gains are drawn independently (their
      correlation through the common draws is not stored);
    - control: part (b)'s count on the wrong-law loss (when the set holds its cell), as measured.
    """

    def __init__(self, records: list[CellRecord], fidelity: Fidelity) -> None:
        self.level = part_level(c1.CLAIM.parts)
        scores = [r for r in records if r.cell.params.get("part") == "a"]
        scores.sort(key=lambda r: (str(r.cell.params["model"]), int(r.cell.params["index"])))
        self.scores = [r.result for r in scores]
        self.family = {
            str(r.cell.params["arm"]): r.result for r in records if r.cell.params.get("part") == "b"
        }

    def sign_part(self, key: str, label: str) -> PartSpec:
        """Part (a1) (key "excess") or (a2) (key "gap"): no score's estimate below 0 beyond k se + 1e-12."""
        count, means, se = self.sign_count(key, label)
        return count.spec(means, se)

    def sign_count(self, key: str, label: str) -> tuple[CountPart, Arrays, Arrays]:
        """Part (a1) or (a2) as a count with its measured points (see :meth:`sign_part`)."""
        means = {key: np.array([r[key] for r in self.scores], dtype=np.float64)}
        se = {key: np.array([r[f"{key}_se"] for r in self.scores], dtype=np.float64)}

        def rule(found: Arrays, spread: Arrays) -> ViolationCount:
            rows = [
                {key: float(v), f"{key}_se": float(s)} for v, s in zip(found[key], spread[key], strict=True)
            ]
            return c1._sign_violations(rows, key, self.level)

        def excess(found: Arrays, spread: Arrays) -> tuple[FloatArray, FloatArray]:
            return -found[key], spread[key]

        def move(found: Arrays, point: int, shift: float) -> Arrays:
            return _moved(found, key, point, -shift)

        return CountPart(label, self.level, rule, excess, move), means, se

    def _family(self, arm: str, label: str) -> tuple[CountPart, Arrays, Arrays]:
        summary = self.family[arm]
        best = c1.FAMILY_GRID.index(summary["argmin_risk"])
        means = {"gain": np.array(summary["auc_gain"], dtype=np.float64)}
        se = {"gain": np.array(summary["auc_gain_se"], dtype=np.float64)}

        def rule(found: Arrays, spread: Arrays) -> ViolationCount:
            moved: dict[str, Any] = {
                **summary,
                "auc_gain": found["gain"].tolist(),
                "auc_gain_se": spread["gain"].tolist(),
            }
            return c1.family_violations(moved, self.level)

        def excess(found: Arrays, spread: Arrays) -> tuple[FloatArray, FloatArray]:
            over = found["gain"].copy()
            over[best] = -np.inf
            return over, spread["gain"]

        def move(found: Arrays, point: int, shift: float) -> Arrays:
            return _moved(found, "gain", point, shift)

        return CountPart(label, self.level, rule, excess, move), means, se

    def specs(self, name: str) -> SeedSetSpecs:
        """Parts (a1), (a2), and (b) with the control where the set holds the family's cells."""
        parts = [
            self.sign_part("excess", "C1 (a1) L(s) - L* >= 0"),
            self.sign_part("gap", "C1 (a2) E* - E(s) >= 0"),
        ]
        controls = []
        if "claim" in self.family:
            count, means, se = self._family("claim", "C1 (b) E(c) <= E(argmin L)")
            parts.append(count.spec(means, se))
        if "control" in self.family:
            count, means, se = self._family("control", "C1 wrong-law loss (part b)")
            controls.append(count.control(means, se))
        return SeedSetSpecs(name, parts, controls)


class C2Parts:
    """C2's part and control on one seed set (:mod:`crl.claims.c02_calibration`'s rule functions).

    - the part: no point's ``E* - E`` above ``sqrt((2/tau)(L - L*))`` beyond k se + 1e-12; the truth raises the
      worst point's ``E* - E`` by shift (its ``L - L*``, hence its bound, held);
    - control: the same count against the linear law ``(2/tau)(L - L*)``, as measured.

    Reported, not judged: the slack and the two slopes (no power figure).
    """

    def __init__(self, records: list[CellRecord], fidelity: Fidelity) -> None:
        self.level = part_level(c2.CLAIM.parts)
        rows = c2._flatten(records)
        self.tau = np.array([r["tau"] for r in rows], dtype=np.float64)
        self.means = {
            "x": np.array([r["excess"] for r in rows], dtype=np.float64),
            "y": np.array([r["gap"] for r in rows], dtype=np.float64),
        }
        self.se = {
            "x": np.array([r["excess_se"] for r in rows], dtype=np.float64),
            "y": np.array([r["gap_se"] for r in rows], dtype=np.float64),
        }

    def count(self, name: str, rule: Callable[..., ViolationCount], linear: bool) -> CountPart:
        """The part (``rule`` :func:`crl.claims.c02_calibration.bound_count`) or the control (``linear_count``)."""
        tau = self.tau

        def judged(found: Arrays, spread: Arrays) -> ViolationCount:
            return rule(found["x"], spread["x"], found["y"], spread["y"], tau, self.level)

        def excess(found: Arrays, spread: Arrays) -> tuple[FloatArray, FloatArray]:
            if linear:
                bound, bound_se = 2.0 * found["x"] / tau, 2.0 * spread["x"] / tau
            else:
                bound, bound_se = c2.sqrt_bound(found["x"], spread["x"], tau)
            return found["y"] - bound, np.hypot(spread["y"], bound_se)

        def move(found: Arrays, point: int, shift: float) -> Arrays:
            return _moved(found, "y", point, shift)

        return CountPart(name, self.level, judged, excess, move)

    def specs(self, name: str) -> SeedSetSpecs:
        """The part and the control on this seed set."""
        part = self.count("C2 E* - E <= sqrt((2/tau)(L - L*))", c2.bound_count, False)
        control = self.count("C2 linear law (2/tau)(L - L*)", c2.linear_count, True)
        return SeedSetSpecs(name, [part.spec(self.means, self.se)], [control.control(self.means, self.se)])


def _series(record: CellRecord) -> str:
    """The series a cell without an ``index`` belongs to (C1's family arm, C2's series)."""
    params = record.cell.params
    return str(params.get("series", params.get("arm", "")))


ENGINES: dict[str, EngineEntry] = {
    "C1": EngineEntry(C1Parts, "index", lambda fidelity: BATCHES, series=_series),
    "C2": EngineEntry(C2Parts, "index", lambda fidelity: BATCHES, series=_series),
}
"""C1's and C2's engines; their units are :data:`BATCHES` batches of every cell's draws at every fidelity (the
fidelity sets the draws per cell and the number of cells)."""
