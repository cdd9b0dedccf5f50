"""The probability that the advisor's direction is right, read from the answer's own standardised statistic.

The strength of an answer is z = |D_hat| / scale, scale = sqrt(se_a^2 + se_b^2 + drift^2) the interval's half-width
per unit of q (:attr:`crl.advise.local.LocalEstimate.scale`). This is the statistic the answer already decides by
(``decided`` is z > q), and its scale holds the drift, which on the committed grids is most of it (drift / scale
above 0.71 at 44 of the 48 calibration points, median 0.97); the seed-noise-only ratio |D_hat| / sqrt(se_a^2 +
se_b^2) would ignore the error the answer makes by looking one doubling back.

The map is p_right(z) = Phi(c z): the chance that sign(D_hat) is the measured sign of the next step's D if
D = D_hat + (scale / c) e with e standard normal; one parameter, monotone in z, p_right(0) = 1/2 and p_right >= 1/2
for every z >= 0. c is :data:`C`, fitted on the decisive calibration points only (the measured D's Welch 95%
interval excludes 0, so "right" is defined): 37 of the 48 points of docs/advisor_calibration.json, 36 of them
right, by Firth-penalised maximum likelihood (the Jeffreys prior, log L(c) + log I(c) / 2 with
I(c) = sum z_i^2 phi(c z_i)^2 / (Phi(c z_i) (1 - Phi(c z_i)))). The plain maximum likelihood sits at the edge of
separation (the one wrong point has the smallest z of all 37; without its grid it is infinite); the penalty keeps
c finite, and left one grid out it scores better than the plain fit (docs/advisor_reliability.md: Brier 0.025
against 0.027, log loss 0.087 against 0.58). Phi rather than a logistic: the normal-error reading above.

The probability is conditional on the next doubling making a measurable difference (a decisive point): where the
two doublings do about equally well, neither direction is wrong.
"""

from __future__ import annotations

import math

from crl.advise.local import LocalEstimate

__all__ = ["C_POINTS", "C_RIGHT", "C", "chance_words", "p_right", "strength"]

C = 6.08
"""Phi(c z)'s c: the Firth-penalised fit on the 37 decisive points of docs/advisor_calibration.json (6.0807,
rounded), written by ``python -m studies.advisor_reliability --out-md docs/advisor_reliability.md --out-json
docs/advisor_reliability.json``."""

C_POINTS = 37
"""The decisive calibration points :data:`C` was fitted on."""

C_RIGHT = 36
"""Of :data:`C_POINTS`, those where sign(D_hat) agreed with the measured sign."""


def strength(estimate: LocalEstimate) -> float:
    """z = |D_hat| / scale (module docstring); inf when the scale is 0 and D_hat is not, 0 when both are."""
    if estimate.scale == 0.0:
        return math.inf if estimate.d_hat != 0.0 else 0.0
    return abs(estimate.d_hat) / estimate.scale


def p_right(z: float, c: float = C) -> float:
    """Phi(c z) = (1 + erf(c z / sqrt 2)) / 2 for z >= 0: the probability that the direction is right.

    Raises:
        ValueError: if z < 0 or c <= 0.
    """
    if not z >= 0 or not c > 0:
        raise ValueError(f"z = {z} and c = {c}: z = |D_hat| / scale must be >= 0 and c > 0")
    return 0.5 * (1.0 + math.erf(c * z / math.sqrt(2.0)))


def chance_words(p: float) -> str:
    """p in words, to a tenth: "right about k times in 10" with k = round(10 p) below 0.95, "right more than 9
    times in 10" from 0.95 (37 calibration points state no finer)."""
    if p >= 0.95:
        return "right more than 9 times in 10"
    return f"right about {round(10 * p)} times in 10"
