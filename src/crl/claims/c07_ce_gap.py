"""C7: [B]'s risk R(phi; k, tau) is within O(1/k) of the integrated cross-entropy ∫ CE[M||Q] dpi (Prop. 1).

Model: VMFUniform(d = 3, kappa = 2) (anchors and negatives uniform on S^2, positives vMF(z, kappa)). Two
embeddings phi onto the unit sphere: the identity, and a fixed random linear map ``phi(z) = Az/|Az|`` with
``A = U diag(1, 1.5, 2.5) V`` (U, V Haar rotations drawn from the run seed), which is not rotation-invariant.
For each (phi, tau) series and each k on a doubling grid, draws of (z ~ pi, y ~ M(z,.), k negatives ~ pi) give
the variance-reduced per-draw estimates of :func:`crl.metrics.risk.integrated_cross_entropy_gap` for InfoNCE
(R) and DCL (R~); ``log N(z) = log ∫ exp(s(z, z')/tau) pi(dz')`` comes from a product Gauss rule on S^2
(exact to ~1e-14 here).

The helpers :func:`sphere_embedding` and :func:`draw_kernel_scores` are shared with C8 and C9.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from crl.claims.base import (
    Claim,
    ClaimContext,
    ClaimResult,
    Curve,
    Fidelity,
    FigureSpec,
    Points,
    Statistic,
    Verdict,
    bonferroni_level,
    combine_verdicts,
    curve,
    loglog_figure,
    points,
    verdict_contains,
    verdict_no_violations,
)
from crl.metrics.risk import (
    asymptotic_gap_coefficients,
    cross_entropy_gap_bounds,
    integrated_cross_entropy_gap,
    learned_log_density_ratio,
    learned_log_partition,
    uniform_sphere_quadrature,
)
from crl.metrics.risk.kernel import GapCoefficients, KernelForm
from crl.stats import SlopeFit, ViolationCount, bound_violations, loglog_slope
from crl.sweep import Cell
from crl.synthetic.vmf import VMFUniform

Embedding = Callable[[Tensor], Tensor]

DIM = 3
"""Dimension d of the sphere model (S^2: the Gauss rule of :func:`uniform_sphere_quadrature` is for d = 3)."""
KAPPA = 2.0
"""Concentration of the positive kernel M(z, .) = vMF(z, kappa)."""
QUADRATURE = (48, 96)
"""Gauss-Legendre x azimuth nodes of the rule for log N(z) (4608 nodes; error < 1e-13 for tau >= 0.1 here)."""
ANCHOR_QUADRATURE = (24, 48)
"""Rule for the anchors' ∫ dpi(z) in the leading-order constants drawn as theory curves."""
LINEAR_SINGULAR_VALUES = (1.0, 1.5, 2.5)
"""Singular values of the random linear map A of ``phi(z) = Az/|Az|``."""
SERIES: tuple[tuple[str, float], ...] = (("identity", 1.0), ("linear", 0.5))
"""The (phi, tau) series of C7."""
FORM_ORDER: tuple[KernelForm, ...] = ("dcl", "infonce")
_MAX_POINTS_PER_CHUNK = 1 << 18
_CONTROL_SERIES = ("identity", 1.0)


@dataclass(frozen=True)
class Plan:
    """Sizes of one fidelity: draws per cell and the k grid."""

    n_draws: int
    ks: tuple[int, ...]


def doubling(low: int, high: int) -> tuple[int, ...]:
    """``(low, 2 low, 4 low, ..., high)`` for powers-of-two multiples."""
    values = [low]
    while values[-1] < high:
        values.append(2 * values[-1])
    return tuple(values)


PLANS = {
    Fidelity.QUICK: Plan(2000, doubling(128, 2048)),
    Fidelity.STANDARD: Plan(6000, doubling(128, 8192)),
    Fidelity.FULL: Plan(24000, doubling(128, 16384)),
}
"""Draws per cell and k grids. The grids start at k = 128: crl's next-order term makes k * gap deviate from its
limit a by about 0.6/k relatively here (measured once with 40000 draws at k = 16..128: 3.7% at k = 16, 0.6% at
k = 128), which would bias a slope fitted from smaller k by more than the standard-fidelity CI width."""


@dataclass(frozen=True)
class KernelDraws:
    """R draws of [B]'s risk: anchor z_r ~ pi, positive y_r ~ M(z_r,.), k negatives xi_rj ~ pi (all embedded).

    Attributes:
        positive_scores: (R,) s(z_r, y_r) = <phi(z_r), phi(y_r)>.
        negative_scores: (R, k) s(z_r, xi_rj).
        log_partition: (R,) log N(z_r) by quadrature.
        log_kernel_ratio: (R, k) log dM(z_r,.)/dpi (xi_rj), or ``None`` when not asked for.
    """

    positive_scores: Tensor
    negative_scores: Tensor
    log_partition: Tensor
    log_kernel_ratio: Tensor | None


def haar_rotation(generator: torch.Generator, dim: int = DIM) -> Tensor:
    """A Haar-distributed orthogonal matrix: QR of a Gaussian matrix with the signs of R's diagonal fixed."""
    q, r = torch.linalg.qr(torch.randn(dim, dim, generator=generator, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))


def sphere_embedding(kind: str, phi_seed: int) -> Embedding:
    """An embedding phi: S^2 -> S^2: ``"identity"``, or ``"linear"``: ``phi(z) = Az/|Az|``, A as in the module doc.

    Raises:
        ValueError: for another ``kind``.
    """
    if kind == "identity":
        return _identity
    if kind == "linear":
        generator = torch.Generator().manual_seed(phi_seed)
        singular = torch.diag(torch.tensor(LINEAR_SINGULAR_VALUES, dtype=torch.float64))
        matrix = haar_rotation(generator) @ singular @ haar_rotation(generator)
        return _LinearSphereMap(matrix)
    raise ValueError(f"phi kind={kind!r} must be 'identity' or 'linear'.")


def _identity(z: Tensor) -> Tensor:
    """phi = id."""
    return z


class _LinearSphereMap:
    """``z -> Az/|Az|`` for a fixed invertible A (a callable object, so that it pickles for worker processes)."""

    def __init__(self, matrix: Tensor) -> None:
        self.matrix = matrix

    def __call__(self, z: Tensor) -> Tensor:
        image = z @ self.matrix.T
        return image / image.norm(dim=-1, keepdim=True)


def quadrature_log_partition(embed: Embedding, anchor_embeddings: Tensor, tau: float) -> Tensor:
    """``log N(z) = log ∫ exp(<phi(z), phi(u)>/tau) pi(du)`` by the product Gauss rule :data:`QUADRATURE`."""
    nodes, weights = uniform_sphere_quadrature(*QUADRATURE)
    return learned_log_partition(anchor_embeddings, embed(nodes), tau=tau, support_weights=weights)


def draw_kernel_scores(
    model: VMFUniform,
    embed: Embedding,
    *,
    tau: float,
    n_draws: int,
    n_negatives: int,
    generator: torch.Generator,
    with_kernel_ratio: bool = False,
) -> KernelDraws:
    """Draw R = ``n_draws`` (anchor, positive, k negatives) triples from ``model`` and embed them with phi.

    Drawn in chunks of at most 2^18 negatives, so memory stays O(2^18) whatever k is.
    """
    rows = max(1, _MAX_POINTS_PER_CHUNK // n_negatives)
    parts: list[tuple[Tensor, Tensor, Tensor, Tensor | None]] = []
    for start in range(0, n_draws, rows):
        size = min(rows, n_draws - start)
        z = model.sample_anchors(size, generator)
        y = model.sample_positives(z, generator)
        xi = model.sample_negatives((size, n_negatives), generator)
        ez = embed(z)
        positive = (ez * embed(y)).sum(dim=-1)
        negative = torch.einsum("rp,rkp->rk", ez, embed(xi.reshape(-1, DIM)).reshape(size, n_negatives, -1))
        kernel = model.log_positive_density(z[:, None, :], xi) if with_kernel_ratio else None
        parts.append((positive, negative, quadrature_log_partition(embed, ez, tau), kernel))
    kernels = [part[3] for part in parts]
    return KernelDraws(
        positive_scores=torch.cat([part[0] for part in parts]),
        negative_scores=torch.cat([part[1] for part in parts]),
        log_partition=torch.cat([part[2] for part in parts]),
        log_kernel_ratio=None if not with_kernel_ratio else torch.cat([k for k in kernels if k is not None]),
    )


def summarise_draws(prefix: str, values: Tensor) -> dict[str, float]:
    """Mean, its standard error, the sd and the sd's standard error of per-draw values, keyed by ``prefix``.

    ``se(sd) = sqrt((m4 - sd^4)/R) / (2 sd)`` (delta method with the sample fourth central moment m4).
    """
    v = values.detach().to(torch.float64).numpy()
    n = v.size
    sd = float(v.std(ddof=1))
    m4 = float(np.mean((v - v.mean()) ** 4))
    return {
        f"{prefix}_mean": float(v.mean()),
        f"{prefix}_se": sd / math.sqrt(n),
        f"{prefix}_sd": sd,
        f"{prefix}_sd_se": math.sqrt(max(m4 - sd**4, 0.0) / n) / (2.0 * sd) if sd > 0 else 0.0,
    }


def measure_cross_entropy_gap(cell: Cell) -> dict[str, float]:
    """One C7 cell: both forms' gap estimates (and the plain differences) from the same draws."""
    p = cell.params
    model = VMFUniform(int(p["dim"]), float(p["kappa"]))
    embed = sphere_embedding(str(p["phi"]), int(p["phi_seed"]))
    generator = torch.Generator().manual_seed(cell.seed)
    tau = float(p["tau"])
    draws = draw_kernel_scores(
        model, embed, tau=tau, n_draws=int(p["n_draws"]), n_negatives=int(p["k"]), generator=generator
    )
    result: dict[str, float] = {}
    for form in FORM_ORDER:
        gap = integrated_cross_entropy_gap(
            draws.positive_scores, draws.negative_scores, draws.log_partition, tau=tau, form=form
        )
        result |= summarise_draws(form, gap.estimate)
        result |= summarise_draws(f"{form}_naive", gap.naive)
    return result


def gap_coefficients_by_quadrature(model: VMFUniform, embed: Embedding, tau: float) -> GapCoefficients:
    """Leading-order constants a (gap ~ a/k) of :func:`crl.metrics.risk.asymptotic_gap_coefficients` for phi.

    Anchors and support both on product Gauss rules of S^2; dM/dpi from the model.
    """
    anchors, anchor_weights = uniform_sphere_quadrature(*ANCHOR_QUADRATURE)
    nodes, weights = uniform_sphere_quadrature(*QUADRATURE)
    log_q = learned_log_density_ratio(embed(anchors), embed(nodes), tau=tau, support_weights=weights)
    log_m = model.log_positive_density(anchors[:, None, :], nodes[None, :, :])
    return asymptotic_gap_coefficients(log_q, log_m, support_weights=weights, anchor_weights=anchor_weights)


@dataclass(frozen=True)
class SeriesFit:
    """A measured series (one phi, tau, form) reduced to the rule's parts."""

    label: str
    ks: tuple[int, ...]
    values: tuple[float, ...]
    ses: tuple[float, ...]
    fit: SlopeFit
    one_sign: bool


def fit_series(
    label: str,
    ks: Sequence[int],
    values: Sequence[float],
    ses: Sequence[float],
    rng: np.random.Generator,
    *,
    ci: float = 0.95,
) -> SeriesFit:
    """Fit the log-log slope of |value| vs k (parametric bootstrap with the MC standard errors, CI level ``ci``).

    ``one_sign`` says whether every value has the same sign and ``|value| > 2 se`` (else |value| is not
    resolved and the rule is INCONCLUSIVE).
    """
    v, s = np.asarray(values, dtype=np.float64), np.asarray(ses, dtype=np.float64)
    one_sign = bool((np.all(v > 0) or np.all(v < 0)) and np.all(np.abs(v) > 2.0 * s))
    magnitude = np.maximum(np.abs(v), 1e-300)
    fit = loglog_slope(np.asarray(ks, dtype=np.float64), magnitude, np.maximum(s, 1e-300), rng=rng, ci=ci)
    return SeriesFit(label, tuple(ks), tuple(map(float, v)), tuple(map(float, s)), fit, one_sign)


def slope_verdict(series: SeriesFit, target: float) -> Verdict:
    """The slope part of the rule: CI contains ``target``, and the sign is resolved (else INCONCLUSIVE)."""
    verdict = verdict_contains(Statistic.from_slope(series.label, series.fit), target)
    return verdict if series.one_sign or verdict == Verdict.FAIL else Verdict.INCONCLUSIVE


def series_points(series: SeriesFit, *, with_fit: bool = True) -> Points:
    """|value| with +-1.96 se bars (clipped above 0) as a figure series."""
    v = np.abs(np.asarray(series.values))
    err = 1.96 * np.asarray(series.ses)
    low = np.maximum(v - err, v * 1e-3)
    return points(series.label, series.ks, v, y_low=low, y_high=v + err, fit=series.fit if with_fit else None)


Results = Mapping[tuple[str, float, int], Mapping[str, Any]]
"""Cell results keyed by (phi kind, tau, k)."""


def run_series(
    ctx: ClaimContext, plan: Plan, phi_seed: int, measure: Callable[[Cell], dict[str, float]]
) -> tuple[Results, list[SeriesFit]]:
    """Measure every (phi, tau, k) cell of SERIES x plan.ks (C7 and C8) and fit each (series, form)'s slope.

    Each slope CI is at the claim's error rate shared by its len(SERIES) * len(FORM_ORDER) series (Bonferroni).
    """
    cells = [
        Cell(params, ctx.seed_for(params))
        for kind, tau in SERIES
        for k in plan.ks
        for params in [cell_params(kind, tau, k, plan.n_draws, phi_seed)]
    ]
    records = ctx.run_cells(cells, measure)
    results = {
        (str(r.cell.params["phi"]), float(r.cell.params["tau"]), int(r.cell.params["k"])): r.result
        for r in records
    }
    fits = [
        fit_series(
            series_label(form, kind, tau),
            plan.ks,
            [results[(kind, tau, k)][f"{form}_mean"] for k in plan.ks],
            [results[(kind, tau, k)][f"{form}_se"] for k in plan.ks],
            ctx.rng("slope", kind, tau, form),
            ci=bonferroni_level(len(SERIES) * len(FORM_ORDER), ctx.level),
        )
        for kind, tau in SERIES
        for form in FORM_ORDER
    ]
    return results, fits


class CrossEntropyGapClaim(Claim):
    """C7 ([B] Prop. 1): ``∫ CE[M||Q] dpi - R(phi; k, tau) = O(1/k)``, inside Prop. 1's two bounds."""

    id = "C7"
    title = "O(1/k) to the integrated cross-entropy"
    source = "[B] Prop. 1"
    statement = (
        "For every phi onto the unit sphere, k and tau: -log(1 + e^{2/tau}/k) <= ∫CE[M||Q] dpi - R(phi;k,tau) "
        "<= (e^{2/tau}-1)^2/(8k), with R = E[infonce] - log k; for DCL (R~ = E[dcl] - log k) the lower bound is "
        "0. So the risk approaches the integrated cross-entropy CE = KL(M||Q) - KL(M||pi) at rate 1/k."
    )
    rule = (
        "THEORY.md section 7, C7: slope -1; inside Prop. 1's two bounds for every k. crl's fixed criterion: for "
        "each series (phi = identity, tau = 1; phi = random linear map, tau = 0.5; vMF(kappa = 2) on S^2) and "
        "each form (InfoNCE, DCL), the bootstrap CI of the log-log slope of |∫CE dpi - R| against k, at level "
        "the claim's error rate / 4 each (Bonferroni over the four series), "
        "(k = 128..2048 quick, ..8192 standard, ..16384 full; doubling) contains -1, and the gap has one sign at "
        "every k with |gap| > 2 se (else INCONCLUSIVE); and no point lies above (e^{2/tau}-1)^2/(8k) or below "
        "-log(1 + e^{2/tau}/k) (InfoNCE) / 0 (DCL) by more than the Bonferroni multiple (the claim's family-wise "
        "level over all points and both sides) of its Monte-Carlo standard error."
    )
    control_description = (
        "A genuine alternative with another rate: the Monte-Carlo fluctuation (sd over draws) of one draw's "
        "plain gap CE_r - (dcl_r - log k), phi = identity, tau = 1, which is O(k^-1/2); the same rule (slope CI "
        "contains -1 and the Prop. 1 bounds hold at every k) must FAIL."
    )

    def run(self, ctx: ClaimContext) -> ClaimResult:
        """Measure every (phi, tau, k) cell, fit the slopes, count bound violations, judge claim and control."""
        plan = PLANS[ctx.fidelity]
        phi_seed = ctx.seed_for("phi")
        results, fits = run_series(ctx, plan, phi_seed, measure_cross_entropy_gap)
        violations = _bound_violations(results, plan.ks, alpha=1 - ctx.level)
        slope_verdicts = [slope_verdict(series, -1.0) for series in fits]
        verdict = combine_verdicts(*slope_verdicts, verdict_no_violations(violations))
        statistics = [Statistic.from_slope(f"slope of |∫CE dpi - R| vs k, {s.label}", s.fit) for s in fits]
        statistics.append(Statistic.from_violations("Prop. 1 bound violations beyond MC error", violations))
        control = self._control(ctx, results, plan.ks)
        coefficients = {
            (kind, tau): gap_coefficients_by_quadrature(
                VMFUniform(DIM, KAPPA), sphere_embedding(kind, phi_seed), tau
            )
            for kind, tau in SERIES
        }
        return self.result(
            ctx,
            verdict=verdict,
            statistics=statistics,
            control_verdict=control[0],
            control_statistics=control[1],
            figures=[_gap_figure(fits, plan.ks, coefficients), control[2]],
            table=_table(results, plan.ks, coefficients),
            notes=(
                "Gaps estimated per draw with the control variate Wbar/N - 1 (exact mean), so their relative "
                "error does not grow with k; log N(z) by a 48 x 96 product Gauss rule on S^2. Theory curves: "
                "crl's second-order constants a (gap ~ a/k), by quadrature; not part of the verdict. History of the "
                "level: the first rule judged each series' 95% CI alone; a standard run of C8 (seed 0) then missed "
                "-1 in one of four series by 2.6 se, and seeds 1-3 passed. Four separate 95% CIs fail a true claim "
                "in ~19% of runs, and seven claims at 95% each fail ~30% of runs, so the levels became family-wise: "
                "95% over the shipped claims, Bonferroni within each claim's series."
            ),
        )

    def _control(
        self,
        ctx: ClaimContext,
        results: Mapping[tuple[str, float, int], Mapping[str, Any]],
        ks: Sequence[int],
    ) -> tuple[Verdict, list[Statistic], FigureSpec]:
        """The rule applied to the O(k^-1/2) fluctuation sd of a single draw's plain DCL gap."""
        kind, tau = _CONTROL_SERIES
        series = fit_series(
            f"sd of one draw's plain gap (DCL, phi = {kind}, tau = {tau:g})",
            ks,
            [results[(kind, tau, k)]["dcl_naive_sd"] for k in ks],
            [results[(kind, tau, k)]["dcl_naive_sd_se"] for k in ks],
            ctx.rng("control-slope"),
        )
        bounds = [cross_entropy_gap_bounds(k, tau, "dcl") for k in ks]
        violations = bound_violations(
            [*series.values, *(-v for v in series.values)],
            [*(b[1] for b in bounds), *(-b[0] for b in bounds)],
            [*series.ses, *series.ses],
        )
        verdict = combine_verdicts(slope_verdict(series, -1.0), verdict_no_violations(violations))
        stats = [
            Statistic.from_slope("slope of the fluctuation sd vs k", series.fit),
            Statistic.from_violations("Prop. 1 bound violations beyond MC error", violations),
        ]
        figure = loglog_figure(
            "control",
            "C7 control: fluctuation sd of one draw, O(k^-1/2)",
            "k (negatives)",
            "sd over draws",
            series_points(series),
            theory_slope=-1.0,
            bounds=[curve(f"Prop. 1 upper bound, tau = {tau:g}", ks, [b[1] for b in bounds])],
        )
        return verdict, stats, figure


def cell_params(kind: str, tau: float, k: int, n_draws: int, phi_seed: int) -> dict[str, Any]:
    """Everything a C7 or C8 cell's result depends on."""
    return {
        "phi": kind,
        "tau": tau,
        "k": k,
        "n_draws": n_draws,
        "kappa": KAPPA,
        "dim": DIM,
        "phi_seed": phi_seed,
    }


def series_label(form: str, kind: str, tau: float) -> str:
    """Series label, e.g. ``"DCL, phi = identity, tau = 1"``."""
    name = {"dcl": "DCL", "infonce": "InfoNCE"}[form]
    return f"{name}, phi = {kind}, tau = {tau:g}"


def _bound_violations(
    results: Mapping[tuple[str, float, int], Mapping[str, Any]], ks: Sequence[int], *, alpha: float
) -> ViolationCount:
    """Violations of Prop. 1's two bounds by every (series, form, k) point, both sides in one family."""
    values, limits, ses = [], [], []
    for kind, tau in SERIES:
        for form in FORM_ORDER:
            for k in ks:
                lower, upper = cross_entropy_gap_bounds(k, tau, form)
                mean, se = results[(kind, tau, k)][f"{form}_mean"], results[(kind, tau, k)][f"{form}_se"]
                values += [mean, -mean]
                limits += [upper, -lower]
                ses += [se, se]
    return bound_violations(values, limits, ses, alpha=alpha)


def _gap_figure(
    fits: Sequence[SeriesFit], ks: Sequence[int], coefficients: Mapping[tuple[str, float], GapCoefficients]
) -> FigureSpec:
    """|gap| vs k for every series, Prop. 1's upper bounds and crl's a/k theory curves."""
    curves: list[Curve] = []
    for kind, tau in SERIES:
        curves.append(
            curve(
                f"Prop. 1 upper bound, tau = {tau:g}",
                ks,
                [cross_entropy_gap_bounds(k, tau, "dcl")[1] for k in ks],
            )
        )
        coef = coefficients[(kind, tau)]
        for form, a in (("dcl", coef.cross_entropy_dcl), ("infonce", coef.cross_entropy_infonce)):
            curves.append(
                curve(f"a/k, {series_label(form, kind, tau)}", ks, [abs(a) / k for k in ks], kind="theory")
            )
    return loglog_figure(
        "gap",
        "C7: |∫CE[M||Q] dpi - R(phi; k, tau)| vs k",
        "k (negatives)",
        "|∫CE dpi - R|",
        *(series_points(series) for series in fits),
        theory_slope=-1.0,
        bounds=curves,
    )


def _table(
    results: Mapping[tuple[str, float, int], Mapping[str, Any]],
    ks: Sequence[int],
    coefficients: Mapping[tuple[str, float], GapCoefficients],
) -> list[dict[str, Any]]:
    """One row per (phi, tau, form, k): estimate, se, plain estimate, bounds and k * gap against a."""
    rows = []
    for kind, tau in SERIES:
        coef = coefficients[(kind, tau)]
        for form in FORM_ORDER:
            a = coef.cross_entropy_dcl if form == "dcl" else coef.cross_entropy_infonce
            for k in ks:
                r = results[(kind, tau, k)]
                lower, upper = cross_entropy_gap_bounds(k, tau, form)
                rows.append(
                    {
                        "phi": kind,
                        "tau": tau,
                        "form": form,
                        "k": k,
                        "gap": r[f"{form}_mean"],
                        "se": r[f"{form}_se"],
                        "plain_gap": r[f"{form}_naive_mean"],
                        "plain_se": r[f"{form}_naive_se"],
                        "lower_bound": lower,
                        "upper_bound": upper,
                        "k_times_gap": k * r[f"{form}_mean"],
                        "leading_constant_a": a,
                    }
                )
    return rows


CLAIM = CrossEntropyGapClaim()
