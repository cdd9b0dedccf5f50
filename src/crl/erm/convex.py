"""ERM over a norm ball: ``min L_hat(theta)`` s.t. ``|theta| <= R``, a convex problem solved to a stated KKT tolerance.

Without the ball the ERM need not exist: at small m the sample is separable and ``L_hat -> -inf`` as the scores
grow. The ball (radius R chosen to contain s*) gives bounded scores, as [A] assumes, and a compact feasible set.

Method (float64), from theta = 0:

1. Damped Newton on ``L_hat`` (Armijo backtracking). If it converges inside the ball, the constraint is
   inactive (multiplier lambda = 0).
2. Otherwise (an iterate leaves the ball: the unconstrained minimiser lies outside, does not exist, or Newton
   overshot), the solution is on the sphere ``|theta| = R``: for lambda > 0 let ``theta(lambda)`` minimise the
   strongly convex ``L_hat + (lambda/2)|theta|^2`` (damped Newton, warm started); ``|theta(lambda)|`` decreases in
   lambda, and the root of ``1/R - 1/|theta(lambda)|`` (Newton on lambda, using
   ``d|theta|/d lambda = -theta^T (H + lambda I)^{-1} theta / |theta|``, safeguarded by bisection) is the solution.

The KKT residual reported is the norm of the gradient mapping, ``|theta - P(theta - grad L_hat(theta))|`` with P the
projection onto the ball: 0 exactly at a KKT point of the ball-constrained problem, whatever the multiplier.
A fit whose residual stays above the tolerance, or whose risk is not finite, is returned with ``converged=False``
and its reason: it is recorded and counted, never retried.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from crl.erm.lifted import EmpiricalRisk

KKT_TOLERANCE = 1e-8
"""Default tolerance on the gradient-mapping norm (in units of L_hat, i.e. of tau)."""

_ROUNDING = 1e-24
"""Newton decrements below this are rounding noise: the inner solve stops there."""

_LOCAL = 1e-10
"""Below this Newton decrement the full step is taken without line search: the quadratic model is exact to
rounding there, while differences of risk values (O(1)) are not resolved below about 1e-15."""

_ESCAPE_FACTOR = 1.0
"""Phase 1 gives up once an iterate leaves the ball of radius ``_ESCAPE_FACTOR * R``."""

_SMALLEST_MULTIPLIER = 1e-12
"""Below this lambda the constraint is taken as inactive and Newton at lambda = 0 resumes."""


@dataclass(frozen=True)
class BallFit:
    """The ball-constrained ERM and how well it was solved.

    Attributes:
        theta: the minimiser (p,), float64.
        risk: ``L_hat(theta)``.
        radius: R.
        norm: ``|theta|``.
        active: whether the constraint binds (the solution is on the sphere with lambda > 0).
        multiplier: lambda (0 when inactive).
        kkt_residual: ``|theta - P(theta - grad)|``, the gradient-mapping norm.
        tolerance: the KKT tolerance asked for.
        converged: ``kkt_residual <= tolerance`` and every quantity finite.
        iterations: Newton steps taken in all.
        reason: why the fit did not converge (``""`` when it did).
    """

    theta: Tensor
    risk: float
    radius: float
    norm: float
    active: bool
    multiplier: float
    kkt_residual: float
    tolerance: float
    converged: bool
    iterations: int
    reason: str


def project_ball(theta: Tensor, radius: float) -> Tensor:
    """P(theta): theta if ``|theta| <= R``, else ``R theta/|theta|``."""
    norm = float(theta.norm())
    return theta if norm <= radius else theta * (radius / norm)


def gradient_mapping_norm(theta: Tensor, gradient: Tensor, radius: float) -> float:
    """``|theta - P(theta - gradient)|``: the KKT residual of ``min f`` over the ball of radius R."""
    return float((theta - project_ball(theta - gradient, radius)).norm())


def fit_ball(
    risk: EmpiricalRisk,
    radius: float,
    *,
    tolerance: float = KKT_TOLERANCE,
    max_newton: int = 200,
    max_multiplier: int = 100,
    on_step: Callable[[Tensor], None] | None = None,
    start: Tensor | None = None,
) -> BallFit:
    """``argmin L_hat(theta)`` over ``|theta| <= radius`` by the method of the module docstring.

    Args:
        risk: the empirical risk on its fixed sample.
        radius: R > 0 (choose it to contain s*).
        tolerance: KKT tolerance on the gradient-mapping norm (> 0).
        max_newton: Newton steps per inner solve.
        max_multiplier: steps of the search for lambda.
        on_step: called with every Newton iterate (a copy), in order: the optimisation path (C2 uses it).
        start: a warm start (projected onto the ball), e.g. the fit at the previous point of a series; the problem
            is convex, so it changes the time, not the minimiser beyond the tolerance (default: theta = 0).

    Raises:
        ValueError: if radius or tolerance is not a finite number > 0.
    """
    for name, value in (("radius", radius), ("tolerance", tolerance)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < value < math.inf:
            raise ValueError(f"{name}={value!r} must be a finite number > 0.")
    p = risk.family.n_params
    origin = (
        torch.zeros(p, dtype=torch.float64)
        if start is None
        else project_ball(start.to(torch.float64), radius)
    )
    theta, steps, converged = _newton(
        risk,
        origin,
        0.0,
        tolerance,
        max_newton,
        escape=_ESCAPE_FACTOR * radius,
        on_step=on_step,
    )
    if converged and float(theta.norm()) <= radius:
        return _result(risk, theta, radius, 0.0, tolerance, steps, "")
    theta, lam, more, reason = _on_sphere(
        risk, radius, tolerance, max_newton, max_multiplier, on_step, origin
    )
    return _result(risk, project_ball(theta, radius), radius, lam, tolerance, steps + more, reason)


def _result(
    risk: EmpiricalRisk, theta: Tensor, radius: float, lam: float, tolerance: float, steps: int, reason: str
) -> BallFit:
    """Evaluate the KKT residual at theta and package the fit."""
    derivatives = risk.derivatives(theta, hessian=False)
    residual = gradient_mapping_norm(theta, derivatives.gradient, radius)
    norm = float(theta.norm())
    finite = (
        math.isfinite(derivatives.value) and math.isfinite(residual) and bool(torch.isfinite(theta).all())
    )
    if not finite:
        reason = reason or "non-finite risk or gradient at the solution"
    elif residual > tolerance and not reason:
        reason = f"KKT residual {residual:.3g} > tolerance {tolerance:.3g}"
    return BallFit(
        theta=theta,
        risk=derivatives.value,
        radius=radius,
        norm=norm,
        active=lam > 0.0,
        multiplier=lam,
        kkt_residual=residual,
        tolerance=tolerance,
        converged=finite and residual <= tolerance,
        iterations=steps,
        reason=reason,
    )


def _newton(
    risk: EmpiricalRisk,
    theta: Tensor,
    lam: float,
    tolerance: float,
    max_steps: int,
    escape: float = math.inf,
    on_step: Callable[[Tensor], None] | None = None,
) -> tuple[Tensor, int, bool]:
    """Damped Newton on ``F = L_hat + (lam/2)|theta|^2``; returns (theta, steps, converged).

    Converged: ``|grad F| <= tolerance / 10`` (then the gradient mapping is below the tolerance), or the Newton
    decrement vanished to rounding with ``|grad F| <= tolerance``. Not converged: an iterate left the ball of
    radius ``escape``, the steps ran out, or Newton stalled (e.g. a zero Hessian: m = 1 makes L_hat linear).
    """
    p = theta.numel()
    eye = torch.eye(p, dtype=torch.float64)
    for step in range(max_steps):
        d = risk.derivatives(theta)
        grad = d.gradient + lam * theta
        grad_norm = float(grad.norm())
        if grad_norm <= tolerance / 10.0:
            return theta, step, True
        hess = d.hessian + lam * eye
        direction = _solve(hess, -grad)
        decrement = float(-(grad @ direction))
        if decrement <= _ROUNDING:
            return theta, step, grad_norm <= tolerance
        value = d.value + 0.5 * lam * float(theta @ theta)
        t = 1.0
        while t > 1e-12 and decrement > _LOCAL:
            trial = theta + t * direction
            trial_value = risk.value(trial) + 0.5 * lam * float(trial @ trial)
            if trial_value <= value - 0.25 * t * decrement:
                break
            t *= 0.5
        else:
            if decrement > _LOCAL:
                return theta, step, False
            trial = theta + direction
        theta = trial
        if on_step is not None:
            on_step(theta.clone())
        if float(theta.norm()) > escape:
            return theta, step + 1, False
    return theta, max_steps, False


def _solve(hess: Tensor, rhs: Tensor) -> Tensor:
    """``hess^{-1} rhs`` by Cholesky, with a least-squares fallback for a singular Hessian."""
    factor, info = torch.linalg.cholesky_ex(hess)
    if int(info) == 0:
        return torch.cholesky_solve(rhs[:, None], factor)[:, 0]
    return torch.linalg.lstsq(hess, rhs[:, None]).solution[:, 0]


def _on_sphere(
    risk: EmpiricalRisk,
    radius: float,
    tolerance: float,
    max_newton: int,
    max_multiplier: int,
    on_step: Callable[[Tensor], None] | None,
    origin: Tensor,
) -> tuple[Tensor, float, int, str]:
    """The solution on ``|theta| = R``: the root lambda of ``1/R - 1/|theta(lambda)|`` (module docstring).

    Stops when ``theta(lambda)`` projected onto the ball meets the KKT tolerance. If ``|theta(lambda)| < R`` as
    lambda -> 0 (phase 1 overshot an interior minimiser), Newton at lambda = 0 resumes from there.
    """
    p = risk.family.n_params
    eye = torch.eye(p, dtype=torch.float64)
    theta = origin
    steps = 0
    low, high, lam = 0.0, math.inf, 1.0
    for _ in range(max_multiplier):
        theta, used, _ = _newton(risk, theta, lam, tolerance, max_newton, on_step=on_step)
        steps += used
        norm = float(theta.norm())
        gradient = risk.derivatives(project_ball(theta, radius), hessian=False).gradient
        if (
            norm >= radius * (1.0 - 1e-6)
            and gradient_mapping_norm(project_ball(theta, radius), gradient, radius) <= tolerance
        ):
            return theta, lam, steps, ""
        if norm > radius:
            low = lam
        else:
            high = lam
        if high < _SMALLEST_MULTIPLIER:
            inner, used, _ = _newton(risk, theta, 0.0, tolerance, max_newton, on_step=on_step)
            return inner, 0.0, steps + used, ""
        hess = risk.derivatives(theta).hessian + lam * eye
        slope = float(theta @ _solve(hess, theta)) / norm**3
        candidate = lam + (1.0 / radius - 1.0 / norm) / slope if slope > 0.0 else math.nan
        if math.isfinite(candidate) and low < candidate < high:
            lam = candidate
        else:
            lam = 2.0 * lam if math.isinf(high) else 0.5 * (low + high)
    return theta, lam, steps, f"multiplier search did not converge in {max_multiplier} steps"
