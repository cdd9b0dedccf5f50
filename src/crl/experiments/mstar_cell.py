"""One cell of the m*(n) experiment: a training run through ``crl.train.loop.train``, then the held-out score.

The cell's config comes from :func:`crl.experiments.mstar_design.train_config`; its training pairs from
:func:`crl.train.data.build_source` (locked features through the feature cache, or fresh views of images), and it
is scored on the fixed test split of its data set's locked features (:class:`HeldOut`):

- WordNet (texts): each distinct test definition queries the distinct test lemma lists, relevant = the lists its
  pairs name (:class:`crl.data.text.RetrievalTask`), ranked by <f(x), g(y)> and scored by
  :func:`crl.metrics.text_retrieval.evaluate_retrieval`; primary metric nDCG@10, with MRR@10, recall@k and
  accuracy@1 beside;
- Fashion-MNIST (images): two-view recall@1, the first fixed view f(x_i) of each test image retrieving its own
  second view g(y_i) among all test images' second views (one positive, so recall@1 = accuracy@1); and class
  retrieval accuracy@1, f(x_i) retrieving among the other test images' first views, a hit when the top one has the
  query's class (:func:`crl.metrics.ir.class_retrieval`).

The baseline cell scores the backbone's features themselves (f = g = identity; pixels centred by the test
anchors' mean, the same shift on both sides). A NaN or infinite training loss ends the cell as ``status =
"diverged"`` with its reason; it is counted in the summary, never used as a metric value.

Besides the scores a cell records its mean training loss per complete epoch of the data cursor:
``last_epoch_change`` = the last epoch's mean - the one before's, and ``loss_drop`` = the first epoch's mean - the
last's (None with fewer than two complete epochs); the convergence check of docs/claims/C6_real.md is
|last_epoch_change| < 1% of loss_drop (the gcl loss can be of either sign, so the change is read against the drop).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from crl.data import PairSource
from crl.data.source import Batch
from crl.data.text import RetrievalTask
from crl.experiments.mstar_design import locked_data, train_config
from crl.metrics.ir import class_retrieval
from crl.metrics.retrieval import retrieval_metrics
from crl.metrics.text_retrieval import evaluate_retrieval
from crl.models import embed
from crl.sweep import Cell
from crl.train.build import Streams
from crl.train.config import DataConfig
from crl.train.data import build_source
from crl.train.locked import locked_split, text_pairs
from crl.train.loop import StepMetrics, train

__all__ = ["HeldOut", "compute_cell", "epoch_losses", "load_heldout", "run_cell", "score"]

Encode = Callable[[Batch], Tensor]
_EMBED_BATCH = 4096


@dataclass(frozen=True)
class HeldOut:
    """The fixed test split of a data set, as locked features.

    Attributes:
        x, y: (N, D_x) and (N, D_y) features of the test pairs (anchor and positive side).
        labels: (N,) classes (images), or ``None`` (texts).
        task: the text retrieval task (queries, corpus, qrels), or ``None`` (images).
        query_rows, corpus_rows: the row of x (y) that holds each query's (document's) features.
    """

    x: Tensor
    y: Tensor
    labels: Tensor | None = None
    task: RetrievalTask | None = None
    query_rows: Mapping[str, int] | None = None
    corpus_rows: Mapping[str, int] | None = None


def _first_rows(texts: Sequence[str]) -> dict[str, int]:
    """Each distinct text's first index (identical texts have identical features)."""
    rows: dict[str, int] = {}
    for index, text in enumerate(texts):
        rows.setdefault(text, index)
    return rows


@functools.lru_cache(maxsize=2)
def load_heldout(dataset: str, backbone: str, backbone_path: str, n_test: int) -> HeldOut:
    """The test split's locked features (computed once into the feature cache), the first ``n_test`` images or
    a fixed sample of ``n_test`` text queries over the whole corpus (0: all)."""
    config = locked_data(dataset, backbone, backbone_path)
    found = locked_split(config, "test")
    x, y = found.features.x, found.features.y
    if found.labels is not None:
        count = n_test or x.shape[0]
        return HeldOut(x[:count], y[:count], labels=found.labels[:count])
    pairs = text_pairs(config, "test")
    task = RetrievalTask.from_pairs(pairs).subset(n_test)
    return HeldOut(
        x,
        y,
        task=task,
        query_rows=_first_rows([p.query for p in pairs]),
        corpus_rows=_first_rows([p.positive for p in pairs]),
    )


def _rows(features: Tensor, rows: Mapping[str, int], encode: Encode) -> Callable[[Sequence[str]], Tensor]:
    """Texts -> the embeddings of their features' rows."""

    def embed_texts(texts: Sequence[str]) -> Tensor:
        index = torch.tensor([rows[text] for text in texts], dtype=torch.int64)
        return embed(encode, features[index], batch_size=_EMBED_BATCH, device=torch.device("cpu"))

    return embed_texts


def score(heldout: HeldOut, encode_x: Encode, encode_y: Encode) -> dict[str, float]:
    """The held-out metrics of the towers (module docstring): texts ``ndcg@10, mrr@10, recall@k, accuracy@1``;
    images ``recall@1`` (two views) and ``class_accuracy@1``."""
    if heldout.task is not None:
        assert heldout.query_rows is not None and heldout.corpus_rows is not None
        ranked = evaluate_retrieval(
            heldout.task,
            _rows(heldout.x, heldout.query_rows, encode_x),
            _rows(heldout.y, heldout.corpus_rows, encode_y),
        )
        return ranked.report.as_flat_dict()
    assert heldout.labels is not None
    cpu = torch.device("cpu")
    anchors = embed(encode_x, heldout.x, batch_size=_EMBED_BATCH, device=cpu)
    positives = embed(encode_y, heldout.y, batch_size=_EMBED_BATCH, device=cpu)
    pairs = retrieval_metrics(anchors, positives, positive_index=torch.arange(anchors.shape[0]), ks=(1,))
    classes = class_retrieval(anchors, heldout.labels, ks={"accuracy": (1,)})
    return {"recall@1": pairs.accuracy_at_k[1].mean, "class_accuracy@1": classes.values["accuracy"][1]}


def epoch_losses(metrics: Sequence[StepMetrics]) -> list[float]:
    """The mean training loss of each complete epoch of the data cursor, in order (a last epoch with fewer steps
    than the first is left out)."""
    by_epoch: dict[int, list[float]] = {}
    for row in metrics:
        by_epoch.setdefault(row.epoch, []).append(row.loss)
    groups = [values for _, values in sorted(by_epoch.items())]
    complete = [values for values in groups if len(values) == len(groups[0])]
    return [sum(values) / len(values) for values in complete]


@functools.lru_cache(maxsize=2)
def _source(data: DataConfig) -> PairSource:
    """The training pairs of ``[data]``, loaded once per worker process for every cell of the same data (the
    locked and the image sources read no seed: their features or images are fixed)."""
    return build_source(data, seed=0)


def _backbone(params: Mapping[str, Any], heldout: HeldOut) -> dict[str, Any]:
    """The baseline: the features themselves, normalised (pixels centred first)."""
    shift = heldout.x.mean(dim=0) if params["heldout"]["backbone"] == "pixels" else torch.zeros(())

    def identity(features: Batch) -> Tensor:
        assert isinstance(features, Tensor)
        return torch.nn.functional.normalize(features - shift, dim=1)

    return {"status": "ok", **score(heldout, identity, identity)}


def run_cell(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Train the cell's config (or take the backbone for the baseline) and score it on the fixed test split.

    Returns:
        ``status`` ("ok" or "diverged" with ``reason``), the metrics of :func:`score`, ``final_loss``,
        ``epoch_loss`` (per cursor epoch), ``last_epoch_change``, ``loss_drop``, ``steps`` and ``train_s``.
    """
    spec = params["heldout"]
    heldout = load_heldout(spec["dataset"], spec["backbone"], spec["backbone_path"], int(spec["n_test"]))
    if params["arm"] == "backbone":
        return _backbone(params, heldout)
    config = train_config(params, seed)
    start = time.perf_counter()
    try:
        outcome = train(config, _source(config.data), Streams.derive(seed, regime=config.loss.regime))
    except FloatingPointError as error:
        return {"status": "diverged", "reason": str(error)}
    seconds = time.perf_counter() - start
    model = outcome.model.eval()
    with torch.no_grad():
        scores = score(heldout, model.encode_anchors, model.encode_positives)
    losses = epoch_losses(outcome.metrics)
    return {
        "status": "ok",
        **scores,
        "final_loss": outcome.metrics[-1].loss,
        "epoch_loss": losses,
        "last_epoch_change": losses[-1] - losses[-2] if len(losses) > 1 else None,
        "loss_drop": losses[0] - losses[-1] if len(losses) > 1 else None,
        "steps": len(outcome.metrics),
        "train_s": seconds,
    }


def compute_cell(cell: Cell) -> dict[str, Any]:
    """:func:`run_cell` of a sweep cell (module-level, so process-pool and Ray workers can run it)."""
    return run_cell(cell.params, cell.seed)
