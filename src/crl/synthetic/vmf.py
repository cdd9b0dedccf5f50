"""vMF positives with uniform anchors on S^{d-1} (docs/theory.md section 6.1), and the sphere samplers.

Model ``VMFUniform(d, kappa)``: x ~ pi = uniform(S^{d-1}), y ~ M(x, .) = vMF(x, kappa), p- = uniform (= pi = the
law of y). Against the uniform probability on the sphere, ``p+_x(y) = exp(kappa <x, y>) / C_d(kappa)`` with
``C_d(kappa) = Gamma(d/2) (2/kappa)^{d/2-1} I_{d/2-1}(kappa)``, so

- ``s*(x, y) = tau kappa <x, y> - tau log C_d(kappa)`` (the constant is a g(x); with phi = id, Q = M iff tau = 1/kappa),
- ``L* = -tau (kappa A_d(kappa) - log C_d(kappa))``, ``A_d = I_{d/2}/I_{d/2-1}``,
- ``E* = P[<x,y> > <x,y'>]``: d = 3 gives ``(1 + A_3(kappa))/2``; any d, one adaptive quadrature over
  theta = angle(x, y) of the Beta CDF of <x, y'> (error estimate <= 1e-8 enforced),
- ``dM/dpi (z, z') = exp(kappa <z, z'>)/C_d(kappa)``, ``E|dM/dpi|^2 = C_d(2 kappa)/C_d(kappa)^2``
  (d = 3: kappa coth kappa).
"""

import math
from collections.abc import Sequence

import torch
from scipy import integrate, special
from torch import Tensor

from crl._validate import POSITIVE, check, check_count, check_generator
from crl.synthetic._special import exp_or_inf, log_vmf_normaliser, vmf_mean_resultant_length
from crl.synthetic.base import (
    QUADRATURE_TOLERANCE,
    ExactModel,
    check_dtype,
    check_finite_points,
    check_points,
    check_shape,
)

_QUAD_LIMIT = 400
"""Subintervals allowed to scipy's adaptive quadrature."""

VMF_KAPPA_MAX = 1e10
"""Largest kappa :class:`VMFUniform` accepts: its exact answers (``kappa A_d - log C_d``, ``C_d(2 kappa)/C_d^2``)
lose about log10(kappa) of float64's 16 digits to cancellation, so 1e10 keeps about 6."""

_MAX_REJECTION_ROUNDS = 10_000
"""Rounds of Wood's sampler before giving up; a round accepts about 65% of rows or more at every finite kappa
(measured for d in 2..100), so reaching this means NaN input, never bad luck."""


def sample_uniform_sphere(
    shape: Sequence[int], dim: int, generator: torch.Generator, dtype: torch.dtype = torch.float64
) -> Tensor:
    """Uniform points on S^{dim-1}: standard normals divided by their norm. Shape ``tuple(shape) + (dim,)``.

    ``dim >= 1`` (dim = 1 is S^0 = {-1, +1}); dim = 0 has no unit vectors and is refused.
    """
    gauss = torch.randn(
        (*check_shape(shape), check_count("dim", dim, 1)),
        generator=check_generator(generator),
        dtype=torch.float64,
        device=generator.device,
    )
    return (gauss / gauss.norm(dim=-1, keepdim=True)).to(dtype)


def _sample_symmetric_beta(n: int, dof: int, generator: torch.Generator) -> Tensor:
    """n draws of Beta(dof/2, dof/2) as ``X/(X+Y)`` with X, Y ~ chi2(dof) built from normals."""
    gauss = torch.randn((2, n, dof), generator=generator, dtype=torch.float64, device=generator.device)
    chi2 = gauss.square().sum(dim=-1)
    return chi2[0] / (chi2[0] + chi2[1])


def _sample_vmf_cosine(kappa: Tensor, dim: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Wood's (1994) rejection sampler for w = <mu, y>, y ~ vMF(mu, kappa) on S^{dim-1}; one w per kappa.

    Proposal ``w = (1 - (1+b) z)/(1 - (1-b) z)``, z ~ Beta((d-1)/2, (d-1)/2), accepted when
    ``kappa w + (d-1) log(1 - x0 w) - c >= log u``, ``b = (d-1)/(2 kappa + sqrt(4 kappa^2 + (d-1)^2))``,
    ``x0 = (1-b)/(1+b)``, ``c = kappa x0 + (d-1) log(1 - x0^2)``. Written with ``1 - w = 2bz/(1-(1-b)z)`` and
    ``1 - x0 = 2b/(1+b)`` so that nothing cancels at large kappa.

    Returns:
        ``(w, sqrt(1 - w^2))``, each of kappa's shape (n,), float64.
    """
    n = kappa.shape[0]
    dof = dim - 1
    ratio = 0.5 * dof / kappa
    b = torch.where(
        kappa > dof,
        ratio / (1.0 + torch.sqrt(1.0 + ratio.square())),
        dof / (2.0 * kappa + torch.sqrt(4.0 * kappa.square() + dof * dof)),
    )
    one_minus_x0 = 2.0 * b / (1.0 + b)
    x0 = 1.0 - one_minus_x0
    log_one_minus_x0_sq = torch.log(4.0 * b) - 2.0 * torch.log1p(b)
    w = torch.empty(n, dtype=torch.float64, device=kappa.device)
    root = torch.empty(n, dtype=torch.float64, device=kappa.device)
    pending = torch.arange(n, device=kappa.device)
    one_kappa = n > 0 and bool((kappa == kappa[0]).all())
    for _ in range(_MAX_REJECTION_ROUNDS):
        if pending.numel() == 0:
            return w, root
        # One kappa for every row: the pending rows' constants are any rows' (a view), not a gather.
        rows = slice(pending.numel()) if one_kappa else pending
        b_p, x0_p, k_p = b[rows], x0[rows], kappa[rows]
        z = _sample_symmetric_beta(pending.numel(), dof, generator)
        denominator = 1.0 - (1.0 - b_p) * z
        one_minus_w = 2.0 * b_p * z / denominator
        one_minus_x0_w = one_minus_x0[rows] + x0_p * one_minus_w
        log_accept = k_p * (one_minus_x0[rows] - one_minus_w) + dof * (
            torch.log(one_minus_x0_w) - log_one_minus_x0_sq[rows]
        )
        u = torch.rand(pending.numel(), generator=generator, dtype=torch.float64, device=kappa.device)
        accept = log_accept >= torch.log(u)
        chosen = pending[accept]
        w[chosen] = (1.0 - one_minus_w)[accept]
        root[chosen] = (2.0 * torch.sqrt(b_p * z * (1.0 - z)) / denominator)[accept]
        pending = pending[~accept]
    if pending.numel() == 0:
        return w, root
    raise RuntimeError(
        f"vMF sampler: {pending.numel()} rows still rejected after {_MAX_REJECTION_ROUNDS} rounds; "
        "kappa must be finite and > 0"
    )


def _sample_vmf_cosine_s2(kappa: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """The exact inverse-CDF draw of w = <mu, y>, y ~ vMF(mu, kappa) on S^2 (d = 3); one w per kappa.

    On S^2, w has density ``kappa e^{kappa w} / (2 sinh kappa)`` on [-1, 1], so ``F(w) = (e^{kappa w} -
    e^{-kappa}) / (e^{kappa} - e^{-kappa})`` and, for u ~ U(0, 1], ``t = 1 - w = -log1p((1 - u) expm1(-2 kappa))
    / kappa``: one uniform per draw, no rejection, stable at small kappa (expm1) and large kappa (t = -log(u)/kappa).
    ``sqrt(1 - w^2) = sqrt(t (2 - t))`` keeps its digits where w is near 1.

    Returns:
        ``(w, sqrt(1 - w^2))``, each of kappa's shape (n,), float64.
    """
    u = 1.0 - torch.rand(kappa.shape[0], generator=generator, dtype=torch.float64, device=kappa.device)
    t = (-torch.log1p((1.0 - u) * torch.expm1(-2.0 * kappa)) / kappa).clamp(0.0, 2.0)
    return 1.0 - t, torch.sqrt(t * (2.0 - t))


def _row_kappas(kappa: object, n: int, device: torch.device) -> Tensor:
    """kappa as n float64 concentrations, one per row: from a real number, or from n (or one) real values.

    Raises:
        TypeError: for a bool, a string, or bool or complex values.
        ValueError: for a shape other than (), (1,) and (n,).
    """
    if isinstance(kappa, bool | str | complex) or (
        isinstance(kappa, Tensor) and (kappa.dtype == torch.bool or kappa.is_complex())
    ):
        given = kappa.dtype if isinstance(kappa, Tensor) else type(kappa).__name__
        raise TypeError(f"kappa must be real concentrations (a number or a float tensor), got {given}")
    values = torch.as_tensor(kappa, dtype=torch.float64, device=device)
    if values.shape not in ((), (1,), (n,)):
        raise ValueError(
            f"kappa has shape {tuple(values.shape)}; pass a number or one concentration per row of mean, "
            f"shape ({n},)"
        )
    return values.expand(n).contiguous()


def sample_vmf(
    mean: Tensor, kappa: float | Tensor, generator: torch.Generator, dtype: torch.dtype = torch.float64
) -> Tensor:
    """One draw of vMF(mean_i, kappa_i) on S^{d-1} per row of ``mean``, exactly.

    ``y = w mean + sqrt(1 - w^2) v`` with w from the inverse CDF on S^2 (d = 3, :func:`_sample_vmf_cosine_s2`) or
    Wood's (1994) rejection sampler (any other d), and v uniform on the unit sphere of mean's
    orthogonal complement (a normal vector projected and normalised).

    Args:
        mean: unit mean directions (|mean_i| = 1 within 1e-6), shape (n, d), d >= 2, on the generator's device.
        kappa: finite concentration > 0, a number or a real tensor of shape (n,) (integers are converted to
            float64); the sampler is exact for every finite kappa (kappa = inf, the point mass at mean, is
            refused: use ``mean`` itself).
        generator: the source of randomness.
        dtype: dtype of the result (the draw itself is float64).

    Returns:
        Tensor (n, d) of unit vectors.

    Raises:
        ValueError: for a mean that is not (n, d) unit vectors, or a kappa of the wrong shape or not in (0, inf).
        TypeError: for a bool, string or complex kappa.

    Memory: d = 3 draws one uniform per row plus d normals for the tangent; otherwise each rejection round draws
    2(d-1) normals per pending row for the Beta proposal. Peak memory is about 3 n d float64 numbers.
    """
    check_generator(generator)
    if mean.ndim != 2 or mean.shape[1] < 2:
        raise ValueError(f"mean must have shape (n, d) with d >= 2, got shape {tuple(mean.shape)}")
    n, dim = mean.shape
    mu = mean.to(torch.float64)
    if not bool(torch.isfinite(mu).all()):
        raise ValueError("mean contains NaN/Inf entries; pass finite unit vectors")
    if n > 0 and float((mu.norm(dim=-1) - 1.0).abs().max()) > 1e-6:
        raise ValueError(
            "mean must hold unit vectors (|mean_i| = 1); normalise with mean / mean.norm(dim=-1)"
        )
    kappas = _row_kappas(kappa, n, mu.device)
    bad = ~((kappas > 0) & torch.isfinite(kappas))
    if bool(torch.any(bad)):
        raise ValueError(
            f"kappa must be finite and > 0 everywhere, got kappa={float(kappas[bad][0])}; for kappa = inf "
            "(a point mass) use mean itself"
        )
    w, root = (
        _sample_vmf_cosine_s2(kappas, generator) if dim == 3 else _sample_vmf_cosine(kappas, dim, generator)
    )
    tangent = torch.randn((n, dim), generator=generator, dtype=torch.float64, device=mu.device)
    tangent = tangent - (tangent * mu).sum(dim=-1, keepdim=True) * mu
    tangent = tangent / tangent.norm(dim=-1, keepdim=True)
    y = w[:, None] * mu + root[:, None] * tangent
    return (y / y.norm(dim=-1, keepdim=True)).to(dtype)


def vmf_log_density(mean: Tensor, y: Tensor, kappa: float, log_normaliser: float) -> Tensor:
    """``kappa <mean, y> - log C_d(kappa)``: log vMF density against the uniform probability on the sphere."""
    return kappa * (mean * y).sum(dim=-1) - log_normaliser


def vmf_uniform_optimal_auc(dim: int, kappa: float) -> tuple[float, float]:
    """``E* = P[<x, y> > <x, y'>]`` for y ~ vMF(x, kappa), y' uniform on S^{dim-1}, by adaptive quadrature.

    With theta = angle(x, y) (density ∝ exp(kappa cos theta) sin^{d-2} theta) and ``cos^2(theta'/2)``
    ~ Beta((d-1)/2, (d-1)/2) for the uniform y', ``1 - E* = E_theta[I_{sin^2(theta/2)}((d-1)/2, (d-1)/2)]``
    (I the regularised incomplete Beta). scipy's QUADPACK integrates the smooth integrand on [0, pi],
    split at the mode and a few widths around it.

    Returns:
        ``(E*, error estimate)``.
    """
    half_dof = 0.5 * (dim - 1)
    log_norm = float(log_vmf_normaliser(dim, kappa)) - kappa + float(special.betaln(half_dof, 0.5))

    def integrand(theta: float) -> float:
        sin = math.sin(theta)
        if sin <= 0.0:
            return 0.0
        log_density = kappa * (math.cos(theta) - 1.0) + (dim - 2) * math.log(sin) - log_norm
        return math.exp(log_density) * float(special.betainc(half_dof, half_dof, math.sin(0.5 * theta) ** 2))

    cos_mode = (math.sqrt((dim - 2.0) ** 2 + 4.0 * kappa * kappa) - (dim - 2.0)) / (2.0 * kappa)
    mode = math.acos(min(1.0, cos_mode))
    width = 1.0 / math.sqrt(kappa + dim)
    points = sorted({p for p in (mode + k * width for k in (-4, -1, 1, 4, 12)) if 0.0 < p < math.pi})
    value, error = integrate.quad(
        integrand, 0.0, math.pi, points=points, epsabs=1e-14, epsrel=1e-13, limit=_QUAD_LIMIT
    )
    return 1.0 - value, error


class VMFUniform(ExactModel):
    """vMF(x, kappa) positives for uniform anchors on S^{d-1}; negatives uniform (docs/theory.md section 6.1).

    Args:
        dim: d >= 2.
        kappa: concentration of the positive kernel M(x, .) = vMF(x, kappa), ``0 < kappa <= 1e10``
            (:data:`VMF_KAPPA_MAX`: beyond it the exact answers cancel to fewer than 6 digits).
        dtype: dtype of sampled tensors.

    Raises:
        ValueError: d < 2, kappa <= 0, kappa > 1e10 (or not finite), or a non-floating dtype.

    Examples:
        >>> model = VMFUniform(3, kappa=5.0)
        >>> x, y = model.sample(4, torch.Generator().manual_seed(0))
        >>> model.log_ratio(x[:, None, :], y[None, :, :]).shape
        torch.Size([4, 4])
    """

    def __init__(self, dim: int, kappa: float, dtype: torch.dtype = torch.float64) -> None:
        self._dim = check_count("dim", dim, 2)
        self.kappa = check("kappa", kappa, POSITIVE)
        if self.kappa > VMF_KAPPA_MAX:
            raise ValueError(
                f"kappa must be <= {VMF_KAPPA_MAX:g} (beyond it the exact answers lose their digits to "
                f"cancellation), got kappa={kappa!r}; use a smaller concentration"
            )
        self._dtype = check_dtype(dtype)
        self.log_normaliser = float(log_vmf_normaliser(dim, self.kappa))
        """log C_d(kappa)."""

    def __repr__(self) -> str:
        return f"VMFUniform(dim={self.dim}, kappa={self.kappa})"

    @property
    def base_measure(self) -> str:
        """The uniform probability measure on S^{d-1}."""
        return f"uniform probability measure on the unit sphere S^{self.dim - 1}"

    @property
    def negative_law(self) -> str:
        """p- is uniform on the sphere, which is both the anchor law and the positives' marginal."""
        return "uniform on the sphere (= the anchor law pi = the positives' marginal)"

    def sample_anchors(self, n: int, generator: torch.Generator) -> Tensor:
        """n uniform anchors on S^{d-1}, shape (n, d)."""
        return sample_uniform_sphere((check_count("n", n, 0),), self.dim, generator, self.dtype)

    def sample_positives(self, x: Tensor, generator: torch.Generator) -> Tensor:
        """y_i ~ vMF(x_i, kappa) for each row of x (n, d); x must be unit vectors."""
        check_finite_points("x", x, self.dim)
        return sample_vmf(x.reshape(-1, self.dim), self.kappa, generator, self.dtype).reshape(x.shape)

    def sample_negatives(self, shape: Sequence[int], generator: torch.Generator) -> Tensor:
        """Uniform negatives on S^{d-1}, shape ``tuple(shape) + (d,)``."""
        return sample_uniform_sphere(shape, self.dim, generator, self.dtype)

    def log_positive_density(self, x: Tensor, y: Tensor) -> Tensor:
        """``kappa <x, y> - log C_d(kappa)`` against the uniform probability on the sphere."""
        check_points("x", x, self.dim)
        check_points("y", y, self.dim)
        return vmf_log_density(x, y, self.kappa, self.log_normaliser)

    def log_negative_density(self, y: Tensor) -> Tensor:
        """0: p- is the base measure itself."""
        check_points("y", y, self.dim)
        return torch.zeros(y.shape[:-1], dtype=y.dtype, device=y.device)

    def mean_kl(self) -> float:
        """``KL(vMF(x, kappa) || uniform) = kappa A_d(kappa) - log C_d(kappa)`` (the same for every x)."""
        return self.kappa * float(vmf_mean_resultant_length(self.dim, self.kappa)) - self.log_normaliser

    def optimal_auc(self) -> float:
        """``E* = P[<x,y> > <x,y'>]``; quadrature with error estimate <= 1e-8 (d = 3: (1 + A_3(kappa))/2)."""
        value, error = vmf_uniform_optimal_auc(self.dim, self.kappa)
        if error > QUADRATURE_TOLERANCE:
            raise RuntimeError(f"E* quadrature error estimate {error:.2e} exceeds {QUADRATURE_TOLERANCE}")
        return value

    def anchor_density_ratio(self, z: Tensor, z2: Tensor) -> Tensor:
        """``dM(z, .)/dpi (z2) = exp(kappa <z, z2>) / C_d(kappa)`` (pi uniform)."""
        return torch.exp(self.log_positive_density(z, z2))

    def density_ratio_second_moment(self) -> float:
        """``E|dM/dpi|^2 = C_d(2 kappa) / C_d(kappa)^2`` (d = 3: kappa coth kappa); inf beyond float64."""
        log_value = float(log_vmf_normaliser(self.dim, 2.0 * self.kappa)) - 2.0 * self.log_normaliser
        return exp_or_inf(log_value)
