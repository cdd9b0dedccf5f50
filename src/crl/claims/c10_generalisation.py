"""C10: the generalisation gap R(phi_hat) - R_hat_n(phi_hat) of a trained embedding does not grow with k, falls at
least like n^-1/2 and is larger at small tau ([B] Thm 1), in an asymmetric model.

Pre-registered in docs/claims/C10.md (docs/theory.md section 7, C10).

Experiment (:mod:`crl.claims._c10_embedding`). Truth ``AsymmetricSphere(3, kappa=8, anchor_kappa=2, p- = pi)``
(anchors and positives not exchangeable); phi = normalise(A z + b) onto S^2; [B]'s InfoNCE risk with k own
negatives per anchor. Per (k, tau) a reference phi_0 is fitted on an independent sample (reference cells,
computed first); every training cell fits phi_hat by L-BFGS from phi_0 (and random starts at full fidelity) and
returns the control-variate gap ``[R_fresh(phi_hat) - R_fresh(phi_0)] - [R_hat_n(phi_hat) - R_hat_n(phi_0)]``.

Rule (three parts, :mod:`crl.claims._seed_rates`): the rate in k (upper end <= 0.1), the rate in n (upper end
<= -0.45), and G(tau = 0.25) - G(tau = 1) > 0 (Student-t over seeds).

Negative control: one shared set of k negatives for all anchors (the SSCRL sample) on the vs-n series: its
gap has a term in k that does not fall with n; judged by part 2, it must not PASS.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from crl._vocab import Estimate
from crl.claims._c10_embedding import (
    draw_tuples,
    fit_embedding,
    gap_terms,
    random_parameters,
)
from crl.claims._c10_plan import (
    CONVERGED_GRAD,
    K_BOUND,
    MODEL,
    N_BOUND,
    PLANS,
    REFERENCE_STARTS,
    TAU,
    TAU_PAIR,
    Plan,
)
from crl.claims._c10_report import figures, notes, table
from crl.claims._seed_rates import NonPositiveMeanError, seed_rate
from crl.claims.base import (
    Claim,
    ClaimContext,
    ClaimResult,
    Statistic,
    Verdict,
    combine_verdicts,
    verdict_above,
    verdict_at_most,
)
from crl.sweep import Cell, derive_seed


def reference_cell(cell: Cell) -> dict[str, Any]:
    """phi_0 for one (k, tau): the ERM from REFERENCE_STARTS random starts on n_ref independent tuples."""
    params = cell.params
    generator = torch.Generator().manual_seed(cell.seed)
    pairs = MODEL.sample(int(params["n_ref"]), generator)
    sample = draw_tuples(MODEL, pairs, int(params["k"]), "own", generator)
    starts = [random_parameters(generator) for _ in range(REFERENCE_STARTS)]
    fit = fit_embedding(sample, float(params["tau"]), starts)
    return {"theta": fit.theta.tolist(), "risk": fit.empirical_risk, "grad_max": fit.grad_max}


def gap_cell(cell: Cell) -> dict[str, Any]:
    """One training fit: its pairs (shared by the seed's cells of that n), negatives, fresh tuples, and the gap."""
    params = cell.params
    n, k, tau = int(params["n"]), int(params["k"]), float(params["tau"])
    pairs = MODEL.sample(n, torch.Generator().manual_seed(int(params["pair_seed"])))
    train = draw_tuples(
        MODEL, pairs, k, params["negatives"], torch.Generator().manual_seed(int(params["negative_seed"]))
    )
    fresh_generator = torch.Generator().manual_seed(int(params["fresh_seed"]))
    fresh = draw_tuples(
        MODEL, MODEL.sample(int(params["n_fresh"]), fresh_generator), k, "own", fresh_generator
    )
    reference = torch.tensor(params["reference"], dtype=torch.float64)
    starts = [reference] + [
        random_parameters(torch.Generator().manual_seed(derive_seed(cell.seed, "start", i)))
        for i in range(int(params["random_starts"]))
    ]
    fit = fit_embedding(train, tau, starts)
    return {
        **gap_terms(fit.theta, reference, train, fresh, tau),
        "grad_max": fit.grad_max,
        "start": fit.start,
    }


def _points(plan: Plan) -> list[tuple[str, int, int, float]]:
    """The distinct (arm, n, k, tau) of the three series and the control, in a fixed order."""
    wanted = [("claim", plan.k_series_n, k, TAU) for k in plan.k_grid]
    wanted += [("claim", n, plan.n_series_k, TAU) for n in plan.n_grid]
    wanted += [("claim", plan.tau_n, plan.tau_k, tau) for tau in TAU_PAIR]
    wanted += [("shared", n, plan.n_series_k, TAU) for n in plan.n_grid]
    return list(dict.fromkeys(wanted))


class GeneralisationInK(Claim):
    """C10 (module docstring)."""

    id: ClassVar[str] = "C10"
    title: ClassVar[str] = "Generalisation stable in k, no symmetry needed"
    source: ClassVar[str] = "[B] Thm 1"
    evidence: ClassVar[str] = (
        "[B] Thm 1's shape on a trained (non-convex) sphere embedding in an asymmetric model: no growth in k, "
        "decay in n at least n^-1/2, larger gap at small tau ([B]'s constant is not evaluated)"
    )
    parts: ClassVar[int] = 3
    statement: ClassVar[str] = (
        "For the empirical risk minimiser phi_hat of [B]'s InfoNCE risk over embeddings onto the sphere, the "
        "gap R(phi_hat) - R_hat_n(phi_hat) is bounded uniformly in k (it does not grow with k), is O(n^-1/2), "
        "and is larger at small tau; no symmetry between anchors and positives is needed."
    )
    rule: ClassVar[str] = (
        "docs/theory.md section 7, C10: R(phi_hat) - R_hat_n(phi_hat) does not grow with k, falls at least "
        "like n^-1/2, and is larger at small tau. Fixed by crl: AsymmetricSphere(3, kappa=8, anchor_kappa=2, "
        "p- = pi), phi(z) = normalise(Az + b) onto S^2, InfoNCE with k own negatives per anchor, phi_hat by "
        "L-BFGS from phi_0 (plus one random start at full fidelity), gap per seed [R_fresh(phi_hat) - "
        "R_fresh(phi_0)] - [R_hat_n(phi_hat) - R_hat_n(phi_0)] with phi_0 fitted on an independent sample. "
        "Rates by the misfit protocol on the seed means (power law; above a 5% largest relative residual "
        "the two-term model a x^r + b x^(r-1); misfit of both: INCONCLUSIVE), CI by the"
        " delete-one-seed jackknife with Student-t (S - 1 df). Part 1 (vs k): PASS if the CI's upper end is "
        "<= 0.1, FAIL if its lower end is > 0.1. Part 2 (vs n): PASS if the upper end is <= -0.45, FAIL if "
        "the lower end is > -0.45. Part 3 (tau): Student-t CI of G(tau = 0.25) - G(tau = 1) over seeds; PASS "
        "if above 0, FAIL if below 0. A mean gap <= 0, or a fit of the series with gradient > 1e-5, makes its"
        " part INCONCLUSIVE. Control: one shared set of k negatives for all anchors on the vs-n series, "
        "judged by part 2; it must not PASS."
    )
    control_description: ClassVar[str] = (
        "Shared negatives: on the vs-n series every seed's anchors share one set of k negatives (the SSCRL "
        "sample), which breaks [B]'s i.i.d.-tuple premise; the gap keeps a term in k that does not fall with n. "
        "Same family, fit, reference, estimator and level, judged by part 2 (rate in n, upper end <= -0.45); it "
        "must not PASS."
    )

    def run(self, ctx: ClaimContext) -> ClaimResult:
        """Reference fits, then every training fit; judge the three parts and the control."""
        plan = PLANS[ctx.fidelity]
        wanted = _points(plan)
        references = self._references(ctx, plan, sorted({(k, tau) for _, _, k, tau in wanted}))
        cells = [
            Cell(params, ctx.seed_for(params))
            for arm, n, k, tau in wanted
            for r in range(plan.seeds)
            for params in [_cell_params(ctx, plan, arm, n, k, tau, r, references[(k, tau)])]
        ]
        records = ctx.run_cells(cells, gap_cell)
        gaps = _collect(records, plan.seeds, "gap")
        grads = _collect(records, plan.seeds, "grad_max")
        k_keys = [("claim", plan.k_series_n, k, TAU) for k in plan.k_grid]
        n_keys = [("claim", n, plan.n_series_k, TAU) for n in plan.n_grid]
        tau_keys = [("claim", plan.tau_n, plan.tau_k, tau) for tau in TAU_PAIR]
        k_values = np.column_stack([gaps[key] for key in k_keys])
        n_values = np.column_stack([gaps[key] for key in n_keys])
        control_values = np.column_stack([gaps[("shared", n, plan.n_series_k, TAU)] for n in plan.n_grid])
        tau_difference = gaps[tau_keys[0]] - gaps[tau_keys[1]]
        k_part = _unconverged(grads, k_keys) or _rate_part(
            "rate of the gap in k", plan.k_grid, k_values, K_BOUND, ctx.level
        )
        n_part = _unconverged(grads, n_keys) or _rate_part(
            "rate of the gap in n", plan.n_grid, n_values, N_BOUND, ctx.level
        )
        tau_part = _unconverged(grads, tau_keys) or _tau_part(tau_difference, ctx.level)
        control = _rate_part(
            "control (shared negatives): rate of the gap in n",
            plan.n_grid,
            control_values,
            N_BOUND,
            ctx.level,
        )
        parts = (k_part, n_part, tau_part)
        return self.result(
            ctx,
            verdict=combine_verdicts(*(part.verdict for part in parts)),
            statistics=[part.statistic for part in parts if part.statistic is not None],
            control_verdict=control.verdict,
            control_statistics=[control.statistic] if control.statistic is not None else [],
            figures=figures(plan, gaps),
            table=table(records),
            notes=notes(plan, records, references),
            reasons=[part.reason for part in parts if part.reason],
            control_reasons=[control.reason] if control.reason else [],
        )

    def _references(
        self, ctx: ClaimContext, plan: Plan, keys: Sequence[tuple[int, float]]
    ) -> dict[tuple[int, float], dict[str, Any]]:
        """phi_0 per (k, tau), seeded by ("reference", k, tau) only."""
        cells = [
            Cell(
                {"role": "reference", "k": k, "tau": tau, "n_ref": plan.n_ref},
                ctx.seed_for("reference", k, tau),
            )
            for k, tau in keys
        ]
        records = ctx.run_cells(cells, reference_cell)
        return {(int(r.cell.params["k"]), float(r.cell.params["tau"])): dict(r.result) for r in records}


@dataclass(frozen=True)
class Part:
    """One part's verdict, its statistic (None when undefined) and the reason when INCONCLUSIVE."""

    verdict: Verdict
    statistic: Statistic | None
    reason: str


def _cell_params(
    ctx: ClaimContext,
    plan: Plan,
    arm: str,
    n: int,
    k: int,
    tau: float,
    replicate: int,
    reference: dict[str, Any],
) -> dict[str, Any]:
    """A training cell; the pairs depend on (arm, n, replicate) only, the negatives and fresh tuples on k too."""
    return {
        "arm": arm,
        "n": n,
        "k": k,
        "tau": tau,
        "replicate": replicate,
        "negatives": "shared" if arm == "shared" else "own",
        "n_fresh": plan.n_fresh,
        "random_starts": plan.random_starts,
        "pair_seed": ctx.seed_for("pairs", arm, n, replicate),
        "negative_seed": ctx.seed_for("negatives", arm, n, k, replicate),
        "fresh_seed": ctx.seed_for("fresh", arm, n, k, replicate),
        "reference": reference["theta"],
    }


def _collect(records: list[Any], n_seeds: int, field: str) -> dict[tuple[str, int, int, float], np.ndarray]:
    """Per (arm, n, k, tau), the per-seed values of ``field`` ("gap" or "grad_max") in replicate order."""
    found: dict[tuple[str, int, int, float], np.ndarray] = {}
    for record in records:
        p = record.cell.params
        key = (str(p["arm"]), int(p["n"]), int(p["k"]), float(p["tau"]))
        found.setdefault(key, np.full(n_seeds, np.nan))[int(p["replicate"])] = record.result[field]
    return found


def _unconverged(grads: dict[tuple[str, int, int, float], np.ndarray], keys: list[Any]) -> Part | None:
    """INCONCLUSIVE when a fit of the part's series did not reach :data:`CONVERGED_GRAD` (not an ERM), else None."""
    count = int(sum(np.sum(grads[key] > CONVERGED_GRAD) for key in keys))
    if count == 0:
        return None
    return Part(
        Verdict.INCONCLUSIVE,
        None,
        f"{count} fits of the series did not converge (gradient > {CONVERGED_GRAD:g})",
    )


def _rate_part(name: str, x: Sequence[int], values: np.ndarray, bound: float, level: float) -> Part:
    """An upper-bound rule on the rate of the seed means (misfit protocol, jackknife Student-t)."""
    try:
        fit = seed_rate(list(x), values, level)
    except NonPositiveMeanError as error:
        return Part(Verdict.INCONCLUSIVE, None, f"{name}: {error}")
    statistic = Statistic.from_rate(name, fit)
    if fit.misfit:
        return Part(Verdict.INCONCLUSIVE, statistic, f"{name}: misfit: {fit.describe()}")
    verdict = verdict_at_most(statistic, bound)
    reason = (
        f"{name}: CI [{fit.ci_low:.3g}, {fit.ci_high:.3g}] straddles {bound:g}"
        if verdict is Verdict.INCONCLUSIVE
        else ""
    )
    return Part(verdict, statistic, reason)


def _tau_part(difference: np.ndarray, level: float) -> Part:
    """G(smallest tau) - G(largest tau) per seed: Student-t interval, PASS above 0, FAIL below."""
    estimate = Estimate(
        float(difference.mean()), float(difference.std(ddof=1) / math.sqrt(difference.size)), difference.size
    )
    statistic = Statistic.from_mean(f"G(tau={TAU_PAIR[0]:g}) - G(tau={TAU_PAIR[1]:g})", estimate, level)
    verdict = verdict_above(statistic, 0.0)
    reason = (
        f"tau difference: CI [{statistic.ci_low:.3g}, {statistic.ci_high:.3g}] contains 0"
        if verdict is Verdict.INCONCLUSIVE
        else ""
    )
    return Part(verdict, statistic, reason)


CLAIM = GeneralisationInK()
