"""Held-out accuracy@1 and MRR on fixed held-out pairs while a run trains (``[run] eval_every``).

Every ``eval_every`` steps rank 0 embeds the first ``eval_pairs`` held-out pairs of the run's data (the pairs
``crl eval`` uses, :func:`crl.train.data.heldout_pairs`) with the current model and ranks each anchor's gallery
of held-out positives. Ties count against the anchor (pessimistic), as in :mod:`crl.metrics.retrieval`. The
monitor draws no random numbers and computes no gradients, and the encoders have no dropout or batch
statistics, so it leaves the training trajectory bitwise unchanged.
"""

from __future__ import annotations

import torch
from torch import Tensor

from crl.data import PairedArrays
from crl.models import DualEncoder, embed
from crl.train.config import TrainConfig
from crl.train.data import heldout_pairs

__all__ = ["HeldoutMonitor", "rank_of_positive"]


def rank_of_positive(queries: Tensor, gallery: Tensor) -> Tensor:
    """For each query i, how many gallery items other than its own positive i score at least as high (0: first)."""
    scores = queries @ gallery.T
    own = scores.diagonal().unsqueeze(1)
    return (scores >= own).sum(dim=1) - 1


class HeldoutMonitor:
    """Held-out accuracy@1 (hit rate at 1) and MRR of a model on fixed pairs.

    Args:
        pairs: the held-out pairs (all are used).
        batch_size: inputs per forward pass.
        device: where the model runs.
    """

    def __init__(self, pairs: PairedArrays, *, batch_size: int, device: torch.device) -> None:
        if pairs.n_pairs < 2:
            raise ValueError(f"the held-out monitor needs at least 2 pairs, got {pairs.n_pairs}")
        self.pairs = pairs
        self.batch_size = batch_size
        self.device = device

    @classmethod
    def from_config(cls, config: TrainConfig, device: torch.device) -> HeldoutMonitor:
        """The monitor of a run: the first ``run.eval_pairs`` held-out pairs of its data."""
        pairs = heldout_pairs(config)
        return cls(
            pairs.subset(slice(0, config.run.eval_pairs)), batch_size=config.eval.batch_size, device=device
        )

    def __call__(self, model: DualEncoder) -> dict[str, float]:
        """``{"heldout/accuracy@1": ..., "heldout/mrr": ...}`` of ``model`` (left in the mode it was in)."""
        training = model.training
        model.eval()
        try:
            queries = embed(
                model.encode_anchors, self.pairs.x, batch_size=self.batch_size, device=self.device
            )
            gallery = embed(
                model.encode_positives, self.pairs.y, batch_size=self.batch_size, device=self.device
            )
        finally:
            model.train(training)
        rank = rank_of_positive(queries.double(), gallery.double())
        return {
            "heldout/accuracy@1": float((rank == 0).double().mean()),
            "heldout/mrr": float((1.0 / (rank + 1).double()).mean()),
        }
