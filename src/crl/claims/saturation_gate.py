"""C6's tolerance choice, power gate and re-judging from per-seed tables (docs/claims/C6.md, revision 5).

- :func:`choose_q`: the pilot's criterion for the tolerance q of m_q. Among the candidates for which no m_q of
  any arm at any n is censored, on the data and in every delete-one row, the one with the smallest jackknife
  standard error of DD; ties to the smaller q; with none free of censoring, the fewest censored entries first.
  The sign and size of DD play no part.
- :func:`power_gate`: on each of two independent halves of the pilot's seeds, R subsamples of S seeds drawn
  without replacement from the half (S below the half's size; a resample with repeated seeds would make the
  delete-one jackknife too narrow), each judged by :func:`crl.claims.c06_saturation.judge`:
  P(decide) with DD's truth shrunk to the lower end of the half's own CI (the end nearest the bound 0),
  P(FAIL) with its truth at -2 delta = -0.2, and P(control PASS) as measured, each with its Clopper-Pearson 95%
  interval. A truth is set by shifting DD by a constant, which moves every jackknife row, hence the CI, by it.

Re-judging C6 (as any claim) from a committed table of its cells is :mod:`crl.claims.replay`.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from crl.claims import c06_saturation as c6
from crl.claims.budget import part_level
from crl.claims.context import Fidelity
from crl.claims.verdict import Statistic, Verdict, verdict_above
from crl.stats.saturation import JackknifeBounds, jackknife_weights, passages_by_n
from crl.sweep import CellRecord

DELTA = 0.1
"""docs/theory.md section 7's default margin: the FAIL truth sits at the bound - 2 delta = -0.2."""
DECIDE_TARGET = 0.8
RESAMPLES = 200


@dataclass(frozen=True)
class Share:
    """A share of resamples with its Clopper-Pearson 95% interval."""

    hits: int
    total: int
    low: float
    high: float

    @property
    def value(self) -> float:
        """hits / total."""
        return self.hits / self.total


def share(hits: int, total: int) -> Share:
    """``hits`` of ``total`` with the exact (Clopper-Pearson) 95% binomial interval."""
    interval = scipy_stats.binomtest(hits, total).proportion_ci(confidence_level=0.95, method="exact")
    return Share(hits, total, float(interval.low), float(interval.high))


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
    """One candidate q on the pilot: censored (arm, n, row) entries, DD and its jackknife standard error."""

    q: float
    censored: int
    dd: float
    se: float


def choose_q(
    curves: Curves, candidates: Sequence[float] = c6.Q_CANDIDATES
) -> tuple[float, list[ToleranceRow]]:
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
    best = min(table, key=lambda row: (row.censored, row.se, row.q))
    return best.q, table


@dataclass(frozen=True)
class HalfPower:
    """The gate's three figures on one half of the pilot's seeds."""

    half: int
    seeds_in_half: int
    estimate: float
    ci_low: float
    ci_high: float
    p_decide: Share
    p_fail: Share
    p_control_pass: Share
    allowed: float

    @property
    def passes(self) -> bool:
        """P(decide) >= 0.8, P(FAIL) >= 0.8 and P(control PASS) <= the part's alpha."""
        return (
            self.p_decide.value >= DECIDE_TARGET
            and self.p_fail.value >= DECIDE_TARGET
            and self.p_control_pass.value <= self.allowed
        )


def power_gate(
    curves: Curves, *, q: float, seeds: int, resamples: int = RESAMPLES, seed: int = 6121
) -> list[HalfPower]:
    """The gate on the two halves of ``curves``' seeds (module docstring); the half h draws its subsamples of
    ``seeds`` seeds (fewer than the half holds) from ``numpy.random.default_rng(seed + h)``. A run with a fit that
    did not converge is INCONCLUSIVE in every subsample, as its rule judges it."""
    level = part_level(c6.CLAIM.parts)
    half_size = curves.seeds // 2
    if not 3 <= seeds < half_size:
        raise ValueError(
            f"seeds = {seeds}; subsamples without replacement need 3 <= seeds < {half_size} (half the seeds)."
        )
    results = []
    for half in (0, 1):
        members = np.arange(half * half_size, (half + 1) * half_size)
        observed = c6.judge(
            curves.select(members), curves.grid_n, curves.grids, level, q=q, unconverged=curves.unconverged
        ).claim
        rng = np.random.default_rng(seed + half)
        decide = fail = control = 0
        for _ in range(resamples):
            picked = curves.select(rng.choice(members, size=seeds, replace=False))
            found = c6.judge(picked, curves.grid_n, curves.grids, level, q=q, unconverged=curves.unconverged)
            point = found.claim.point
            shrunk = _moved(found.claim, observed.ci_low - observed.point, curves.unconverged)
            failing = _moved(found.claim, -2 * DELTA - point, curves.unconverged)
            decide += shrunk is not Verdict.INCONCLUSIVE
            fail += failing is Verdict.FAIL
            control += found.control_verdict is Verdict.PASS
        results.append(
            HalfPower(
                half=half,
                seeds_in_half=half_size,
                estimate=observed.point,
                ci_low=observed.ci_low,
                ci_high=observed.ci_high,
                p_decide=share(decide, resamples),
                p_fail=share(fail, resamples),
                p_control_pass=share(control, resamples),
                allowed=1.0 - level,
            )
        )
    return results


def _moved(found: JackknifeBounds, shift: float, unconverged: int) -> Verdict:
    """C6's verdict on DD's interval moved by ``shift`` (module docstring: every jackknife row moves by it);
    INCONCLUSIVE with unconverged fits, as the rule."""
    if unconverged:
        return Verdict.INCONCLUSIVE
    return verdict_above(
        Statistic("DD", found.point + shift, found.ci_low + shift, found.ci_high + shift), 0.0
    )


def gate_markdown(halves: list[HalfPower], q: float, seeds: int) -> str:
    """The gate as a Markdown table, one row per half."""
    lines = [
        f"| half (seeds) | DD at q = {q:g} [CI] | P(decide) at the CI's lower end | P(FAIL) at DD = -0.2 | "
        "P(control PASS) (allowed) | gate |",
        "|---|---|---|---|---|---|",
    ]
    for h in halves:
        lines.append(
            f"| {h.half} ({h.seeds_in_half}) | {h.estimate:.3g} [{h.ci_low:.3g}, {h.ci_high:.3g}] | "
            f"{_share_text(h.p_decide)} | {_share_text(h.p_fail)} | {_share_text(h.p_control_pass)} "
            f"({h.allowed:.4f}) | {'passes' if h.passes else 'fails'} |"
        )
    total = halves[0].p_decide.total if halves else 0
    lines.append(
        f"\n{total} subsamples of {seeds} seeds drawn without replacement from each half; Clopper-Pearson 95% "
        "intervals in brackets."
    )
    return "\n".join(lines)


def _share_text(value: Share) -> str:
    return f"{value.value:.3f} [{value.low:.3f}, {value.high:.3f}]"


def tolerance_markdown(chosen: float, table: list[ToleranceRow]) -> str:
    """The pilot's tolerance table as Markdown."""
    lines = ["| q | censored (arm, n, row) | DD | jackknife se of DD |", "|---|---|---|---|"]
    lines += [f"| {r.q:g} | {r.censored} | {r.dd:.3g} | {r.se:.3g} |" for r in table]
    lines.append(f"\nChosen: q = {chosen:g}.")
    return "\n".join(lines)
