"""C4: with shared negatives (SSCRL) the empirical risk fluctuates like 1/sqrt(m) whatever n ([A] Thm 4.6).

Pre-registered in docs/claims/C4.md (docs/theory.md section 7, C4).

Measured: the sd over negative draws of ``L_hat_m(s)`` with the n pairs fixed (:func:`block_values`:
a block draws n pairs once and R sets of negatives; its sample sd / c4(R) estimates ``sd(L_hat_m | pairs)``;
independent blocks are the replicates of :func:`crl.stats.rate_fit`). Model ``AsymmetricSphere(3, kappa=1,
anchor_kappa=10, negatives = positives' marginal)`` (non-uniform anchors), tau = 0.5, ``s(x, y) = 0.25 <x, y>``.

Why these slopes (first order in the negatives, pairs fixed; ``e_i(y') = W(x_i, y')/Z_s(x_i) - 1``,
``W = exp(s/tau)``): SSCRL ``Var = tau^2 Var_{y'}((1/n) sum_i e_i(y'))/m -> C/m`` with
``C = tau^2 Var_{y'}(E_x W(x, y')/Z_s(x))`` > 0 for non-uniform anchors, so its sd falls like m^-1/2 and is flat
in n; SCRL ``Var = (1/n^2) sum_i Var(ell_i | pair i) ~ B/(n m)``, ``B = tau^2 E_x Var_{y'}(W/Z_s)``, so at fixed m
its sd falls like n^-1/2. Three parts, each a rate by the misfit protocol judged by equivalence (band +-0.1):

1. SSCRL, sd vs m (n = 1024, m in {2, ..., 32}): rate in [-0.6, -0.4];
2. SSCRL, sd vs n (m = 2, n in {16, ..., 256}): rate in [-0.1, 0.1] (flat);
3. SCRL, sd vs n (m = 2, n in {16, ..., 256}): rate in [-0.6, -0.4].

Negative control (the pitfall of docs/theory.md section 6.1): uniform anchors, ``VMFUniform(3, kappa=1)``, same
rotation-invariant score. Then ``E_x W(x, y')/Z = 1`` for every y', C = 0, and the SSCRL variance is
``B/(n m) + D/m^2`` with D = ``tau^2 E K^2 / 2`` (K the anchors' kernel ``E_x e(x, y) e(x, y')``, the degenerate
second-order term of the shared negatives): at n = 1024 and m <= 32 the D/m^2 term dominates, the sd falls
faster than m^-1/2 and part 1 must FAIL (part 2 moves too: the shared fluctuation now averages over anchors).

The estimator (:func:`block_values`), the fluctuation of ``L_hat_m(s)`` over negative draws with the n pairs
held fixed: one *block* draws n pairs (x_i, y_i) once and then R independent sets of negatives, and returns
the R values of

    ``L_hat_m(s) = (1/n) sum_i tau log((1/m) sum_j exp((s(x_i, y'_ij) - s(x_i, y_i))/tau))``

(GCL through :func:`crl.objectives.contrastive_loss_from_scores`), with negatives in one of [A]'s regimes:
``"shared"`` (SSCRL: one draw of m negatives for all anchors, y'_ij = y'_j) or ``"independent"`` (SCRL: m fresh
negatives per anchor). The sample sd of the R values, divided by Student's c4(R), estimates the conditional sd
``sd(L_hat_m | pairs)`` of docs/theory.md section 7, C4; independent blocks (fresh pairs each) are its
replicates, so a bootstrap over blocks also carries the variation of that sd from one set of pairs to another.
"""

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from crl._validate import check_count, check_tau
from crl._vocab import REGIME_LABELS, Regime
from crl.claims.context import ClaimContext, Fidelity
from crl.claims.figure_spec import FigureSpec, loglog_figure, points
from crl.claims.result import Claim, ClaimResult
from crl.claims.verdict import Statistic, Verdict, combine_verdicts, verdict_rate
from crl.objectives import contrastive_loss_from_scores
from crl.risk import FeatureScore
from crl.stats import RateFit, rate_fit
from crl.sweep import Cell
from crl.synthetic import AsymmetricSphere, VMFUniform
from crl.synthetic.base import GroundTruth

_MAX_ELEMENTS = 4_000_000
"""Largest (replicates, n, m) score tensor built at once."""


def block_values(
    score: FeatureScore,
    truth: GroundTruth,
    tau: float,
    *,
    n: int,
    m: int,
    replicates: int,
    regime: str,
    generator: torch.Generator,
) -> Tensor:
    """R = ``replicates`` values of ``L_hat_m(s)`` on one fixed set of n pairs, negatives redrawn each time.

    Returns:
        float64 (R,) tensor.
    """
    t = check_tau(tau)
    check_count("n", n, 1)
    check_count("m", m, 1)
    check_count("replicates", replicates, 2)
    x, y = truth.sample(n, generator)
    positive = score(x, y)
    features = score.features(x)
    values = torch.empty(replicates, dtype=torch.float64)
    step = max(1, _MAX_ELEMENTS // (n * m))
    for start in range(0, replicates, step):
        count = min(replicates, start + step) - start
        scores = _negative_scores(score, features, truth, (count, n, m), regime, generator)
        loss = contrastive_loss_from_scores(
            positive.repeat(count), scores.reshape(count * n, m), tau=t, form="gcl", reduction="none"
        )
        values[start : start + count] = loss.reshape(count, n).mean(dim=1)
    return values


def _negative_scores(
    score: FeatureScore,
    features: Tensor,
    truth: GroundTruth,
    shape: tuple[int, int, int],
    regime: str,
    generator: torch.Generator,
) -> Tensor:
    """(R, n, m) scores ``s(x_i, y'_rij) = <f(x_i), y'> - (c/2)|y'|^2`` of R fresh sets of negatives: one set of m
    per replicate for all anchors (``"shared"``) or m per anchor and replicate (``"independent"``)."""
    count, n, m = shape
    if regime == "shared":
        negatives = truth.sample_negatives((count, m), generator)
        scores = torch.matmul(features, negatives.transpose(1, 2))
        squares = negatives.square().sum(dim=-1)[:, None, :]
    else:
        negatives = truth.sample_negatives((count, n, m), generator)
        scores = torch.einsum("id,rijd->rij", features, negatives)
        squares = negatives.square().sum(dim=-1)
    return scores if score.curvature == 0.0 else scores - 0.5 * score.curvature * squares


def c4_factor(replicates: int) -> float:
    """Student's ``c4(R) = sqrt(2/(R-1)) Gamma(R/2)/Gamma((R-1)/2)``: ``E[sample sd] = c4 sd`` for normal data."""
    r = check_count("replicates", replicates, 2)
    return math.sqrt(2.0 / (r - 1)) * math.exp(math.lgamma(r / 2.0) - math.lgamma((r - 1) / 2.0))


def block_sd(values: Tensor) -> float:
    """The bias-corrected sample sd ``s / c4(R)`` of one block's R values of ``L_hat_m``."""
    return float(values.std(unbiased=True)) / c4_factor(int(values.numel()))


DIM = 3
TAU = 0.5
BETA = 0.25
KAPPA = 1.0
ANCHOR_KAPPA = 10.0
M_GRID = (2, 4, 8, 16, 32)
N_FOR_M = 1024
N_GRID = (16, 32, 64, 128, 256)
M_FOR_N = 2
DELTA = 0.1


SERIES: dict[str, tuple[Regime, str, float]] = {
    "sscrl_m": ("shared", "m", -0.5),
    "sscrl_n": ("shared", "n", 0.0),
    "scrl_n": ("independent", "n", -0.5),
}
"""Part -> (regime, swept variable, target rate). A part's key is in its cells' parameters, from which their
seeds derive (``ctx.seed_for(params)``): a random-stream name, displayed through :data:`LABELS`."""
LABELS = {"sscrl_m": "SSCRL sd vs m", "sscrl_n": "SSCRL sd vs n", "scrl_n": "SCRL sd vs n"}

BLOCKS = {Fidelity.QUICK: 20, Fidelity.STANDARD: 60, Fidelity.FULL: 100}
"""K, the blocks (independent sets of n pairs) per grid point."""
REPLICATES = {Fidelity.QUICK: 40, Fidelity.STANDARD: 60, Fidelity.FULL: 100}
"""R, the negative draws per block."""
BLOCKS_PER_CELL = 10


def model(arm: str) -> GroundTruth:
    """The claim's model (non-uniform anchors) or the control's (uniform anchors: docs/theory.md 6.1's pitfall)."""
    if arm == "claim":
        return AsymmetricSphere(DIM, kappa=KAPPA, anchor_kappa=ANCHOR_KAPPA, negative_law="marginal")
    return VMFUniform(DIM, KAPPA)


def fixed_score() -> FeatureScore:
    """``s(x, y) = BETA <x, y>``: bounded and rotation invariant."""
    return FeatureScore(lambda x: BETA * x)


def grid_point(series: str, x: int) -> tuple[int, int]:
    """(n, m) of a series' grid point x."""
    return (N_FOR_M, x) if SERIES[series][1] == "m" else (x, M_FOR_N)


def fluctuation_cell(cell: Cell) -> dict[str, Any]:
    """``blocks`` block sds ``sd(L_hat_m | pairs)`` at one grid point of one series and arm."""
    p = cell.params
    generator = torch.Generator().manual_seed(cell.seed)
    n, m = grid_point(str(p["series"]), int(p["x"]))
    regime = SERIES[str(p["series"])][0]
    truth, score = model(str(p["arm"])), fixed_score()
    sds = [
        block_sd(
            block_values(
                score,
                truth,
                TAU,
                n=n,
                m=m,
                replicates=int(p["replicates"]),
                regime=regime,
                generator=generator,
            )
        )
        for _ in range(int(p["blocks"]))
    ]
    return {"sd": sds}


def grid_of(series: str) -> tuple[int, ...]:
    """The swept values of a series."""
    return M_GRID if SERIES[series][1] == "m" else N_GRID


class SscrlFluctuation(Claim):
    """C4 (module docstring): sd of L_hat_m over negatives with pairs fixed, in m and n, and the uniform control."""

    id: ClassVar[str] = "C4"
    title: ClassVar[str] = "SSCRL shared-negative fluctuation O(1/sqrt m)"
    source: ClassVar[str] = "[A] Thm 4.6"
    evidence: ClassVar[str] = (
        "[A] Thm 4.6: SSCRL's shared negatives make the risk fluctuate by O(1/sqrt m) whatever n; SCRL's "
        "fluctuation is averaged over anchors"
    )
    parts: ClassVar[int] = 3
    statement: ClassVar[str] = (
        "With one set of m negatives shared by all anchors (SSCRL), the empirical risk of a fixed score "
        "fluctuates over negative draws by O(1/sqrt m) whatever n, while with independent negatives per anchor "
        "(SCRL) the negatives' fluctuation is averaged over anchors: sqrt(B/(nm))."
    )
    rule: ClassVar[str] = (
        "docs/theory.md section 7, C4: sd over negative draws of L_hat_m(s) with the n pairs fixed. Fixed by crl:"
        " AsymmetricSphere(3, kappa=1, anchor_kappa=10, negatives = positives' marginal), s = 0.25 <x,y>, tau = "
        "0.5; per grid point K blocks (fresh pairs each) of R negative draws (K, R = 20, 40 quick; 60, 60 "
        "standard; 100, 100 full), each block's sd = sample sd / c4(R). Three parts, each the rate of the mean "
        "block sd by crl.stats.rate_fit (power law; if its misfit is material and significant (chi^2 at alpha "
        "0.05, a residual above 5% beyond t se), the two-term model a x^r + b x^(r-1); if that misfits too, "
        "INCONCLUSIVE), CI by resampling blocks (2000 resamples): (1) SSCRL vs m at n = 1024, m in {2, 4, 8, 16, "
        "32}: PASS if the CI lies inside [-0.6, -0.4]; (2) SSCRL vs n at m = 2, n in {16, 32, 64, 128, 256}: PASS"
        " if the CI lies inside [-0.1, 0.1]; (3) SCRL vs n at m = 2, same n: PASS if the CI lies inside [-0.6, "
        "-0.4]. Each part FAILs if its CI is disjoint from its band and is INCONCLUSIVE otherwise; the claim "
        "PASSes if all three PASS, FAILs if any FAILs, else is INCONCLUSIVE."
    )
    control_description: ClassVar[str] = (
        "The pitfall of docs/theory.md section 6.1: the same three parts with uniform anchors (VMFUniform(3, "
        "kappa=1)) and the same rotation-invariant score, where the shared 1/sqrt(m) fluctuation cancels "
        "(E_x W(x,y')/Z = 1): the SSCRL variance is B/(nm) + D/m^2, so part (1) must FAIL."
    )

    def run(self, ctx: ClaimContext) -> ClaimResult:
        """Compute the three series in both arms, fit their rates and judge claim and control."""
        records = ctx.run_cells(self._cells(ctx), fluctuation_cell)
        pooled: dict[tuple[str, str, int], list[float]] = {}
        for record in records:
            p = record.cell.params
            pooled.setdefault((str(p["arm"]), str(p["series"]), int(p["x"])), []).extend(record.result["sd"])
        fits: dict[tuple[str, str], RateFit] = {}
        judged: dict[str, list[tuple[Verdict, str]]] = {"claim": [], "control": []}
        for arm in ("claim", "control"):
            for series in SERIES:
                sds = [np.asarray(pooled[(arm, series, x)]) for x in grid_of(series)]
                fit, verdict, reason = judge_series(series, sds, ctx.rng("rate", arm, series), ctx.level)
                fits[(arm, series)] = fit
                judged[arm].append((verdict, f"{LABELS[series]}: {reason}" if reason else ""))
        table = _table(pooled)
        return self.result(
            ctx,
            verdict=combine_verdicts(*(v for v, _ in judged["claim"])),
            statistics=[_statistic("claim", s, fits) for s in SERIES],
            control_verdict=combine_verdicts(*(v for v, _ in judged["control"])),
            control_statistics=[_statistic("control", s, fits) for s in SERIES],
            figures=[_figure(table, fits, "m"), _figure(table, fits, "n")],
            table=table,
            notes=(
                f"Per grid point {BLOCKS[ctx.fidelity]} blocks of fixed pairs x {REPLICATES[ctx.fidelity]} "
                "negative draws. Part verdicts (claim): "
                + ", ".join(f"{LABELS[s]} {v}" for s, (v, _) in zip(SERIES, judged["claim"], strict=True))
                + "; (control): "
                + ", ".join(f"{LABELS[s]} {v}" for s, (v, _) in zip(SERIES, judged["control"], strict=True))
                + "."
            ),
            reasons=[r for v, r in judged["claim"] if v is Verdict.INCONCLUSIVE and r],
            control_reasons=[r for v, r in judged["control"] if v is Verdict.INCONCLUSIVE and r],
        )

    @staticmethod
    def _cells(ctx: ClaimContext) -> list[Cell]:
        """One cell per (arm, series, grid point, chunk of blocks), each with its own derived seed."""
        blocks, replicates = BLOCKS[ctx.fidelity], REPLICATES[ctx.fidelity]
        cells = []
        for arm in ("claim", "control"):
            for series in SERIES:
                for x in grid_of(series):
                    for chunk, start in enumerate(range(0, blocks, BLOCKS_PER_CELL)):
                        params = {
                            "arm": arm,
                            "series": series,
                            "x": x,
                            "chunk": chunk,
                            "blocks": min(BLOCKS_PER_CELL, blocks - start),
                            "replicates": replicates,
                        }
                        cells.append(Cell(params, ctx.seed_for(params)))
        return cells


def judge_series(
    series: str, sds: Sequence[np.ndarray], rng: np.random.Generator, level: float
) -> tuple[RateFit, Verdict, str]:
    """One part's rule (module docstring) on one arm: the rate of the mean block sd over the series' grid by
    :func:`crl.stats.rate_fit`, its CI by resampling blocks within each grid point, judged by equivalence to the
    series' target +- DELTA.

    Args:
        series: a key of :data:`SERIES`.
        sds: per grid point of the series, the block sds (the independent replicates).
        rng: the bootstrap's generator.
        level: the per-part confidence level.

    Returns:
        The fit, its verdict and the reason (``""`` unless INCONCLUSIVE).
    """
    fit = rate_fit(list(grid_of(series)), replicates=list(sds), rng=rng, ci=level)
    verdict, reason = verdict_rate(fit, SERIES[series][2], DELTA)
    return fit, verdict, reason


def _statistic(arm: str, series: str, fits: dict[tuple[str, str], RateFit]) -> Statistic:
    """The rate of one series as a statistic, named with its arm and band."""
    target = SERIES[series][2]
    band = f"band [{target - DELTA:g}, {target + DELTA:g}]"
    return Statistic.from_rate(f"{arm}: rate of {LABELS[series]} ({band})", fits[(arm, series)])


def _table(pooled: dict[tuple[str, str, int], list[float]]) -> list[dict[str, Any]]:
    """Tidy rows: the mean block sd at each grid point with its standard error over blocks."""
    rows = []
    for (arm, series, x), values in sorted(pooled.items()):
        sds = np.asarray(values)
        n, m = grid_point(series, x)
        rows.append(
            {
                "arm": arm,
                "series": series,
                "n": n,
                "m": m,
                "blocks": int(sds.size),
                "sd": float(sds.mean()),
                "sd_se": float(sds.std(ddof=1) / np.sqrt(sds.size)),
            }
        )
    return rows


def _figure(table: list[dict[str, Any]], fits: dict[tuple[str, str], RateFit], swept: str) -> FigureSpec:
    """Log-log figure of the sd against m (part 1) or n (parts 2-3), claim and control (bars: 1 se)."""
    series_list = []
    for arm in ("claim", "control"):
        for series in (s for s in SERIES if SERIES[s][1] == swept):
            rows = [r for r in table if r["arm"] == arm and r["series"] == series]
            fit = fits[(arm, series)]
            series_list.append(
                points(
                    f"{arm}: {REGIME_LABELS[SERIES[series][0]]}",
                    [r[swept] for r in rows],
                    [r["sd"] for r in rows],
                    y_err=[r["sd_se"] for r in rows],
                    fit=fit.power if fit.model == "power" else None,
                    control=arm == "control",
                )
            )
    fixed = f"n = {N_FOR_M}" if swept == "m" else f"m = {M_FOR_N}"
    return loglog_figure(
        f"sd_vs_{swept}",
        f"C4: sd(L_hat | pairs) vs {swept} ({fixed}; control: uniform anchors)",
        f"{swept} ({'negatives' if swept == 'm' else 'pairs'})",
        "sd over negative draws",
        *series_list,
        theory_slope=-0.5,
    )


CLAIM = SscrlFluctuation()
