"""C10: the generalisation gap R(phi_hat) - R_hat_n(phi_hat) of a trained embedding does not grow with k, falls at
least like n^-1/2 and is larger at small tau ([B] Thm 1), in an asymmetric model.

Pre-registered in docs/claims/C10.md (docs/theory.md section 7, C10).

Experiment (:func:`fit_embedding`, :func:`gap_terms`). Truth ``AsymmetricSphere(3, kappa=8, anchor_kappa=2, p-
= pi)`` (anchors and positives not exchangeable); phi = normalise(A z + b) onto S^2; [B]'s InfoNCE risk with k
own negatives per anchor. Per (k, tau) a reference phi_0 is fitted on an independent sample (reference cells,
computed first); every training cell fits phi_hat by L-BFGS from phi_0 and returns the control-variate gap
``[R_fresh(phi_hat) - R_fresh(phi_0)] - [R_hat_n(phi_hat) - R_hat_n(phi_0)]``.

Rule (three parts, contract v2): the rate in k by :func:`crl.stats.seed_rate` (a fitted rate; its misfit must be
material and significant; upper end <= 0.1), the rate in n end to end by :func:`crl.stats.secant_rate` (the
secant between the window's ends with its jackknife Student-t interval, the fitted slope reported beside; upper
end <= -0.45), and G(tau = 0.25) - G(tau = 1) > 0 (Student-t over seeds).

Negative control: one shared set of k negatives for all anchors (the SSCRL sample) on the vs-n series: its
gap has a term in k that does not fall with n; judged by part 2, it must not PASS.

The embedding family (:func:`embed`): an affine map normalised onto S^2, ``phi_theta(z) = normalise(A z + b)``
(A 3 x 3, b in R^3: one flat parameter vector theta of 12 entries), the same phi for anchors and candidates:
``s(x, y) = <phi(x), phi(y)>``, so |s| <= 1. Non-convex in theta (the normalisation), hence several starts for phi_0.

Risk ([B]): a tuple is ``(x, y, y'_1..y'_k)``; its loss is InfoNCE minus log k,
``log(1 + sum_j exp((s(x, y'_j) - s(x, y))/tau)) - log k`` (:func:`crl.objectives.contrastive_loss`, form
``"infonce"``). ``R_hat_n`` is the mean over the n training tuples, ``R`` the expectation over a fresh tuple.

Gap per training sample, with phi_0 a reference fitted on an independent sample:

    G = [R_fresh(phi_hat) - R_fresh(phi_0)] - [R_hat_n(phi_hat) - R_hat_n(phi_0)],

unbiased for ``E[R(phi_hat) - R_hat_n(phi_hat)]`` because ``E[R(phi_0) - R_hat_n(phi_0)] = 0``.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from torch import Tensor

from crl._vocab import Estimate
from crl.claims._gradient_fit import descend
from crl.claims.base import (
    Claim,
    ClaimContext,
    ClaimResult,
    FigureSpec,
    Statistic,
    Verdict,
    combine_verdicts,
    loglog_figure,
    points,
    verdict_above,
    verdict_at_most,
)
from crl.claims.context import Fidelity
from crl.objectives import contrastive_loss
from crl.stats import FewSeedsError, NonPositiveMeanError, secant_rate, seed_rate
from crl.sweep import Cell
from crl.synthetic import AsymmetricSphere

MODEL = AsymmetricSphere(3, kappa=8.0, anchor_kappa=2.0, negative_law="anchor")
TAU = 0.5
TAU_PAIR = (0.25, 1.0)
K_BOUND = 0.1
N_BOUND = -0.5 + 0.05
REFERENCE_STARTS = 2
CONVERGED_GRAD = 1e-5
"""A fit counts as converged when its largest final gradient entry is at most this (10 x L-BFGS's tolerance)."""


@dataclass(frozen=True)
class Plan:
    """One fidelity's grid and seeds (docs/claims/C10.md; full's 160 seeds sized by the one power method, contract
    v4)."""

    k_series_n: int
    k_grid: tuple[int, ...]
    n_series_k: int
    n_grid: tuple[int, ...]
    tau_n: int
    tau_k: int
    seeds: int
    n_ref: int
    n_fresh: int


PLANS = {
    Fidelity.QUICK: Plan(256, (2, 4, 8, 16, 32), 4, (128, 256, 512, 1024, 2048), 256, 4, 8, 2048, 8192),
    Fidelity.STANDARD: Plan(
        512, (2, 4, 8, 16, 32, 64), 8, (256, 512, 1024, 2048, 4096), 512, 8, 24, 4096, 16384
    ),
    Fidelity.FULL: Plan(
        2048,
        (2, 4, 8, 16, 32, 64, 128, 256),
        16,
        (256, 512, 1024, 2048, 4096, 8192, 16384),
        2048,
        16,
        160,
        16384,
        16384,
    ),
}


DIM = 3
N_PARAMS = DIM * DIM + DIM
"""12: A (3 x 3) and b (3)."""
GRAD_TOLERANCE = 1e-6
"""L-BFGS stops when the largest gradient entry of R_hat_n is at most this."""
MAX_ITERATIONS = 200
Negatives = Literal["own", "shared"]


@dataclass(frozen=True)
class TupleSample:
    """n tuples: anchors (n, 3), positives (n, 3), negatives (n, k, 3) ("own") or (k, 3) ("shared")."""

    anchors: Tensor
    positives: Tensor
    negatives: Tensor

    @property
    def shared(self) -> bool:
        """True when one set of k negatives serves every anchor."""
        return self.negatives.ndim == 2

    @property
    def k(self) -> int:
        """Negatives per anchor."""
        return int(self.negatives.shape[-2])


@dataclass(frozen=True)
class EmbeddingFit:
    """An ERM fit: its parameters, R_hat_n at them, the largest gradient entry, and which start won."""

    theta: Tensor
    empirical_risk: float
    grad_max: float
    start: int


def draw_tuples(
    model: AsymmetricSphere,
    pairs: tuple[Tensor, Tensor],
    k: int,
    negatives: Negatives,
    generator: torch.Generator,
) -> TupleSample:
    """The pairs with k negatives from p- each ("own"), or one set of k shared by all anchors ("shared")."""
    anchors, positives = pairs
    shape = (k,) if negatives == "shared" else (anchors.shape[0], k)
    return TupleSample(anchors, positives, model.sample_negatives(shape, generator))


def random_parameters(generator: torch.Generator) -> Tensor:
    """A random start: the entries of A ~ N(0, 1/3), b ~ N(0, 1/3) (float64)."""
    return torch.randn(N_PARAMS, dtype=torch.float64, generator=generator) / math.sqrt(DIM)


def embed(theta: Tensor, z: Tensor) -> Tensor:
    """``phi_theta(z) = normalise(A z + b)`` for z of shape (..., 3)."""
    matrix, bias = theta[: DIM * DIM].reshape(DIM, DIM), theta[DIM * DIM :]
    return torch.nn.functional.normalize(z @ matrix.T + bias, dim=-1)


def tuple_losses(theta: Tensor, sample: TupleSample, tau: float) -> Tensor:
    """Per-tuple ``InfoNCE - log k`` of phi_theta, shape (n,)."""
    anchors, positives = embed(theta, sample.anchors), embed(theta, sample.positives)
    losses = contrastive_loss(
        anchors,
        positives,
        embed(theta, sample.negatives),
        tau=tau,
        form="infonce",
        regime="shared" if sample.shared else "independent",
        reduction="none",
    )
    return losses - math.log(sample.k)


def empirical_risk(theta: Tensor, sample: TupleSample, tau: float) -> float:
    """``R_hat(phi_theta)``: the mean per-tuple loss over the sample."""
    with torch.no_grad():
        return float(tuple_losses(theta, sample, tau).mean())


def _fit_from(start: Tensor, sample: TupleSample, tau: float) -> tuple[Tensor, float, float]:
    """L-BFGS (strong Wolfe) on R_hat_n from ``start``: (theta, R_hat_n, largest gradient entry)."""
    theta = start.clone().requires_grad_(True)
    optimiser = torch.optim.LBFGS(
        [theta],
        lr=1.0,
        max_iter=MAX_ITERATIONS,
        tolerance_grad=GRAD_TOLERANCE,
        tolerance_change=1e-14,
        history_size=20,
        line_search_fn="strong_wolfe",
    )
    descend(optimiser, lambda: tuple_losses(theta, sample, tau).mean(), 1)
    loss = tuple_losses(theta, sample, tau).mean()
    (grad,) = torch.autograd.grad(loss, theta)
    return theta.detach(), float(loss.detach()), float(grad.abs().max())


def fit_embedding(sample: TupleSample, tau: float, starts: list[Tensor]) -> EmbeddingFit:
    """The ERM over the family: L-BFGS from every start, the lowest R_hat_n kept.

    Raises:
        RuntimeError: if every start ends at a non-finite risk (the cell is recorded as diverged).
    """
    best: EmbeddingFit | None = None
    for index, start in enumerate(starts):
        theta, risk, grad_max = _fit_from(start, sample, tau)
        if math.isfinite(risk) and (best is None or risk < best.empirical_risk):
            best = EmbeddingFit(theta, risk, grad_max, index)
    if best is None:
        raise RuntimeError("every L-BFGS start ended at a non-finite empirical risk")
    return best


def gap_terms(
    theta_hat: Tensor, theta_ref: Tensor, train: TupleSample, fresh: TupleSample, tau: float
) -> dict[str, float]:
    """The gap estimate and its parts (module docstring): ``gap`` (control variate) and ``plain_gap``."""
    fresh_hat, fresh_ref = empirical_risk(theta_hat, fresh, tau), empirical_risk(theta_ref, fresh, tau)
    train_hat, train_ref = empirical_risk(theta_hat, train, tau), empirical_risk(theta_ref, train, tau)
    return {
        "gap": (fresh_hat - fresh_ref) - (train_hat - train_ref),
        "plain_gap": fresh_hat - train_hat,
        "fresh_risk": fresh_hat,
        "train_risk": train_hat,
        "reference_fresh_risk": fresh_ref,
        "reference_train_risk": train_ref,
    }


def table(records: list[Any]) -> list[dict[str, Any]]:
    """One row per (arm, n, k, tau): mean control-variate gap and plain gap with se, fit diagnostics."""
    groups: dict[tuple[str, int, int, float], list[dict[str, Any]]] = {}
    for record in records:
        p = record.cell.params
        groups.setdefault((str(p["arm"]), int(p["n"]), int(p["k"]), float(p["tau"])), []).append(
            dict(record.result)
        )
    rows = []
    for (arm, n, k, tau), results in groups.items():
        gap = np.array([r["gap"] for r in results])
        plain = np.array([r["plain_gap"] for r in results])
        rows.append(
            {
                "arm": arm,
                "n": n,
                "k": k,
                "tau": tau,
                "gap": float(gap.mean()),
                "gap_se": float(gap.std(ddof=1) / math.sqrt(gap.size)),
                "plain_gap": float(plain.mean()),
                "plain_gap_se": float(plain.std(ddof=1) / math.sqrt(plain.size)),
                "train_risk": float(np.mean([r["train_risk"] for r in results])),
                "largest_grad": float(max(r["grad_max"] for r in results)),
            }
        )
    return rows


def notes(plan: Plan, records: list[Any], references: dict[tuple[int, float], dict[str, Any]]) -> str:
    """Seeds, sizes, and the optimiser's stationarity (largest gradient entry) for fits and references."""
    worst = {
        arm: max((r.result["grad_max"] for r in records if r.cell.params["arm"] == arm), default=0.0)
        for arm in ("claim", "shared")
    }
    unconverged = {
        arm: sum(r.result["grad_max"] > CONVERGED_GRAD for r in records if r.cell.params["arm"] == arm)
        for arm in ("claim", "shared")
    }
    worst_reference = max(r["grad_max"] for r in references.values())
    return (
        f"{plan.seeds} seeds; n_ref = {plan.n_ref}, N_fresh = {plan.n_fresh}; every fit starts at phi_0. "
        f"Largest final gradient entry: claim fits {worst['claim']:.2g}, "
        f"control fits {worst['shared']:.2g}, references {worst_reference:.2g} (stationary points of a non-convex "
        f"risk, not certified global minima). Fits not converged (gradient > {CONVERGED_GRAD:g}): claim "
        f"{unconverged['claim']}, control {unconverged['shared']} (the control is judged on its fits as they are)."
    )


def series(label: str, x: Sequence[int], columns: list[np.ndarray], control: bool = False) -> Any:
    """A Points series of seed means with 1-se bars (only positive means can be drawn on log axes)."""
    means = np.array([c.mean() for c in columns])
    se = np.array([c.std(ddof=1) / math.sqrt(c.size) for c in columns])
    keep = means > 0
    return points(label, np.asarray(x)[keep], means[keep], y_err=se[keep], control=control)


def figures(plan: Plan, gaps: dict[tuple[str, int, int, float], np.ndarray]) -> list[FigureSpec]:
    """Gap vs k (slope 0 for reference) and gap vs n with the control (slope -1/2 for reference)."""
    k_figure = loglog_figure(
        "gap_vs_k",
        f"C10: gap vs k (n = {plan.k_series_n}, tau = {TAU:g})",
        "k (negatives per anchor)",
        "R(phi_hat) - R_hat_n(phi_hat)",
        series("claim", plan.k_grid, [gaps[("claim", plan.k_series_n, k, TAU)] for k in plan.k_grid]),
        theory_slope=0.0,
    )
    n_figure = loglog_figure(
        "gap_vs_n",
        f"C10: gap vs n (k = {plan.n_series_k}, tau = {TAU:g})",
        "n (training tuples)",
        "R(phi_hat) - R_hat_n(phi_hat)",
        series(
            "claim: own negatives",
            plan.n_grid,
            [gaps[("claim", n, plan.n_series_k, TAU)] for n in plan.n_grid],
        ),
        series(
            "control: shared negatives",
            plan.n_grid,
            [gaps[("shared", n, plan.n_series_k, TAU)] for n in plan.n_grid],
            control=True,
        ),
        theory_slope=-0.5,
    )
    return [k_figure, n_figure]


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
    fit = fit_embedding(train, tau, [reference])
    return {**gap_terms(fit.theta, reference, train, fresh, tau), "grad_max": fit.grad_max}


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
        "L-BFGS from phi_0, gap per seed [R_fresh(phi_hat) - "
        "R_fresh(phi_0)] - [R_hat_n(phi_hat) - R_hat_n(phi_0)] with phi_0 fitted on an independent sample. "
        "Part 1 (vs k), a fitted rate: the misfit protocol on the seed means (power law; if its misfit is "
        "material and significant -- chi^2 on the seeds' covariance at alpha 0.05 and a relative residual "
        "above 5% beyond t se -- the two-term model a x^r + b x^(r-1); both misfit: INCONCLUSIVE), CI by the "
        "delete-one-seed jackknife with Student-t (S - 1 df); PASS if the CI's upper end is <= 0.1, FAIL if "
        "its lower end is > 0.1. Part 2 (vs n), end to end: the secant slope of the seed means between the "
        "window's ends with its jackknife Student-t CI (the fitted slope reported beside); PASS if the upper "
        "end is <= -0.45, FAIL if the lower end is > -0.45. Part 3 (tau): Student-t CI of G(tau = 0.25) - "
        "G(tau = 1) over seeds; PASS if above 0, FAIL if below 0. A mean gap <= 0, or a fit of the series "
        "with gradient > 1e-5, makes its"
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
        plan = replace(PLANS[ctx.fidelity], seeds=ctx.seeds_or(PLANS[ctx.fidelity].seeds))
        wanted = _points(plan)
        references = self._references(ctx, plan, sorted({(k, tau) for _, _, k, tau in wanted}))
        cells = [
            Cell(params, ctx.seed_for(params))
            for arm, n, k, tau in wanted
            for r in range(plan.seeds)
            for params in [_cell_params(ctx, plan, arm, n, k, tau, r, references[(k, tau)])]
        ]
        records = ctx.run_cells(cells, gap_cell)
        gaps = collect(records, plan.seeds, "gap")
        grads = collect(records, plan.seeds, "grad_max")
        k_keys = [("claim", plan.k_series_n, k, TAU) for k in plan.k_grid]
        n_keys = [("claim", n, plan.n_series_k, TAU) for n in plan.n_grid]
        tau_keys = [("claim", plan.tau_n, plan.tau_k, tau) for tau in TAU_PAIR]
        k_values = np.column_stack([gaps[key] for key in k_keys])
        n_values = np.column_stack([gaps[key] for key in n_keys])
        control_values = np.column_stack([gaps[("shared", n, plan.n_series_k, TAU)] for n in plan.n_grid])
        tau_difference = gaps[tau_keys[0]] - gaps[tau_keys[1]]
        k_part = _unconverged(grads, k_keys) or rate_part(
            "rate of the gap in k", plan.k_grid, k_values, K_BOUND, ctx.level
        )
        n_part = _unconverged(grads, n_keys) or secant_part(
            "rate of the gap in n", plan.n_grid, n_values, N_BOUND, ctx.level
        )
        temperature_part = _unconverged(grads, tau_keys) or tau_part(tau_difference, ctx.level)
        control = secant_part(
            "control (shared negatives): rate of the gap in n",
            plan.n_grid,
            control_values,
            N_BOUND,
            ctx.level,
        )
        parts = (k_part, n_part, temperature_part)
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
        "pair_seed": ctx.seed_for("pairs", arm, n, replicate),
        "negative_seed": ctx.seed_for("negatives", arm, n, k, replicate),
        "fresh_seed": ctx.seed_for("fresh", arm, n, k, replicate),
        "reference": reference["theta"],
    }


def collect(records: list[Any], n_seeds: int, field: str) -> dict[tuple[str, int, int, float], np.ndarray]:
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


def rate_part(name: str, x: Sequence[int], values: np.ndarray, bound: float, level: float) -> Part:
    """An upper-bound rule on the rate of the seed means (misfit protocol, jackknife Student-t)."""
    try:
        fit = seed_rate(list(x), values, level)
    except (NonPositiveMeanError, FewSeedsError) as error:
        return Part(Verdict.INCONCLUSIVE, None, f"{name}: {error}")
    statistic = Statistic.from_rate(name, fit)
    if fit.misfit:
        return Part(Verdict.INCONCLUSIVE, statistic, f"{name}: misfit: {fit.describe()}")
    return _at_most(name, statistic, bound)


def secant_part(name: str, x: Sequence[int], values: np.ndarray, bound: float, level: float) -> Part:
    """An upper-bound rule judged end to end: the secant slope of the seed means between the window's ends."""
    try:
        rate = secant_rate(list(x), values, level)
    except NonPositiveMeanError as error:
        return Part(Verdict.INCONCLUSIVE, None, f"{name}: {error}")
    return _at_most(
        name, Statistic(name, rate.exponent, rate.ci_low, rate.ci_high, level, rate.describe()), bound
    )


def _at_most(name: str, statistic: Statistic, bound: float) -> Part:
    """The upper-bound verdict of a rate's interval, with the reason when it straddles the bound."""
    verdict = verdict_at_most(statistic, bound)
    reason = (
        f"{name}: CI [{statistic.ci_low:.3g}, {statistic.ci_high:.3g}] straddles {bound:g}"
        if verdict is Verdict.INCONCLUSIVE
        else ""
    )
    return Part(verdict, statistic, reason)


def tau_part(difference: np.ndarray, level: float) -> Part:
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
