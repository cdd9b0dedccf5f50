"""Held-out figures on fixed data while a run trains (``[run] eval_every``), logged under ``heldout/``.

- Pair data (images, arrays, synthetic): every ``eval_every`` steps rank 0 embeds the first ``eval_pairs``
  held-out pairs of the run's data (the pairs ``crl eval`` uses, :func:`crl.train.data.heldout_pairs`) with the
  current model and ranks each anchor's gallery of held-out positives: accuracy@1 (hit rate at 1) and MRR. Ties
  count against the anchor (pessimistic), as in :mod:`crl.metrics.retrieval`.
- Text runs: a fixed retrieval task from the *validation* split (never trained on, and disjoint from the test
  split that ``crl eval`` ranks): the ``eval_pairs`` validation queries of smallest hash u(eval.seed, text)
  (``RetrievalTask.subset``), searching their relevant documents plus hashed validation distractors,
  ``eval_pairs`` documents in all when the split has them (``RetrievalTask.limit_corpus``). nDCG@10 and
  recall@10 as sentence-transformers defines them (:mod:`crl.metrics.ir`), the queries embedded by f and the
  documents by g, tokenised as training tokenises them (:func:`text_embedders`).

The monitors draw no random numbers and compute no gradients, and run the model in eval mode (no dropout, batch
statistics untouched) before restoring its mode, so they leave the training trajectory bitwise unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from crl.data import PairedArrays
from crl.data.source import Batch
from crl.data.text import RetrievalTask
from crl.metrics.text_retrieval import EmbedTexts, evaluate_retrieval
from crl.models import DualEncoder, embed
from crl.train.config import TextData, TrainConfig
from crl.train.data import heldout_pairs, text_task, text_tokenize

_log = logging.getLogger(__name__)

__all__ = [
    "TEXT_MONITOR_KS",
    "HeldoutMonitor",
    "Monitor",
    "TextHeldoutMonitor",
    "heldout_monitor",
    "rank_of_positive",
    "text_embedders",
]

Monitor = Callable[[DualEncoder], dict[str, float]]
"""model -> ``{"heldout/<metric>": value}``."""

TEXT_MONITOR_KS: dict[str, tuple[int, ...]] = {"ndcg": (10,), "recall": (10,)}
"""What the text monitor logs: nDCG@10 and recall@10."""


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


def text_embedders(
    model: DualEncoder,
    tokenize: Callable[[Sequence[str]], Batch],
    *,
    batch_size: int,
    device: torch.device,
) -> tuple[EmbedTexts, EmbedTexts]:
    """(texts -> f(texts), texts -> g(texts)): queries by the anchor tower f, documents by the positive tower g,
    (n, d) float32 on the CPU in the order given; the model runs in the mode it is in.

    The texts are embedded longest first (by characters, as sentence-transformers orders them), ``batch_size`` at
    a time, each batch tokenised by ``tokenize`` (e.g. :func:`crl.train.data.text_tokenize`) and padded to its own
    longest text only: padding changes no embedding, and texts of like length share a batch (1,500 WordNet glosses
    with MiniLM on one thread, batches of 128: 12.6 s, against 27.3 s in file order; batches of 1,024: 34.6 s)."""

    def by(encode: Callable[[Batch], Tensor]) -> EmbedTexts:
        def run(texts: Sequence[str]) -> Tensor:
            order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
            parts = []
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                parts.append(
                    embed(encode, tokenize([texts[i] for i in rows]), batch_size=batch_size, device=device)
                )
                _log.info("embedded", extra={"progress": (start + len(rows), len(order))})
            stacked = torch.cat(parts)
            vectors = torch.empty_like(stacked)
            vectors[torch.tensor(order)] = stacked
            return vectors

        return run

    return by(model.encode_anchors), by(model.encode_positives)


class TextHeldoutMonitor:
    """nDCG@10 and recall@10 (:data:`TEXT_MONITOR_KS`) of a text model on a fixed retrieval task.

    Args:
        task: the queries, documents and qrels (all are used).
        tokenize: texts -> mapping batch, as training tokenises them.
        batch_size: texts per forward pass.
        device: where the model runs.
    """

    def __init__(
        self,
        task: RetrievalTask,
        tokenize: Callable[[Sequence[str]], Batch],
        *,
        batch_size: int,
        device: torch.device,
    ) -> None:
        self.task = task
        self.tokenize = tokenize
        self.batch_size = batch_size
        self.device = device

    @classmethod
    def from_config(cls, config: TrainConfig, device: torch.device) -> TextHeldoutMonitor:
        """The monitor of a text run: ``run.eval_pairs`` validation queries and documents, chosen by the hash of
        their text with ``eval.seed`` (every relevant document of the queries kept).

        Raises:
            ValueError: if the run's data is not text, or its validation split is empty (naming val_fraction).
        """
        data = config.data
        if not isinstance(data, TextData):
            raise ValueError(f"[data] source = {data.source!r} is not a text source; use HeldoutMonitor")
        size, seed = config.run.eval_pairs, config.eval.seed
        task = text_task(data, "val").subset(size, seed).limit_corpus(size, seed)
        return cls(task, text_tokenize(data), batch_size=config.eval.batch_size, device=device)

    def __call__(self, model: DualEncoder) -> dict[str, float]:
        """``{"heldout/ndcg@10": ..., "heldout/recall@10": ...}`` of ``model`` (left in the mode it was in)."""
        training = model.training
        model.eval()
        try:
            embedders = text_embedders(model, self.tokenize, batch_size=self.batch_size, device=self.device)
            result = evaluate_retrieval(self.task, *embedders, ks=TEXT_MONITOR_KS)
        finally:
            model.train(training)
        return {f"heldout/{name}": value for name, value in result.report.as_flat_dict().items()}


def heldout_monitor(config: TrainConfig, device: torch.device) -> Monitor:
    """The held-out monitor of a run's data: :class:`TextHeldoutMonitor` for text, else :class:`HeldoutMonitor`."""
    if isinstance(config.data, TextData):
        return TextHeldoutMonitor.from_config(config, device)
    return HeldoutMonitor.from_config(config, device)
