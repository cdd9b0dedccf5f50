"""The fixed test split of a locked-feature data set, and the held-out scores of a head on it.

A head trained on locked features (:mod:`crl.train.locked`) is scored on the whole test split of the same features:

- texts (WordNet, Bible): each distinct test query ranks the distinct test documents by <f(x), g(y)>, relevant =
  the documents its pairs name (:class:`crl.data.text.RetrievalTask`), scored by
  :func:`crl.metrics.text_retrieval.evaluate_retrieval`: nDCG@10, MRR@10, recall@k and accuracy@1;
- images (Fashion-MNIST): two-view recall@1, the first fixed view f(x_i) of each test image retrieving its own
  second view g(y_i) among all test images' second views (one positive, so recall@1 = accuracy@1); and class
  retrieval accuracy@1, f(x_i) retrieving among the other test images' first views, a hit when the top one has the
  query's class (:func:`crl.metrics.ir.class_retrieval`).

The baseline of every head is the backbone's own features, no head (:func:`identity_scores`: f = g = the identity,
normalised; pixels centred by the test anchors' mean, the same shift on both sides): the zero-shot map a head
on these features starts from in a LiT-style setup.

Used by the m*(n) experiment's cells and by ``crl advise`` on locked features.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from crl.data.source import Batch
from crl.data.text import RetrievalTask
from crl.metrics.ir import class_retrieval
from crl.metrics.retrieval import retrieval_metrics
from crl.metrics.text_retrieval import evaluate_retrieval
from crl.models import embed
from crl.train.config import LockedData
from crl.train.locked import locked_split, text_pairs

__all__ = ["Encode", "HeldOut", "identity_scores", "load_heldout", "score"]

Encode = Callable[[Batch], Tensor]
"""A tower: a batch of features -> its embeddings."""

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
    config = LockedData.model_validate(
        {"dataset": dataset, "backbone": backbone, "backbone_path": backbone_path}
    )
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


def identity_scores(heldout: HeldOut, backbone: str) -> dict[str, float]:
    """:func:`score` of the backbone's features themselves, f(x) = x / |x|, g(y) = y / |y| (``pixels`` centred first
    by the test anchors' mean, the same shift on both sides): the zero-shot baseline of a head (module docstring)."""
    shift = heldout.x.mean(dim=0) if backbone == "pixels" else torch.zeros(())

    def identity(features: Batch) -> Tensor:
        assert isinstance(features, Tensor)
        return torch.nn.functional.normalize(features - shift, dim=1)

    return score(heldout, identity, identity)
