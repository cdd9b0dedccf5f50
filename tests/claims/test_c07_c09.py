"""Tests of claims C7, C8 (C9: test_c09.py): each quick run ends PASS with its control FAIL, and their helpers."""

import pytest
import torch

from crl.claims._kernel_series import doubling
from crl.claims._sphere_kernel import sphere_embedding
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
