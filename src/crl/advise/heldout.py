"""The held-out error of a trained pilot model: the quantity err(n, m) of every advisor cell.

Three errors, all "lower is better" and positive:

- ``excess_risk`` (synthetic truths): [A]'s ``L(s_hat) - L* = tau E_x KL(p+_x || q_{s_hat,x})`` of the trained
  score ``s_hat(x, y) = <f(x), g(y)>`` at the model's tau, by :func:`crl.risk.excess_risk` with a sampled
  inner expectation; the truth is known, so this is the exact target up to Monte-Carlo error.
- ``knn_error`` (labelled data): ``1 -`` weighted kNN accuracy of the anchor embeddings f(x), a fixed labelled
  memory (the first ``memory`` training items) queried by the first ``queries`` test items.
- ``recall_error`` (any pairs): ``1 -`` recall@1 of the first ``queries`` held-out pairs (each f(x_i) retrieves
  its own g(y_i) among all of them). On locked image features (``[data] source = "locked"``): two-view recall@1 of
  the first ``queries`` test images' fixed views (0: all 10,000), as the m*(n) experiment scores it;
- ``ndcg_error`` (locked text features): ``1 -`` nDCG@10 of a fixed sample of ``queries`` distinct test queries
  (0: all) ranking the whole distinct test corpus, as the m*(n) experiment scores it
  (:mod:`crl.train.locked_heldout`).

Every pilot cell is scored on the same fixed evaluation items and draws, so differences between cells are not
evaluation noise.

The answer reads the cells against a :class:`Baseline` scored the same way: on locked features the backbone's own
features with no head (the zero-shot identity map, :func:`identity_baseline`); elsewhere, and on locked features
of two backbones (cjk), the untrained model the pilot's runs start from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from crl.metrics.classification import knn_accuracy
from crl.metrics.retrieval import retrieval_metrics
from crl.models import DualEncoder, embed
from crl.risk import excess_risk
from crl.train.config import LOCKED_TWO_MODALITIES, LockedData, TrainConfig
from crl.train.data import data_kind, heldout_pairs, labelled_inputs
from crl.train.locked_heldout import identity_scores, load_heldout, score
from crl.train.streams import derive_generator

__all__ = [
    "METRICS",
    "RATE_METRICS",
    "Baseline",
    "EvalSizes",
    "Metric",
    "default_metric",
    "heldout_error",
    "identity_baseline",
]

Metric = Literal["excess_risk", "knn_error", "recall_error", "ndcg_error"]
METRICS: tuple[Metric, ...] = ("excess_risk", "knn_error", "recall_error", "ndcg_error")

RATE_METRICS: tuple[Metric, ...] = ("knn_error", "recall_error", "ndcg_error")
"""The errors that are 1 - a rate, so never above 1 (the excess risk is not bounded)."""

_SPLIT_FIELDS = (
    "root",
    "cache_dir",
    "wordnet_pairs",
    "max_seq_length",
    "val_fraction",
    "test_fraction",
    "split_seed",
    "views_seed",
)
"""The locked source's fields that define its test split; the advisor scores the split at their defaults."""


@dataclass(frozen=True)
class EvalSizes:
    """How much held-out data scores a cell.

    Attributes:
        queries: held-out queries (kNN test items, recall@1 pairs) or anchors of the excess risk; on locked
            features 0 means the whole test split.
        memory: labelled training items of the kNN memory.
        inner: negatives per anchor of the excess risk's sampled inner expectation.
    """

    queries: int = 2000
    memory: int = 10000
    inner: int = 512


@dataclass(frozen=True)
class Baseline:
    """What the pilot's cells are read against: ``label`` in words, ``error`` its held-out error (same metric)."""

    label: str
    error: float


def _has_truth(config: TrainConfig) -> bool:
    """Whether the config's pairs come from a known ground truth (a synthetic source)."""
    return data_kind(config.data).truth is not None


def _locked(config: TrainConfig) -> LockedData | None:
    """The config's locked source, checked to use the default test split; None for any other source.

    Raises:
        ValueError: naming a ``[data]`` field that moves the test split away from its default.
    """
    data = config.data
    if not isinstance(data, LockedData):
        return None
    defaults = type(data).model_fields
    for name in _SPLIT_FIELDS:
        if getattr(data, name) != defaults[name].default:
            raise ValueError(
                f"crl advise scores heads on locked features on the default test split; [data] {name} = "
                f"{getattr(data, name)!r} changes it: remove {name} from the config"
            )
    return data


def default_metric(config: TrainConfig) -> Metric:
    """``ndcg_error`` for locked texts, ``recall_error`` for locked images, ``excess_risk`` for a synthetic truth,
    ``knn_error`` for labelled data, else ``recall_error``."""
    locked = _locked(config)
    if locked is not None:
        return "recall_error" if locked.dataset == "fashion_mnist" else "ndcg_error"
    if _has_truth(config):
        return "excess_risk"
    if labelled_inputs(config.data, "test") is not None:
        return "knn_error"
    return "recall_error"


def check_metric(config: TrainConfig, metric: str) -> Metric:
    """The metric, checked to be known and computable for the config's data.

    Raises:
        ValueError: naming ``--metric``, its value and the metrics this data allows.
    """
    synthetic = _has_truth(config)
    allowed: list[Metric] = ["excess_risk"] if synthetic else ["recall_error"]
    locked = _locked(config)
    if locked is not None:
        allowed = ["recall_error"] if locked.dataset == "fashion_mnist" else ["ndcg_error"]
    elif not synthetic and labelled_inputs(config.data, "test") is not None:
        allowed.insert(0, "knn_error")
    for known in allowed:
        if metric == known:
            return known
    raise ValueError(
        f"--metric {metric!r} is not available for [data] source = {config.data.source!r}; "
        f"use one of {', '.join(allowed)}"
    )


def _model_score(model: DualEncoder) -> object:
    """``s(x, y) = <f(x), g(y)>`` on broadcast (..., d) inputs, float64 out."""

    def score(x: Tensor, y: Tensor) -> Tensor:
        fx = model.encode_anchors(x.reshape(-1, x.shape[-1]).float()).reshape(*x.shape[:-1], -1)
        gy = model.encode_positives(y.reshape(-1, y.shape[-1]).float()).reshape(*y.shape[:-1], -1)
        return (fx * gy).sum(-1).double()

    return score


def _excess_risk(model: DualEncoder, config: TrainConfig, sizes: EvalSizes) -> float:
    truth = data_kind(config.data).truth
    assert truth is not None
    estimate = excess_risk(
        _model_score(model),  # type: ignore[arg-type]
        truth(config.data),
        float(model.tau()),
        generator=derive_generator(config.eval.seed, "advise-excess-risk"),
        n_anchors=sizes.queries,
        n_negatives=sizes.inner,
        inner="sampled",
    )
    return estimate.mean


def _knn_error(model: DualEncoder, config: TrainConfig, sizes: EvalSizes) -> float:
    train, test = labelled_inputs(config.data, "train"), labelled_inputs(config.data, "test")
    assert train is not None and test is not None
    memory, queries = train.inputs[: sizes.memory], test.inputs[: sizes.queries]
    batch, cpu = config.eval.batch_size, torch.device("cpu")
    accuracy = knn_accuracy(
        embed(model.encode_anchors, memory, batch_size=batch, device=cpu),
        train.labels[: sizes.memory],
        embed(model.encode_anchors, queries, batch_size=batch, device=cpu),
        test.labels[: sizes.queries],
        k=min(config.eval.knn_k, memory.shape[0]),
        temperature=config.eval.knn_temperature,
        n_classes=train.n_classes,
    )
    return 1.0 - accuracy


def _locked_scores(model: DualEncoder, config: TrainConfig, sizes: EvalSizes) -> dict[str, float]:
    """The m*(n) experiment's held-out scores of the head on the locked test split (:mod:`crl.train.locked_heldout`)."""
    locked = _locked(config)
    assert locked is not None
    heldout = load_heldout(locked.dataset, locked.backbone, locked.backbone_path, sizes.queries)
    return score(heldout, model.encode_anchors, model.encode_positives)


_LOCKED_SCORES: dict[Metric, str] = {"ndcg_error": "ndcg@10", "recall_error": "recall@1"}
"""The score of :func:`crl.train.locked_heldout.score` whose complement each locked metric is."""


def identity_baseline(config: TrainConfig, metric: Metric, sizes: EvalSizes) -> Baseline | None:
    """On locked features, the error of the backbone's own features with no head (f = g = identity, normalised: the
    zero-shot map, :func:`crl.train.locked_heldout.identity_scores`) on the cells' test split; None elsewhere, and
    where x and y come from two backbones (:data:`crl.train.config.LOCKED_TWO_MODALITIES`: no identity map joins
    features of two spaces)."""
    locked = _locked(config)
    if locked is None or locked.dataset in LOCKED_TWO_MODALITIES:
        return None
    heldout = load_heldout(locked.dataset, locked.backbone, locked.backbone_path, sizes.queries)
    scores = identity_scores(heldout, locked.backbone)
    return Baseline(
        f"the {locked.backbone} features themselves, no head (the zero-shot identity map)",
        1.0 - scores[_LOCKED_SCORES[metric]],
    )


def _ndcg_error(model: DualEncoder, config: TrainConfig, sizes: EvalSizes) -> float:
    return 1.0 - _locked_scores(model, config, sizes)[_LOCKED_SCORES["ndcg_error"]]


def _recall_error(model: DualEncoder, config: TrainConfig, sizes: EvalSizes) -> float:
    if isinstance(config.data, LockedData):
        return 1.0 - _locked_scores(model, config, sizes)[_LOCKED_SCORES["recall_error"]]
    pairs = heldout_pairs(config)
    count = min(sizes.queries, pairs.n_pairs)
    index = torch.arange(count)
    batch, cpu = config.eval.batch_size, torch.device("cpu")
    x, y = pairs.pairs(index, torch.Generator().manual_seed(config.eval.seed))
    report = retrieval_metrics(
        embed(model.encode_anchors, x, batch_size=batch, device=cpu),
        embed(model.encode_positives, y, batch_size=batch, device=cpu),
        positive_index=index,
        ks=(1,),
    )
    return 1.0 - report.recall_at_k[1].mean


def heldout_error(
    model: DualEncoder, config: TrainConfig, metric: Metric, sizes: EvalSizes | None = None
) -> float:
    """The held-out error of ``model`` trained under ``config`` (module docstring), in eval mode, no grad."""
    chosen = sizes if sizes is not None else EvalSizes()
    scorers = {
        "excess_risk": _excess_risk,
        "knn_error": _knn_error,
        "recall_error": _recall_error,
        "ndcg_error": _ndcg_error,
    }
    model.eval()
    with torch.no_grad():
        return float(scorers[metric](model, config, chosen))
