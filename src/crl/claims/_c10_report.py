"""C10's report: the table of gaps per series point, the notes on the fits, and the figures (gap vs k, vs n)."""

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from crl.claims._c10_plan import CONVERGED_GRAD, TAU, Plan
from crl.claims.base import FigureSpec, loglog_figure, points


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
                "random_start_won": int(sum(r["start"] > 0 for r in results)),
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
    wins = sum(r.result["start"] > 0 for r in records)
    return (
        f"{plan.seeds} seeds; n_ref = {plan.n_ref}, N_fresh = {plan.n_fresh}, random starts {plan.random_starts} "
        f"(won {wins} of {len(records)} fits). Largest final gradient entry: claim fits {worst['claim']:.2g}, "
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
