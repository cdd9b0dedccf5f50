"""C6's tolerance choice, power gate and stability test (docs/claims/C6.md, revisions 5 and 6).

- :func:`choose_q`: the pilot's criterion for the tolerance of m_q (a fixed q, or a band of q whose log m_q is
  averaged). Among the candidates for which no m_q of any arm at any n is censored, on the data and in every
  delete-one row, the one with the smallest jackknife standard error of DD; ties to the smaller (narrower) one;
  with none free of censoring, the fewest censored entries first. The sign and size of DD play no part.
- :func:`design_power_of`: the one power method (:mod:`crl.claims.power`) at a design of S seeds on the two
  halves of the pilot's seeds, each design judged by :func:`crl.claims.c06_saturation.judge`: P(decide) with DD's
  truth at the end of the half's own CI nearest the bound 0, P(FAIL) with its truth at -2 delta = -0.2, and
  P(control PASS) as measured. A truth is set by shifting DD by a constant, which moves every jackknife row, hence
  the CI, by it.
- :func:`stability`: the stability test of DD (contract v4: its largest delete-one move against c = 4 times the
  root mean square move).

Re-judging C6 (as any claim) from a committed table of its cells is :mod:`crl.claims.replay`.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from crl.claims import c06_saturation as c6
from crl.claims.budget import part_level
from crl.claims.context import Fidelity
from crl.claims.power import RESAMPLES, ControlSpec, DesignPower, PartSpec, SeedSetSpecs, design_power
from crl.claims.verdict import Statistic, Verdict, verdict_above
from crl.stats import INFLUENCE_BOUND, influence_ratio
from crl.stats.saturation import Tolerance, jackknife_weights, passages_by_n
from crl.sweep import CellRecord

DELTA = 0.1
"""docs/theory.md section 7's default margin: the FAIL truth sits at the bound - 2 delta = -0.2."""


@dataclass(frozen=True)
class Curves:
    """Per arm, per n, the (S, M_n) per-seed excess-risk curves, with the grid and the unconverged fits."""

    by_arm: dict[str, list[np.ndarray]]
    grid_n: tuple[int, ...]
    grids: list[tuple[int, ...]]
    unconverged: int

    def select(self, seeds: np.ndarray) -> dict[str, list[np.ndarray]]:
        """The curves of the seed indices ``seeds`` (repeats allowed), for every arm and n."""
        return {arm: [values[seeds] for values in blocks] for arm, blocks in self.by_arm.items()}

    @property
    def seeds(self) -> int:
        """S, the number of seeds."""
        return int(next(iter(self.by_arm.values()))[0].shape[0])


def curves_from_records(records: list[CellRecord], fidelity: Fidelity) -> Curves:
    """The stored cells of a C6 run as :class:`Curves` on ``fidelity``'s grids.

    Cells at an n outside ``fidelity``'s plan are left out, so a full run's cells read at standard are those of
    n <= 256 (both fidelities run m = 2, ..., 16 n at every n).

    Raises:
        ValueError: when an n of the plan has no cells, or a cell's m grid is not the plan's at its n.
    """
    plan = c6.PLANS[fidelity]
    grid_n = tuple(plan["n"])
    kept = [record for record in records if int(record.cell.params["n"]) in grid_n]
    missing = sorted(set(grid_n) - {int(record.cell.params["n"]) for record in kept})
    if missing:
        raise ValueError(
            f"fidelity={fidelity.value!r} reads C6 at n = {list(grid_n)}, but the cells have none at n = "
            f"{missing}; pass the fidelity of the run that wrote them, or one whose n grid they cover."
        )
    for record in kept:
        n = int(record.cell.params["n"])
        if len(record.result["excess"]) != len(c6.m_grid(n, plan["m_over_n"])):
            raise ValueError(
                f"fidelity={fidelity.value!r} runs m = 2 .. {plan['m_over_n'] * n} at n = {n}, but a cell there "
                f"holds {len(record.result['excess'])} values of m; pass the fidelity of the run that wrote it."
            )
    unconverged = sum(not ok for record in kept for ok in record.result["converged"])
    return Curves(c6.stack_arms(kept, fidelity), grid_n, c6.m_grids(fidelity), unconverged)


@dataclass(frozen=True)
class ToleranceRow:
    """One candidate tolerance on the pilot: censored (arm, n, row) entries, DD and its jackknife standard error."""

    q: Tolerance
    censored: int
    dd: float
    se: float


def choose_q(
    curves: Curves, candidates: Sequence[Tolerance] = c6.TOLERANCE_CANDIDATES
) -> tuple[Tolerance, list[ToleranceRow]]:
    """The pilot's q (module docstring) and the table it was chosen from."""
    level = part_level(c6.CLAIM.parts)
    rows = jackknife_weights(curves.seeds)
    table = []
    for q in candidates:
        censored = sum(
            int(np.count_nonzero(passages_by_n(curves.grids, values, rows, q).censor))
            for values in curves.by_arm.values()
        )
        found = c6.judge(curves.by_arm, curves.grid_n, curves.grids, level, q=q)
        table.append(ToleranceRow(q, censored, found.claim.point, found.claim.se))
    best = min(table, key=lambda row: (row.censored, row.se, _width(row.q)))
    return best.q, table


def halves(curves: Curves) -> list[tuple[str, np.ndarray]]:
    """The two independent seed sets of one run: replicates 0 .. S/2 - 1 and S/2 .. S - 1."""
    half = curves.seeds // 2
    return [
        (f"replicates 0-{half - 1}", np.arange(half)),
        (f"replicates {half}-{2 * half - 1}", np.arange(half, 2 * half)),
    ]


def seed_set_specs(curves: Curves, name: str, members: np.ndarray, tolerance: Tolerance) -> SeedSetSpecs:
    """C6's part (DD, its truth moved by a constant: every jackknife row, hence the CI, moves with it) and its
    control on the seeds ``members`` of ``curves``, for the one power method (:mod:`crl.claims.power`). The
    control's DD is judged at its true value 0 (its two null replicates are exchangeable by construction), not at
    the set's estimate, which a design larger than the set would take for the truth. Per seed, the values are
    every arm's curve at every n, concatenated. A run with a fit that did not converge is INCONCLUSIVE in every
    design, as its rule judges it."""
    level = part_level(c6.CLAIM.parts)
    layout = [(arm, i) for arm in c6.ARMS for i in range(len(curves.grid_n))]
    values = np.hstack([curves.by_arm[arm][i][members] for arm, i in layout])
    widths = [curves.by_arm[arm][i].shape[1] for arm, i in layout]
    cuts = np.cumsum([0, *widths])

    last: list[tuple[np.ndarray, c6.Judgement]] = []

    def judged(design: np.ndarray) -> c6.Judgement:
        """C6's rule on one design; the engine judges a design at two truths, which move DD alone: one rule call."""
        if last and last[0][0] is design:
            return last[0][1]
        by_arm: dict[str, list[np.ndarray]] = {arm: [] for arm in c6.ARMS}
        for (arm, _), low, high in zip(layout, cuts[:-1], cuts[1:], strict=True):
            by_arm[arm].append(design[:, low:high])
        found = c6.judge(
            by_arm, curves.grid_n, curves.grids, level, q=tolerance, unconverged=curves.unconverged
        )
        last[:] = [(design, found)]
        return found

    def judge(design: np.ndarray, shift: float) -> tuple[Verdict, Statistic | None]:
        found = judged(design).claim
        moved = Statistic("DD", found.point + shift, found.ci_low + shift, found.ci_high + shift, level)
        if curves.unconverged:
            return Verdict.INCONCLUSIVE, moved
        return verdict_above(moved, 0.0), moved

    measured = c6.judge(
        curves.select(members),
        curves.grid_n,
        curves.grids,
        level,
        q=tolerance,
        unconverged=curves.unconverged,
    ).control.point

    def control(design: np.ndarray) -> Verdict:
        found = judged(design).control
        at_null = Statistic(
            "DD", found.point - measured, found.ci_low - measured, found.ci_high - measured, level
        )
        if curves.unconverged:
            return Verdict.INCONCLUSIVE
        return verdict_above(at_null, 0.0)

    return SeedSetSpecs(
        name,
        [PartSpec("C6 DD", 0.0, DELTA, False, values, judge)],
        [ControlSpec("C6 second null replicate's DD", level, values, control)],
    )


def design_power_of(
    curves: Curves, *, tolerance: Tolerance, seeds: int, resamples: int = RESAMPLES, seed: int = 6121
) -> DesignPower:
    """C6's figures by the one power method at ``seeds`` seeds, on the two halves of ``curves``' seeds."""
    sets = [seed_set_specs(curves, name, members, tolerance) for name, members in halves(curves)]
    return design_power("C6", sets, seeds, resamples, seed)


@dataclass(frozen=True)
class Stability:
    """The stability test of DD on one seed set: its largest delete-one move over the root mean square move."""

    seed_set: str
    tolerance: Tolerance
    ratio: float

    @property
    def passes(self) -> bool:
        """ratio <= c (:data:`crl.stats.INFLUENCE_BOUND`)."""
        return self.ratio <= INFLUENCE_BOUND


def stability(curves: Curves, tolerance: Tolerance, members: np.ndarray, name: str) -> Stability:
    """DD's :func:`crl.stats.influence_ratio` on the seeds ``members`` (the claim's DD at its censoring point)."""
    level = part_level(c6.CLAIM.parts)
    found = c6.judge(curves.select(members), curves.grid_n, curves.grids, level, q=tolerance)
    rows = c6.difference_of_differences(found.slopes, c6.CLAIM_TERMS).point
    return Stability(name, tolerance, influence_ratio(float(rows[0]), rows[1:]))


def _width(tolerance: Tolerance) -> tuple[float, float]:
    """The tie-break order of tolerances: the narrower band (a fixed q has width 0), then the smaller q."""
    if isinstance(tolerance, float):
        return 0.0, tolerance
    return tolerance.high / tolerance.low, tolerance.low


def tolerance_markdown(chosen: Tolerance, table: list[ToleranceRow]) -> str:
    """The pilot's tolerance table as Markdown."""
    lines = ["| tolerance | censored (arm, n, row) | DD | jackknife se of DD |", "|---|---|---|---|"]
    lines += [f"| {_text(r.q)} | {r.censored} | {r.dd:.3g} | {r.se:.3g} |" for r in table]
    lines.append(f"\nChosen: {_text(chosen)}.")
    return "\n".join(lines)


def _text(tolerance: Tolerance) -> str:
    """``q = 0.2`` or ``q in [0.1, 0.3]``."""
    return f"q = {tolerance:g}" if isinstance(tolerance, float) else str(tolerance)
