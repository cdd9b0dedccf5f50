"""The contrastive objective family of docs/theory.md section 2, exact for any number of negatives m.

One definition of each loss lives here; training, risk estimates and claims all call these functions.
"""

from crl.objectives.individual_temperature import (
    IndividualTemperatureState,
    TemperatureRule,
    individual_temperature_loss,
)
from crl.objectives.infonce import (
    ContrastiveLoss,
    contrastive_form,
    contrastive_loss,
    contrastive_loss_from_scores,
)
from crl.objectives.masked import masked_contrastive_loss
from crl.objectives.moving_average import MovingAverageState, cosine_gamma, moving_average_loss
from crl.objectives.oce import CVaR, Entropic, oce_loss, oce_loss_from_scores
from crl.objectives.pairwise import pairwise_loss, pairwise_psi, sigmoid_loss
from crl.objectives.temperature import Temperature, resolve_tau
from crl.objectives.tiled import tiled_logsumexp, tiled_logsumexp_both

__all__ = [
    "CVaR",
    "ContrastiveLoss",
    "Entropic",
    "IndividualTemperatureState",
    "MovingAverageState",
    "Temperature",
    "TemperatureRule",
    "contrastive_form",
    "contrastive_loss",
    "contrastive_loss_from_scores",
    "cosine_gamma",
    "individual_temperature_loss",
    "masked_contrastive_loss",
    "moving_average_loss",
    "oce_loss",
    "oce_loss_from_scores",
    "pairwise_loss",
    "pairwise_psi",
    "resolve_tau",
    "sigmoid_loss",
    "tiled_logsumexp",
    "tiled_logsumexp_both",
]
