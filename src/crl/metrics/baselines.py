"""Does a learned representation search better than its input? Its vectors beside two baselines, on the same queries.

The baselines are made of the raw inputs of the same images:

- ``pixels``: the inputs flattened and centred by the gallery's mean, x - mean_gallery(x)
  (:func:`crl.metrics.class_report.centred_pixels`);
- ``pca``: the centred pixels on the gallery's top d principal axes, x -> V_d^T (x - mean_gallery(x)), where
  X = U S V^T is the SVD of the centred gallery (N, D) and V_d its first d right singular vectors, d the learned
  vectors' dimension (at most D and N). The axes are fit on the gallery alone; each axis's entry of largest
  magnitude is made positive (scikit-learn's ``svd_flip`` rule), which changes no cosine.

Every feature set is scored per query q (the M test images searching the gallery, the training images, by cosine):

- ``class_accuracy@1``: 1 when the gallery item of highest cosine has q's class;
- ``class_map@100``: AP@100 = (1 / min(100, R_q)) sum_{r <= 100, rel(r)} precision@r, the R_q gallery items of q's
  class relevant (:mod:`crl.metrics.ir`; ties pessimistic);
- ``knn_accuracy``: 1 when the weighted cosine kNN (:func:`crl.metrics.classification.knn_predictions`) predicts
  q's class.

Learned minus baseline (:func:`compare`): delta = (1/M) sum_q (l_q - b_q), with the percentile bootstrap of
:func:`crl.metrics.text_retrieval.paired_bootstrap` resampling the queries (paired, so the two feature sets keep
their shared per-query difficulty).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from crl.metrics.class_report import centred_pixels
from crl.metrics.classification import knn_predictions
from crl.metrics.ir import IRReport, capped_ks, gallery_class_retrieval
from crl.metrics.text_retrieval import Difference, paired_bootstrap

__all__ = [
    "COMPARED",
    "BaselineComparison",
    "FeatureScores",
    "compare",
    "compare_with_baselines",
    "feature_scores",
    "pca_dimension",
    "pca_pixels",
]

COMPARED = ("class_accuracy@1", "class_map@100", "knn_accuracy")
"""The per-query figures every feature set is scored by (MAP's cut-off lowered to a smaller gallery's size)."""

_KS = {"accuracy": (1,), "map": (100,)}
"""The class-retrieval cut-offs scored."""


def pca_dimension(dimension: int, n_features: int, n_gallery: int) -> int:
    """d = min(the learned vectors' dimension, D pixels, N gallery items): the PCA baseline's width."""
    return min(dimension, n_features, n_gallery)


def _principal_axes(centred: Tensor, dim: int, chunk: int = 8192) -> Tensor:
    """V_d (D, d) float64: the top ``dim`` eigenvectors of X^T X (the right singular vectors of X), by decreasing
    eigenvalue, each with its entry of largest magnitude positive."""
    scatter = torch.zeros(centred.shape[1], centred.shape[1], dtype=torch.float64)
    for start in range(0, centred.shape[0], chunk):
        rows = centred[start : start + chunk].double()
        scatter += rows.T @ rows
    _, vectors = torch.linalg.eigh(scatter)
    axes = vectors.flip(1)[:, :dim]
    signs = torch.sign(axes.gather(0, axes.abs().argmax(dim=0, keepdim=True)))
    return axes * signs


def pca_pixels(gallery_inputs: Tensor, query_inputs: Tensor, dim: int) -> tuple[Tensor, Tensor]:
    """(gallery, queries) as V_d^T (x - mean_gallery(x)), float32 (N, d) and (M, d); see the module docstring.

    Raises:
        ValueError: unless 1 <= dim <= min(D, N) for N gallery inputs of D values each.
    """
    gallery, queries = centred_pixels(gallery_inputs, query_inputs)
    limit = min(gallery.shape)
    if not 1 <= dim <= limit:
        raise ValueError(
            f"dim = {dim}; the PCA of {gallery.shape[0]} gallery inputs of {gallery.shape[1]} values has 1 to "
            f"{limit} axes (pca_dimension gives the width to use)"
        )
    axes = _principal_axes(gallery, dim)
    return (gallery.double() @ axes).float(), (queries.double() @ axes).float()


@dataclass(frozen=True)
class FeatureScores:
    """One feature set scored on the test queries.

    Attributes:
        name: the feature set ("h", "z", "pixels", "pca", ...).
        dimension: its width.
        per_query: :data:`COMPARED`'s names -> (M,) float64 values, one per query.
        retrieval: its class-retrieval report (every cut-off asked for).
    """

    name: str
    dimension: int
    per_query: dict[str, np.ndarray] = field(repr=False)
    retrieval: IRReport = field(repr=False)

    def means(self) -> dict[str, float]:
        """Each figure's mean over the queries."""
        return {name: float(values.mean()) for name, values in self.per_query.items()}


def feature_scores(
    name: str,
    gallery: Tensor,
    queries: Tensor,
    gallery_labels: Tensor,
    query_labels: Tensor,
    *,
    n_classes: int,
    knn_k: int = 20,
    knn_temperature: float = 0.07,
    knn_correct: Tensor | None = None,
    ks: Mapping[str, tuple[int, ...]] | None = None,
) -> FeatureScores:
    """Class retrieval (cut-offs ``ks`` with accuracy@1 and MAP@100 added, lowered to the gallery's size) and
    kNN accuracy of ``queries`` (M, d) against ``gallery`` (N, d); ``knn_correct`` (M,) reuses kNN outcomes
    already computed with the same k and T."""
    size = gallery.shape[0]
    merged = {metric: {*values} for metric, values in (ks or {}).items()}
    for metric, values in _KS.items():
        merged[metric] = merged.get(metric, set()) | set(values)
    chosen = capped_ks({metric: tuple(values) for metric, values in merged.items()}, size)
    report = gallery_class_retrieval(queries, query_labels, gallery, gallery_labels, ks=chosen)
    if knn_correct is None:
        predicted = knn_predictions(
            gallery,
            gallery_labels,
            queries,
            k=min(knn_k, gallery.shape[0]),
            temperature=knn_temperature,
            n_classes=n_classes,
        )
        knn_correct = predicted == query_labels
    per_query = {
        COMPARED[0]: report.per_query["accuracy"][1],
        COMPARED[1]: report.per_query["map"][min(_KS["map"][0], size)],
        COMPARED[2]: knn_correct.double().numpy(),
    }
    return FeatureScores(name, int(gallery.shape[1]), per_query, report)


def compare(
    learned: FeatureScores, baseline: FeatureScores, *, draws: int = 10000, level: float = 0.95, seed: int = 0
) -> dict[str, Difference]:
    """learned - baseline for each of :data:`COMPARED`, each with its paired bootstrap interval at ``level``."""
    return {
        name: paired_bootstrap(
            baseline.per_query[name], learned.per_query[name], draws=draws, level=level, seed=seed
        )
        for name in COMPARED
    }


@dataclass(frozen=True)
class BaselineComparison:
    """Learned vectors beside baselines on the same queries.

    Attributes:
        learned: the learned vectors' scores.
        baselines: each baseline's scores.
        differences: baseline name -> figure -> learned minus baseline with its interval.
        level: the intervals' confidence level.
        draws: the bootstrap's resamples.
    """

    learned: FeatureScores
    baselines: tuple[FeatureScores, ...]
    differences: dict[str, dict[str, Difference]]
    level: float
    draws: int

    def as_dict(self) -> dict[str, Any]:
        """``{"learned": {"features", "dimension", figures}, "<baseline>": {"dimension", figures, "learned_minus":
        {figure: [delta, low, high]}}, "level", "draws"}``: the block of eval.json."""
        first = next(iter(next(iter(self.differences.values())).values()))
        out: dict[str, Any] = {
            "learned": {
                "features": self.learned.name,
                "dimension": self.learned.dimension,
                **self.learned.means(),
            },
            "level": first.level,
        }
        for baseline in self.baselines:
            minus = {
                name: [difference.delta, difference.low, difference.high]
                for name, difference in self.differences[baseline.name].items()
            }
            out[baseline.name] = {"dimension": baseline.dimension, **baseline.means(), "learned_minus": minus}
        return out


def compare_with_baselines(
    learned: FeatureScores,
    baselines: Sequence[FeatureScores],
    *,
    draws: int = 10000,
    level: float = 0.95,
    seed: int = 0,
) -> BaselineComparison:
    """:func:`compare` of the learned vectors with each baseline (every interval from the same ``seed``, so all
    resample the same query sets).

    Raises:
        ValueError: if ``baselines`` is empty.
    """
    if not baselines:
        raise ValueError("baselines is empty; pass the pixels' scores (and the PCA's) to compare with")
    differences = {
        baseline.name: compare(learned, baseline, draws=draws, level=level, seed=seed)
        for baseline in baselines
    }
    return BaselineComparison(learned, tuple(baselines), differences, level, draws)
