"""Ground-truth models with exact answers (docs/theory.md section 6): samplers, log p+, log p-, s*, L*, E*, dM/dpi.

Every model implements :class:`GroundTruth`:

- :class:`VMFUniform` — vMF(x, kappa) positives, uniform anchors and negatives on S^{d-1};
- :class:`AsymmetricSphere` — vMF(-mixture) anchors on one axis, vMF positives, negatives from pi ([B]) or from
  the positives' marginal ([A]); the positives' marginal differs from pi;
- :class:`GaussianTwoTower` — x ~ N(0, I), y = rho x + sqrt(1 - rho^2) eps, negatives N(0, I);
- :class:`DiscreteLatent` — N one-hot items in K classes, positives from the anchor's class.

The vMF law's normaliser ``log C_d(kappa)`` and mean resultant length ``A_d(kappa)`` (:func:`log_vmf_normaliser`,
:func:`vmf_mean_resultant_length`) are public for the exact risks built on these models.
"""

from crl.synthetic._special import log_vmf_normaliser, vmf_mean_resultant_length
from crl.synthetic.asymmetric import AsymmetricSphere
from crl.synthetic.base import QUADRATURE_TOLERANCE, ExactModel, GroundTruth
from crl.synthetic.discrete import DiscreteLatent
from crl.synthetic.gaussian import GaussianTwoTower
from crl.synthetic.vmf import VMFUniform, sample_uniform_sphere, sample_vmf

__all__ = [
    "QUADRATURE_TOLERANCE",
    "AsymmetricSphere",
    "DiscreteLatent",
    "ExactModel",
    "GaussianTwoTower",
    "GroundTruth",
    "VMFUniform",
    "log_vmf_normaliser",
    "sample_uniform_sphere",
    "sample_vmf",
    "vmf_mean_resultant_length",
]
