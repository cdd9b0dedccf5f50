"""Tests of claims C7, C8, C9: each quick run ends PASS with its negative control FAIL, and their helpers."""

import math

import numpy as np
import pytest
import torch

from crl.claims._kernel_series import doubling
from crl.claims._sphere_kernel import sphere_embedding
from crl.claims._temperature_parts import (
    closed_form_best_kl,
    kernel_extremes,
    lifted_embedding,
    random_mlp_embedding,
    trained_mlp_embedding,
)
from crl.metrics.risk import kernel_divergences, learned_log_density_ratio, uniform_sphere_quadrature
from crl.synthetic.vmf import VMFUniform


def test_doubling_grid() -> None:
    """If this fails, the k grids of C7/C8 are not the powers-of-two multiples the rule names."""
    assert doubling(128, 2048) == (128, 256, 512, 1024, 2048)


def test_linear_embedding_is_on_the_sphere_but_no_isometry() -> None:
    """If this fails, C7/C8's second phi is off the unit sphere or is a rotation (no test beyond phi = id)."""
    embed = sphere_embedding("linear", 3)
    z = VMFUniform(3, 1.0).sample_anchors(200, torch.Generator().manual_seed(0))
    image = embed(z)
    assert torch.allclose(image.norm(dim=1), torch.ones(200, dtype=torch.float64), atol=1e-12)
    assert float((image @ image.T - z @ z.T).abs().max()) > 0.1
    with pytest.raises(ValueError, match="phi kind"):
        sphere_embedding("rotation", 0)


@pytest.mark.parametrize("c", [0.0, 0.3, 1.0])
def test_lifted_embedding_gives_shifted_scaled_cosine(c: float) -> None:
    """If this fails, phi_c would not give <phi_c z, phi_c z'> = c<z,z'> + 1 - c on the unit sphere (Q = vMF(c/tau))."""
    z = VMFUniform(3, 1.0).sample_anchors(50, torch.Generator().manual_seed(1))
    image = lifted_embedding(c)(z)
    assert torch.allclose(image.norm(dim=1), torch.ones(50, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(image @ image.T, c * (z @ z.T) + 1 - c, atol=1e-12)
    with pytest.raises(ValueError, match="c="):
        lifted_embedding(1.5)


@pytest.mark.usefixtures("one_thread")
def test_closed_form_best_kl_by_quadrature_over_c() -> None:
    """If this fails, C9's reference curve min_c KL(vMF(kappa)||vMF(c/tau)) is wrong.

    The grid of c (step 0.05) contains every minimiser: c = kappa tau for kappa tau <= 1, else c = 1.
    """
    kappa = 4.0
    nodes, weights = uniform_sphere_quadrature(64, 128)
    anchor = nodes[:1]
    log_m = kappa * anchor @ nodes.T - (kappa + math.log1p(-math.exp(-2 * kappa)) - math.log(2 * kappa))
    for tau in (0.2, 0.25, 0.5, 1.0):
        kls = []
        for c in np.linspace(0.0, 1.0, 21):
            embed = lifted_embedding(float(c))
            log_q = learned_log_density_ratio(embed(anchor), embed(nodes), tau=tau, support_weights=weights)
            kls.append(
                float(kernel_divergences(log_q, log_m, support_weights=weights).kl_kernel_to_learned[0])
            )
        assert min(kls) == pytest.approx(closed_form_best_kl(kappa, tau), abs=1e-9)
    assert closed_form_best_kl(kappa, 0.1) == 0.0
    assert (
        0
        < closed_form_best_kl(kappa, 0.35)
        < closed_form_best_kl(kappa, 0.7)
        < closed_form_best_kl(kappa, 1.5)
    )


@pytest.mark.usefixtures("one_thread")
def test_training_moves_the_kernel_towards_m() -> None:
    """If this fails, C9's "trained phi" is not trained: its E KL(M||Q) is no better than a random MLP's."""
    model = VMFUniform(3, 4.0)
    tau = 0.25
    random = kernel_extremes(model, random_mlp_embedding(5), tau)
    trained = kernel_extremes(model, trained_mlp_embedding(model, tau, 5), tau)
    assert trained.mean_kl_kernel_to_learned < random.mean_kl_kernel_to_learned / 5
    assert trained.sup_abs_log_ratio <= 2 / tau
