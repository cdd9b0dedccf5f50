"""Whether a fitted rate model misfits its window: material AND significant (docs/theory.md section 7).

A model yhat fitted to J window means ybar_j with p free parameters misfits only when both hold:

- **significant**: the goodness-of-fit statistic rejects at the fixed level :data:`MISFIT_ALPHA` = 0.05 on
  ``dof = J - p >= 2`` degrees of freedom. On the relative scale (residuals ``e_j = ybar_j / yhat_j - 1``,
  covariance Sigma of ``ybar_j / yhat_j``) the statistic is the generalised-least-squares residual of the model
  linearised at its fit, ``chi^2 = e^T (Sigma^-1 - Sigma^-1 J (J^T Sigma^-1 J)^-1 J^T Sigma^-1) e`` with J the
  (J x p) Jacobian of log yhat in the parameters: chi^2 on J - p degrees of freedom under the model whatever
  weights the fit itself used. Sigma is ``diag(se_j^2) / yhat_j^2`` for independent points (replicates per x,
  or known standard errors), or the seeds' sample covariance of ``y_sj / yhat_j`` divided by S when each of S
  seeds holds a value at every x (a seed reuses its pairs across x, so its means are correlated).
  With a covariance estimated from S seeds the statistic is referred to Hotelling's F,
  ``F = chi^2 (S - dof) / (dof (S - 1))`` on (dof, S - dof) degrees of freedom (chi^2 on dof when S <= dof,
  where no F exists). The level is fixed, not the claim's per-part level: the error budget must not
  make misfit harder to detect.
- **material**: some point is off by more than :data:`MATERIAL_TOLERANCE` = 5% beyond its noise,
  ``max_j (|ybar_j / yhat_j - 1| - t se_j / yhat_j) > 0.05``, with t the two-sided 0.95 quantile of Student-t on
  S - 1 degrees of freedom (seeds) or of the normal (independent points).

Values without standard errors are taken as exact: every residual is significant, and the misfit is material
when the largest relative residual exceeds 5%. A residual the noise explains is noise: the model stands and the
exponent's interval, which carries that noise, decides.
"""

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as scipy_stats

MISFIT_ALPHA = 0.05
"""Fixed level of the chi^2 goodness-of-fit test (not the part's level)."""

MATERIAL_TOLERANCE = 0.05
"""Relative residual, beyond t standard errors, above which a misfit is material."""

MIN_MISFIT_DOF = 2
"""Fewest degrees of freedom a model must leave for its residuals to show misfit."""


@dataclass(frozen=True)
class Misfit:
    """The misfit of one fitted model on one window (module docstring).

    Attributes:
        chi2: the goodness-of-fit statistic (``None`` for exact values, without standard errors).
        dof: J - p.
        p_value: the test's p-value (``None`` for exact values).
        max_relative_residual: ``max_j |ybar_j / yhat_j - 1|``.
        material_excess: ``max_j (|ybar_j / yhat_j - 1| - t se_j / yhat_j)``; material when above 5%.
        significant: the test rejects at :data:`MISFIT_ALPHA` (always true for exact values with a residual).
        material: ``material_excess > MATERIAL_TOLERANCE``.
        reference: ``"F"`` (Hotelling, seeds' covariance), ``"chi2"`` or ``"exact"``.
    """

    chi2: float | None
    dof: int
    p_value: float | None
    max_relative_residual: float
    material_excess: float
    significant: bool
    material: bool
    reference: str

    @property
    def misfit(self) -> bool:
        """Material and significant: the model does not describe the window."""
        return self.significant and self.material

    def describe(self) -> str:
        """One clause for a report: chi^2/dof with its p-value, the largest residual and the material excess."""
        test = (
            "values exact (no test)"
            if self.chi2 is None or self.p_value is None
            else f"chi2/dof {self.chi2 / self.dof:.3g} on {self.dof} dof ({self.reference} p = {self.p_value:.2g})"
        )
        return (
            f"{test}, max relative residual {self.max_relative_residual:.3g}, beyond noise "
            f"{self.material_excess:.3g}: {'misfit' if self.misfit else 'fits'}"
        )


def judge_misfit(
    means: ArrayLike,
    fitted: ArrayLike,
    jacobian: ArrayLike,
    *,
    standard_errors: ArrayLike | None = None,
    seed_values: ArrayLike | None = None,
    tolerance: float = MATERIAL_TOLERANCE,
) -> Misfit:
    """Judge a fitted model's misfit on its window (module docstring).

    Everything is computed relative to the fit (residuals ``ybar_j / yhat_j - 1``, errors ``se_j / yhat_j``), so
    the judgement does not depend on the scale of y.

    Args:
        means: the J window means ybar_j.
        fitted: the model's values yhat_j (> 0).
        jacobian: (J, p) derivatives of log yhat_j in the model's p free parameters at the fit; J - p must be at
            least :data:`MIN_MISFIT_DOF`.
        standard_errors: (J,) standard errors of independent means (chi^2, normal quantile).
        seed_values: (S, J) per-seed values whose column means are ``means`` (the seeds' covariance / S,
            Hotelling's F, Student-t on S - 1). Neither: the means are exact.
        tolerance: the materiality margin (the contract's 5%).

    Raises:
        ValueError: on mismatched shapes, fewer than 2 degrees of freedom, fitted values <= 0, both error
            sources given, or a covariance that is not positive definite.
    """
    y = np.asarray(means, dtype=np.float64)
    yhat = np.asarray(fitted, dtype=np.float64)
    if y.ndim != 1 or y.shape != yhat.shape:
        raise ValueError(f"means {y.shape} and fitted {yhat.shape} must be 1-D of one length.")
    design = np.asarray(jacobian, dtype=np.float64)
    if design.ndim != 2 or design.shape[0] != y.size or not np.all(np.isfinite(design)):
        raise ValueError(f"jacobian must be finite of shape ({y.size}, parameters); got {design.shape}.")
    n_parameters = design.shape[1]
    dof = y.size - n_parameters
    if dof < MIN_MISFIT_DOF:
        raise ValueError(
            f"{y.size} points leave {dof} degrees of freedom to a {n_parameters}-parameter model; misfit needs "
            f"at least {MIN_MISFIT_DOF} (at least {n_parameters + MIN_MISFIT_DOF} points)."
        )
    if not np.all(np.isfinite(yhat)) or np.any(yhat <= 0.0):
        raise ValueError("fitted values must be finite and > 0 for relative residuals.")
    if standard_errors is not None and seed_values is not None:
        raise ValueError("pass standard_errors (independent means) or seed_values (paired seeds), not both.")
    residual = y / yhat - 1.0
    relative = np.abs(residual)
    if standard_errors is None and seed_values is None:
        largest = float(relative.max())
        return Misfit(None, dof, None, largest, largest, largest > 0.0, largest > tolerance, "exact")
    seeds: int | None = None
    if seed_values is not None:
        data = np.asarray(seed_values, dtype=np.float64)
        if data.ndim != 2 or data.shape[1] != y.size or data.shape[0] < 2:
            raise ValueError(f"seed_values must be (seeds >= 2, {y.size}); got shape {data.shape}.")
        seeds = data.shape[0]
        sigma = np.atleast_2d(np.cov(data / yhat, rowvar=False)) / seeds
    else:
        se = np.asarray(standard_errors, dtype=np.float64)
        if se.shape != y.shape or not np.all(np.isfinite(se)):
            raise ValueError(f"standard_errors must be finite of shape {y.shape}; got {se.shape}.")
        sigma = np.diag((se / yhat) ** 2)
    try:
        factor = np.linalg.cholesky(sigma)
    except np.linalg.LinAlgError as error:
        raise ValueError(
            "the covariance of the means is not positive definite (no more seeds than window points, or a "
            "point without noise); use more seeds than window points."
        ) from error
    whitened = np.linalg.solve(factor, residual)
    columns = np.linalg.solve(factor, design)
    projected, *_ = np.linalg.lstsq(columns, whitened, rcond=None)
    remainder = whitened - columns @ projected
    chi2 = float(remainder @ remainder)
    if seeds is not None and seeds > dof:
        f_value = chi2 * (seeds - dof) / (dof * (seeds - 1))
        p_value = float(scipy_stats.f.sf(f_value, dof, seeds - dof))
        reference = "F"
    else:
        p_value = float(scipy_stats.chi2.sf(chi2, dof))
        reference = "chi2"
    quantile = (
        float(scipy_stats.t.ppf(1.0 - MISFIT_ALPHA / 2.0, seeds - 1))
        if seeds is not None
        else float(scipy_stats.norm.ppf(1.0 - MISFIT_ALPHA / 2.0))
    )
    excess = float(np.max(relative - quantile * np.sqrt(np.diag(sigma))))
    return Misfit(
        chi2,
        dof,
        p_value,
        float(relative.max()),
        excess,
        p_value < MISFIT_ALPHA,
        excess > tolerance,
        reference,
    )


def power_jacobian(x: ArrayLike) -> np.ndarray:
    """(J, 2) derivatives of log(A x^r) in (log A, r): columns 1 and log x."""
    gx = np.asarray(x, dtype=np.float64)
    return np.column_stack([np.ones_like(gx), np.log(gx)])


def two_term_jacobian(u: ArrayLike, a: float, b: float, exponent: float) -> np.ndarray:
    """(J, 3) derivatives of log(a u^r + b u^(r-1)) = (r - 1) log u + log(a u + b) in (a, b, r)."""
    gu = np.asarray(u, dtype=np.float64)
    inner = a * gu + b
    return np.column_stack([gu / inner, 1.0 / inner, np.log(gu)])


def offset_power_jacobian(x: ArrayLike, a: float, b: float, exponent: float) -> np.ndarray:
    """(J, 3) derivatives of log(a + b x^r) in (a, b, r)."""
    gx = np.asarray(x, dtype=np.float64)
    power = gx**exponent
    fitted = a + b * power
    return np.column_stack([1.0 / fitted, power / fitted, b * power * np.log(gx) / fitted])
