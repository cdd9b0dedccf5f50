"""The baselines a learned representation must beat: PCA against numpy's SVD, class retrieval in a gallery against a
brute force, and the paired bootstrap of learned minus baseline against the exact binomial law."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy import stats

from crl.metrics.baselines import (
    COMPARED,
    compare,
    compare_with_baselines,
    feature_scores,
    pca_dimension,
    pca_pixels,
)
from crl.metrics.classification import knn_predictions
from crl.metrics.ir import DEFAULT_KS, gallery_class_retrieval
from tests.metrics.ir_reference import brute_force


def _svd_reference(gallery: np.ndarray, queries: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """V_d^T (x - mean) from numpy's SVD of the centred gallery, each axis's largest-magnitude entry positive."""
    mean = gallery.mean(axis=0)
    _, _, vt = np.linalg.svd(gallery - mean, full_matrices=False)
    axes = vt[:dim].T
    axes = axes * np.sign(axes[np.abs(axes).argmax(axis=0), np.arange(dim)])
    return (gallery - mean) @ axes, (queries - mean) @ axes


def test_pca_equals_numpy_svd() -> None:
    generator = np.random.default_rng(0)
    mixing = generator.normal(size=(12, 12)) * np.linspace(3.0, 0.1, 12)
    gallery = generator.normal(size=(300, 12)) @ mixing + 5.0
    queries = generator.normal(size=(40, 12)) @ mixing + 5.0
    for dim in (1, 5, 12):
        got_gallery, got_queries = pca_pixels(
            torch.from_numpy(gallery).float(), torch.from_numpy(queries).float(), dim
        )
        want_gallery, want_queries = _svd_reference(
            gallery.astype(np.float32).astype(np.float64), queries.astype(np.float32).astype(np.float64), dim
        )
        assert got_gallery.shape == (300, dim) and got_queries.shape == (40, dim)
        np.testing.assert_allclose(got_gallery.numpy(), want_gallery, atol=2e-4)
        np.testing.assert_allclose(got_queries.numpy(), want_queries, atol=2e-4)


def test_pca_takes_images_and_refuses_widths_beyond_the_gallery() -> None:
    images = torch.rand(20, 1, 3, 3)
    assert pca_pixels(images, images[:4], 9)[1].shape == (4, 9)
    assert pca_dimension(64, 784, 55000) == 64 and pca_dimension(3136, 784, 55000) == 784
    with pytest.raises(
        ValueError, match="dim = 10; the PCA of 20 gallery inputs of 9 values has 1 to 9 axes"
    ):
        pca_pixels(images, images, 10)


def test_gallery_class_retrieval_equals_a_brute_force_by_cosine() -> None:
    generator = torch.Generator().manual_seed(1)
    gallery, queries = torch.randn(120, 6, generator=generator), torch.randn(30, 6, generator=generator)
    gallery_labels, query_labels = torch.arange(120) % 5, torch.arange(30) % 5
    report = gallery_class_retrieval(queries, query_labels, gallery, gallery_labels)
    unit = lambda m: (m / m.norm(dim=1, keepdim=True)).double().numpy()  # noqa: E731
    qrels = [set(np.flatnonzero(gallery_labels.numpy() == label).tolist()) for label in query_labels.tolist()]
    expected = brute_force(unit(gallery), unit(queries), qrels)
    for name, by_k in DEFAULT_KS.items():
        for k in by_k:
            assert report.values[name][k] == pytest.approx(expected[name][k], abs=1e-6), (name, k)


def test_feature_scores_are_the_per_query_figures() -> None:
    generator = torch.Generator().manual_seed(2)
    gallery, queries = torch.randn(150, 5, generator=generator), torch.randn(25, 5, generator=generator)
    gallery_labels, query_labels = torch.arange(150) % 3, torch.arange(25) % 3
    scores = feature_scores("z", gallery, queries, gallery_labels, query_labels, n_classes=3, knn_k=7)
    predicted = knn_predictions(gallery, gallery_labels, queries, k=7, n_classes=3)
    assert set(scores.per_query) == set(COMPARED) and scores.dimension == 5
    np.testing.assert_array_equal(
        scores.per_query["knn_accuracy"], (predicted == query_labels).double().numpy()
    )
    assert scores.means()["class_accuracy@1"] == scores.retrieval.values["accuracy"][1]
    assert scores.means()["class_map@100"] == scores.retrieval.values["map"][100]


def test_the_paired_interval_matches_the_binomial_law_and_the_pairing() -> None:
    """Learned and baseline agree except on 300 of 2,000 queries where only the learned vectors are right: every
    bootstrap mean of the differences is Binomial(2000, 0.15) / 2000, so the 95% interval is its 2.5% and 97.5%
    quantiles (within a resample's step 1/2000 and the Monte-Carlo error). The baseline's own per-query values vary
    wildly, yet the interval of a paired difference ignores them: when the two agree everywhere it is [0, 0]."""
    generator = torch.Generator().manual_seed(3)
    base = feature_scores(
        "pixels",
        torch.randn(120, 4, generator=generator),
        torch.randn(20, 4, generator=generator),
        torch.arange(120) % 2,
        torch.arange(20) % 2,
        n_classes=2,
    )
    size = 2000
    rng = np.random.default_rng(4)
    baseline_values = rng.integers(0, 2, size).astype(np.float64)
    gains = np.zeros(size)
    gains[rng.choice(np.flatnonzero(baseline_values == 0), 300, replace=False)] = 1.0
    baseline = replace(base, per_query={name: baseline_values for name in COMPARED})
    learned = replace(base, name="h", per_query={name: baseline_values + gains for name in COMPARED})
    difference = compare(learned, baseline, draws=20000)["class_accuracy@1"]
    low, high = stats.binom.ppf([0.025, 0.975], size, 0.15) / size
    assert difference.delta == pytest.approx(0.15, abs=1e-12)
    assert difference.low == pytest.approx(low, abs=2 / size) and difference.high == pytest.approx(
        high, abs=2 / size
    )
    same = compare(baseline, baseline)["knn_accuracy"]
    assert (same.delta, same.low, same.high) == (0.0, 0.0, 0.0)
    report = compare_with_baselines(learned, (baseline,), draws=2000).as_dict()
    assert report["learned"]["features"] == "h" and report["pixels"]["learned_minus"]["class_accuracy@1"][
        0
    ] == pytest.approx(0.15)
